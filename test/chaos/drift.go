package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/test/internal/load"
)

// DriftResult is scenario 3: random changes behind the operator's back on
// converged Memcacheds, one at a time, each timed until it is undone.
type DriftResult struct {
	CRs, Events int
	Seed        int64
	// Heal latency over every event: from the edit's response until the
	// object is as the operator wants it again.
	P50, P99, Max time.Duration
	ByKind        []DriftKindStats
	// Per event, everything the manager did until the Memcached had
	// converged again (the Deployment controller's rollouts and pod churn
	// wake it too).
	ReconcilesPerEvent, WritesPerEvent float64
	// Unhealed lists the events not undone within driftHealTimeout.
	Unhealed []string
	Problems []string
}

// DriftKindStats are the heal latencies of one kind of event.
type DriftKindStats struct {
	Kind     string
	Events   int
	P50, P99 time.Duration
}

// The labels and annotation the operator puts on every object it owns
// (operator/internal/resources, which this module cannot import).
const (
	labelName             = "app.kubernetes.io/name"
	labelInstance         = "app.kubernetes.io/instance"
	labelManagedBy        = "app.kubernetes.io/managed-by"
	desiredHashAnnotation = "cache.example.com/desired-hash"
)

// driftKinds are the changes made behind the operator's back.
var driftKinds = []driftKind{
	{"delete Deployment", deleteOwned(&appsv1.Deployment{})},
	{"delete Service", deleteOwned(&corev1.Service{})},
	{"delete PodDisruptionBudget", deleteOwned(&policyv1.PodDisruptionBudget{})},
	{"scale Deployment", editDeployment(func(d *appsv1.Deployment, rng *rand.Rand) {
		d.Spec.Replicas = ptr.To(*d.Spec.Replicas + 1 + rng.Int32N(3))
	})},
	{"change Deployment image", editDeployment(func(d *appsv1.Deployment, _ *rand.Rand) {
		d.Spec.Template.Spec.Containers[0].Image = "registry.invalid/tampered:1"
	})},
	{"change Deployment args", editDeployment(func(d *appsv1.Deployment, _ *rand.Rand) {
		d.Spec.Template.Spec.Containers[0].Args = []string{"-m", "1"}
	})},
	{"change Deployment memory limit", editDeployment(func(d *appsv1.Deployment, _ *rand.Rand) {
		if d.Spec.Template.Spec.Containers[0].Resources.Limits == nil {
			d.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{}
		}
		d.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("3Gi")
	})},
	{"change Deployment labels", editOwned(&appsv1.Deployment{}, tamperLabel)},
	{"change Service labels", editOwned(&corev1.Service{}, tamperLabel)},
	{"remove Deployment owner reference", editOwned(&appsv1.Deployment{}, removeOwnerReferences)},
	{"remove Service owner reference", editOwned(&corev1.Service{}, removeOwnerReferences)},
	{"remove PodDisruptionBudget owner reference", editOwned(&policyv1.PodDisruptionBudget{}, removeOwnerReferences)},
	{"annotate Deployment", editOwned(&appsv1.Deployment{}, tamperAnnotation)},
	{"annotate Service", editOwned(&corev1.Service{}, tamperAnnotation)},
	{"annotate PodDisruptionBudget", editOwned(&policyv1.PodDisruptionBudget{}, tamperAnnotation)},
	{"edit Memcached status", editStatus},
}

type driftKind struct {
	name  string
	apply func(ctx context.Context, c client.Client, key types.NamespacedName, rng *rand.Rand) error
}

// driftHealTimeout is how long one event may stay unhealed before it is
// listed as such.
const driftHealTimeout = 30 * time.Second

// Drift runs scenario 3.
func Drift(sc Scale, progress func(string, ...any)) (r DriftResult, err error) {
	return drift(sc, "", progress)
}

// drift runs scenario 3 against a given manager binary ("" for bin/manager).
func drift(sc Scale, manager string, progress func(string, ...any)) (r DriftResult, err error) {
	r.CRs, r.Events, r.Seed = sc.DriftCRs, sc.DriftEvents, sc.DriftSeed
	const ns, size = "drift", 3
	env, err := NewEnv("drift", EnvOptions{Pods: r.CRs * size * 2}, progress)
	if err != nil {
		return r, err
	}
	defer closeEnv(env, &err)
	m, err := env.StartManager("manager-a", manager)
	if err != nil {
		return r, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conv, err := env.Converge(ctx, m, ns, r.CRs, size, sc.Timeout)
	if err != nil {
		return r, err
	}
	// What the operator wants, as it stands when everything has converged.
	want := map[string]map[string]string{}
	for i := range r.CRs {
		name := memcachedName("mc", i)
		if want[name], err = fingerprints(ctx, env.Admin, types.NamespacedName{Namespace: ns, Name: name}); err != nil {
			return r, err
		}
	}
	env.progress("drift: %d Memcacheds converged; %d events from seed %d", r.CRs, r.Events, r.Seed)

	rng := rand.New(rand.NewPCG(uint64(r.Seed), uint64(r.Seed)))
	// Every kind at least once, in a seeded order, then at random.
	order := rng.Perm(len(driftKinds))
	before, err := m.Metrics()
	if err != nil {
		return r, err
	}
	start := time.Now()
	var latencies []time.Duration
	byKind := map[string][]time.Duration{}
	for i := range r.Events {
		kind := driftKinds[rng.IntN(len(driftKinds))]
		if i < len(order) {
			kind = driftKinds[order[i]]
		}
		key := types.NamespacedName{Namespace: ns, Name: memcachedName("mc", rng.IntN(r.CRs))}
		if err := kind.apply(ctx, env.Admin, key, rng); err != nil {
			return r, fmt.Errorf("event %d (%s on %s): %w", i, kind.name, key.Name, err)
		}
		edited := time.Now()
		if r.Events <= 100 {
			env.progress("drift: event %d: %s on %s", i, kind.name, key.Name)
		}
		healed, diff := waitHealed(ctx, env.Admin, key, want[key.Name])
		if !healed {
			r.Unhealed = append(r.Unhealed, fmt.Sprintf("event %d, %s on %s: not healed within %v: %s", i, kind.name, key.Name, driftHealTimeout, diff))
			continue
		}
		latency := time.Since(edited)
		latencies = append(latencies, latency)
		byKind[kind.name] = append(byKind[kind.name], latency)
		// The next event starts on a converged, quiet Memcached.
		if err := conv.WaitN(r.CRs, sc.Timeout); err != nil {
			return r, fmt.Errorf("after event %d (%s on %s): %w\n%s", i, kind.name, key.Name, err, env.describe(ns, conv.Pending(3)))
		}
		if err := m.waitIdle(sc.Timeout); err != nil {
			return r, err
		}
		if (i+1)%100 == 0 {
			env.progress("drift: %d of %d events, %v", i+1, r.Events, time.Since(start).Round(time.Second))
		}
	}
	after, err := m.Metrics()
	if err != nil {
		return r, err
	}
	r.ReconcilesPerEvent = (after.Reconciles() - before.Reconciles()) / float64(r.Events)
	r.WritesPerEvent = float64(m.Writes(start, time.Now())) / float64(r.Events)
	r.P50, r.P99, r.Max = load.Percentile(latencies, 50), load.Percentile(latencies, 99), load.Percentile(latencies, 100)
	for _, k := range driftKinds {
		if l := byKind[k.name]; len(l) > 0 {
			r.ByKind = append(r.ByKind, DriftKindStats{Kind: k.name, Events: len(l), P50: load.Percentile(l, 50), P99: load.Percentile(l, 99)})
		}
	}
	r.Problems = append(r.Problems, r.Unhealed...)
	if len(r.Unhealed) == 0 {
		r.Problems = append(r.Problems, env.nothingLost(ns, r.CRs)...)
	}
	env.progress("drift: %d events healed, p50 %v p99 %v, %d not healed", len(latencies), r.P50, r.P99, len(r.Unhealed))
	return r, nil
}

// waitHealed polls until every fingerprint of the Memcached's objects is
// back to want, and otherwise says which differs.
func waitHealed(ctx context.Context, c client.Client, key types.NamespacedName, want map[string]string) (bool, string) {
	deadline := time.Now().Add(driftHealTimeout)
	for {
		got, err := fingerprints(ctx, c, key)
		diff := ""
		if err != nil {
			diff = err.Error()
		} else {
			for k, v := range want {
				if got[k] != v {
					diff = fmt.Sprintf("%s is %s, want %s", k, got[k], v)
					break
				}
			}
		}
		if diff == "" {
			return true, ""
		}
		if time.Now().After(deadline) {
			return false, diff
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fingerprints are what the operator owns of a Memcached's objects, one
// string per object: the controller, the operator's labels and desired
// hash, and for the Deployment the fields the events change. The status
// fingerprint leaves out transition times.
func fingerprints(ctx context.Context, c client.Client, key types.NamespacedName) (map[string]string, error) {
	out := map[string]string{}
	mc := &unstructured.Unstructured{}
	mc.SetAPIVersion("cache.example.com/v1alpha1")
	mc.SetKind("Memcached")
	if err := c.Get(ctx, key, mc); err != nil {
		return nil, err
	}
	ready, _, _ := unstructured.NestedInt64(mc.Object, "status", "readyReplicas")
	observed, _, _ := unstructured.NestedInt64(mc.Object, "status", "observedGeneration")
	conditions, _, _ := unstructured.NestedSlice(mc.Object, "status", "conditions")
	status := fmt.Sprintf("ready=%d observed=%d", ready, observed)
	for _, raw := range conditions {
		cond, _ := raw.(map[string]any)
		status += fmt.Sprintf(" %v=%v/%v", cond["type"], cond["status"], cond["reason"])
	}
	out["Memcached status"] = status
	for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}} {
		kind := fmt.Sprintf("%T", obj)[len("*v1."):]
		if err := c.Get(ctx, key, obj); err != nil {
			out[kind] = "missing"
			continue
		}
		controller := "none"
		if ref := metav1.GetControllerOf(obj); ref != nil {
			controller = string(ref.UID)
		}
		l := obj.GetLabels()
		fp := fmt.Sprintf("controller=%s labels=%s,%s,%s hash=%s", controller,
			l[labelName], l[labelInstance], l[labelManagedBy], obj.GetAnnotations()[desiredHashAnnotation])
		if d, ok := obj.(*appsv1.Deployment); ok {
			ctr := d.Spec.Template.Spec.Containers[0]
			fp += fmt.Sprintf(" replicas=%d image=%s args=%q memory=%s", ptr.Deref(d.Spec.Replicas, 1), ctr.Image, ctr.Args, ctr.Resources.Limits.Memory())
		}
		out[kind] = fp
	}
	return out, nil
}

func deleteOwned(obj client.Object) func(context.Context, client.Client, types.NamespacedName, *rand.Rand) error {
	return func(ctx context.Context, c client.Client, key types.NamespacedName, _ *rand.Rand) error {
		o := obj.DeepCopyObject().(client.Object)
		o.SetNamespace(key.Namespace)
		o.SetName(key.Name)
		return c.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground))
	}
}

func editOwned(obj client.Object, edit func(client.Object, *rand.Rand)) func(context.Context, client.Client, types.NamespacedName, *rand.Rand) error {
	return func(ctx context.Context, c client.Client, key types.NamespacedName, rng *rand.Rand) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			o := obj.DeepCopyObject().(client.Object)
			if err := c.Get(ctx, key, o); err != nil {
				return err
			}
			edit(o, rng)
			return c.Update(ctx, o)
		})
	}
}

func editDeployment(edit func(*appsv1.Deployment, *rand.Rand)) func(context.Context, client.Client, types.NamespacedName, *rand.Rand) error {
	return editOwned(&appsv1.Deployment{}, func(o client.Object, rng *rand.Rand) { edit(o.(*appsv1.Deployment), rng) })
}

// tamperLabel changes one of the operator's labels (one of those the
// manager's cache selects on: the object may leave the cache).
func tamperLabel(o client.Object, rng *rand.Rand) {
	l := o.GetLabels()
	keys := []string{labelName, labelInstance, labelManagedBy}
	l[keys[rng.IntN(len(keys))]] = "tampered"
	o.SetLabels(l)
}

func removeOwnerReferences(o client.Object, _ *rand.Rand) { o.SetOwnerReferences(nil) }

// tamperAnnotation overwrites the operator's desired-hash annotation: the
// operator owns that field, so it must put it back.
func tamperAnnotation(o client.Object, _ *rand.Rand) {
	a := o.GetAnnotations()
	a[desiredHashAnnotation] = "tampered"
	o.SetAnnotations(a)
}

// editStatus writes a status the operator did not compute: 99 ready pods,
// Ready=False.
func editStatus(ctx context.Context, c client.Client, key types.NamespacedName, _ *rand.Rand) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		mc := &unstructured.Unstructured{}
		mc.SetAPIVersion("cache.example.com/v1alpha1")
		mc.SetKind("Memcached")
		if err := c.Get(ctx, key, mc); err != nil {
			return err
		}
		_ = unstructured.SetNestedField(mc.Object, int64(99), "status", "readyReplicas")
		conditions, _, _ := unstructured.NestedSlice(mc.Object, "status", "conditions")
		for _, raw := range conditions {
			if cond, ok := raw.(map[string]any); ok && cond["type"] == "Ready" {
				cond["status"], cond["reason"], cond["message"] = "False", "Tampered", "edited by hand"
			}
		}
		_ = unstructured.SetNestedSlice(mc.Object, conditions, "status", "conditions")
		return c.Status().Update(ctx, mc)
	})
}
