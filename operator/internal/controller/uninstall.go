package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// DeleteAllMemcacheds deletes every Memcached in namespaces (all namespaces
// when empty) and waits until they are gone, polling every interval. It is
// what uninstalling the operator must do first (the Helm chart's pre-delete
// hook, `manager --delete-memcacheds`; `make undeploy` does it with
// kubectl): each Memcached carries the operator's finalizer, so once the
// operator is removed nothing would release them, and the Memcacheds (and
// the CRD and namespaces holding them) would hang in deletion. The running
// operator deletes what each owns and releases its finalizer; this only
// asks and waits, so it needs list and delete on Memcacheds and nothing
// else. It returns an error naming those still there when ctx ends.
func DeleteAllMemcacheds(ctx context.Context, c client.Client, namespaces []string, interval time.Duration, log logr.Logger) error {
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	start := time.Now()
	// List and delete one by one: a collection delete exists only per
	// namespace, and this needs only list and delete.
	for _, ns := range namespaces {
		list := &cachev1alpha1.MemcachedList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return fmt.Errorf("list the Memcacheds: %w", err)
		}
		for i := range list.Items {
			if err := c.Delete(ctx, &list.Items[i]); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete Memcached %s/%s: %w", list.Items[i].Namespace, list.Items[i].Name, err)
			}
		}
		log.Info("deleting Memcacheds", "namespace", ns, "count", len(list.Items))
	}
	// left is what the last complete listing found: a listing cut short by
	// the end of ctx must not report that nothing is left.
	var left []string
	err := wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		var found []string
		for _, ns := range namespaces {
			list := &cachev1alpha1.MemcachedList{}
			if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
				return false, err
			}
			for _, mc := range list.Items {
				found = append(found, mc.Namespace+"/"+mc.Name)
			}
		}
		left = found
		if len(left) > 0 {
			log.Info("waiting for Memcacheds to be deleted by the operator", "left", len(left), "elapsed", time.Since(start).Round(time.Second).String())
		}
		return len(left) == 0, nil
	})
	if err != nil {
		sort.Strings(left)
		return fmt.Errorf("%d Memcacheds are still there after %s (is the operator running? it releases their finalizers): %s: %w",
			len(left), time.Since(start).Round(time.Second), strings.Join(left, ", "), err)
	}
	log.Info("every Memcached is deleted", "elapsed", time.Since(start).Round(time.Millisecond).String())
	return nil
}
