package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// Events the reconciler records on a Memcached.

// Event reasons. Every change the operator makes is reported as an event on
// the Memcached, with the changed object as the related object.
const (
	EventCreated        = "Created"
	EventUpdated        = "Updated"
	EventScaled         = "Scaled"
	EventDeleted        = "Deleted"
	EventOrphaned       = "Orphaned"
	EventPaused         = "Paused"
	EventResumed        = "Resumed"
	EventApplyFailed    = "ApplyFailed"
	EventDeleteFailed   = "DeleteFailed"
	EventResourceExists = "ResourceExists"
)

// event records an event on mc and logs the same line, so `kubectl events`
// and the manager's log tell one story.
func (r *MemcachedReconciler) event(ctx context.Context, mc *cachev1alpha1.Memcached, related runtime.Object, eventType, reason, action, note string, args ...any) {
	msg := fmt.Sprintf(note, args...)
	if eventType == corev1.EventTypeWarning {
		log.FromContext(ctx).Error(nil, msg, "reason", reason)
	} else {
		log.FromContext(ctx).Info(msg, "reason", reason)
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(mc, related, eventType, reason, action, "%s", msg)
	}
}
