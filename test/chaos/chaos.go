// Package chaos breaks the operator's world on purpose and measures what it
// does: a leader killed mid-work, the apiserver and etcd stopped, 1,000
// random edits behind its back, a permission taken away, an admission
// policy refusing its pods, an upgrade from the previous build, and 5,000
// Memcacheds from 32 clients at once.
//
// Every scenario runs against a kwok cluster made from bin/ (the real
// kube-apiserver, etcd, kube-controller-manager, kube-scheduler and kwok's
// fake nodes) with the real bin/manager running as processes under the
// shipped RBAC, as the prod overlay runs it: leader election on. What the
// operator loses or gets wrong is collected as Problems; the figures are for
// docs/reliability.md.
//
// cmd/chaos runs every scenario at full size and writes
// docs/reliability.md (`make chaos`); chaos_test.go runs each one small in
// `make test` as a correctness check, with no assertion on time.
package chaos

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Scale sizes the scenarios.
type Scale struct {
	// Leader failover: Memcacheds converged first, then created while the
	// leader is killed.
	FailoverInitial, FailoverDuring int
	// Control-plane outage: Memcacheds converging when it starts, and how
	// long it lasts.
	OutageCRs int
	Outage    time.Duration
	// Chaos drift: converged Memcacheds and random events on them.
	DriftCRs, DriftEvents int
	DriftSeed             int64
	// Lost permissions and admission rejections: Memcacheds affected and
	// how long requests are counted.
	PermissionCRs    int
	PermissionWindow time.Duration
	AdmissionWindow  time.Duration
	// Upgrade: Memcacheds converged by the previous build.
	UpgradeCRs int
	// Overload: Memcacheds created by as many clients as fast as they can.
	OverloadCRs, OverloadClients int
	// Timeout bounds every wait for convergence.
	Timeout time.Duration
}

// Full is what `make chaos` runs and docs/reliability.md reports.
var Full = Scale{
	FailoverInitial: 200, FailoverDuring: 100,
	OutageCRs: 500, Outage: 30 * time.Second,
	DriftCRs: 100, DriftEvents: 1000, DriftSeed: 1,
	PermissionCRs: 20, PermissionWindow: 2 * time.Minute, AdmissionWindow: time.Minute,
	UpgradeCRs:  100,
	OverloadCRs: 5000, OverloadClients: 32,
	Timeout: 15 * time.Minute,
}

// Small is what `make test` runs: every scenario, every check, small.
var Small = Scale{
	FailoverInitial: 20, FailoverDuring: 20,
	OutageCRs: 20, Outage: 12 * time.Second,
	DriftCRs: 5, DriftEvents: 45, DriftSeed: 1,
	PermissionCRs: 3, PermissionWindow: 20 * time.Second, AdmissionWindow: 15 * time.Second,
	UpgradeCRs:  5,
	OverloadCRs: 150, OverloadClients: 32,
	Timeout: 3 * time.Minute,
}

// nothingLost checks that the namespace holds total Memcacheds, each with
// its Deployment and Service controlled by it.
func (e *Env) nothingLost(ns string, total int) []string {
	ctx := context.Background()
	var problems []string
	mcs := &unstructured.UnstructuredList{}
	mcs.SetAPIVersion("cache.example.com/v1alpha1")
	mcs.SetKind("MemcachedList")
	if err := e.Admin.List(ctx, mcs, client.InNamespace(ns)); err != nil {
		return []string{err.Error()}
	}
	if len(mcs.Items) != total {
		problems = append(problems, fmt.Sprintf("%d Memcacheds in %s, want %d", len(mcs.Items), ns, total))
	}
	uids := map[string]string{}
	for _, mc := range mcs.Items {
		uids[mc.GetName()] = string(mc.GetUID())
		if !Converged(&mc) {
			problems = append(problems, fmt.Sprintf("Memcached %s is not converged", mc.GetName()))
		}
	}
	for _, list := range []client.ObjectList{&appsv1.DeploymentList{}, &corev1.ServiceList{}} {
		if err := e.Admin.List(ctx, list, client.InNamespace(ns)); err != nil {
			return append(problems, err.Error())
		}
		owned := 0
		for _, o := range metaItems(list) {
			if ref := metav1.GetControllerOf(o); ref != nil && string(ref.UID) == uids[o.GetName()] {
				owned++
			}
		}
		if owned != total {
			problems = append(problems, fmt.Sprintf("%d %T items controlled by their Memcached, want %d", owned, list, total))
		}
	}
	return problems
}

func metaItems(list client.ObjectList) []metav1.Object {
	var out []metav1.Object
	switch l := list.(type) {
	case *appsv1.DeploymentList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *corev1.ServiceList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	}
	return out
}
