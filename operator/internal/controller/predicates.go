package controller

import (
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// Which watch events reach the reconciler: enough to see drift and status
// changes, and none of the operator's own writes.

// ignoreCreates drops create events. Every Memcached is reconciled at
// start-up through its own create event, which covers its owned objects.
var ignoreCreates = predicate.Funcs{CreateFunc: func(event.CreateEvent) bool { return false }}

// ownerReferencesChanged passes updates that change an object's owner
// references: a removed owner reference is drift the operator puts back.
var ownerReferencesChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	return !equality.Semantic.DeepEqual(e.ObjectOld.GetOwnerReferences(), e.ObjectNew.GetOwnerReferences())
}}

// changedByOthers passes Memcached updates that the operator did not make
// itself and that change more than the spec: a status edited by hand, a
// finalizer or label added by another client. The operator's own writes are
// recognised by their resourceVersion once their response has arrived, and
// by their content before that (the watch event often comes first): the
// finalizer added, or the status the operator is writing. Without the
// second test half the new Memcacheds were reconciled twice.
func (r *MemcachedReconciler) changedByOthers() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			cur, ok := e.ObjectNew.(*cachev1alpha1.Memcached)
			old, okOld := e.ObjectOld.(*cachev1alpha1.Memcached)
			if !ok || !okOld {
				return true
			}
			if r.tracker().isOwn(cur.UID, cur.ResourceVersion) {
				return false
			}
			return !r.onlyOwnChanges(old, cur)
		},
	}
}

// onlyOwnChanges reports whether cur differs from old only by what the
// operator writes: its finalizer added, the status it is writing.
func (r *MemcachedReconciler) onlyOwnChanges(old, cur *cachev1alpha1.Memcached) bool {
	if old.Generation != cur.Generation || !maps.Equal(old.Labels, cur.Labels) || !maps.Equal(old.Annotations, cur.Annotations) ||
		!equality.Semantic.DeepEqual(old.OwnerReferences, cur.OwnerReferences) || !old.DeletionTimestamp.Equal(cur.DeletionTimestamp) {
		return false
	}
	if !slices.Equal(old.Finalizers, cur.Finalizers) && !onlyOurFinalizerAdded(old.Finalizers, cur.Finalizers) {
		return false
	}
	return equality.Semantic.DeepEqual(old.Status, cur.Status) || r.tracker().wroteStatus(cur.UID, &cur.Status)
}

// onlyOurFinalizerAdded: cur is old with the operator's finalizer added.
func onlyOurFinalizerAdded(old, cur []string) bool {
	ours := func(f string) bool { return f == cachev1alpha1.Finalizer }
	return !slices.ContainsFunc(old, ours) && slices.ContainsFunc(cur, ours) &&
		slices.Equal(slices.DeleteFunc(slices.Clone(cur), ours), old)
}
