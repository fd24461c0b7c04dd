package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/load"
	"github.com/example/memcached-operator/test/internal/proc"
)

// fieldOwner is the operator's server-side apply field manager: the floors
// extract what it applied, and the equal-work floor applies as it.
const fieldOwner = "memcached-operator"

// operatorWrites is what the operator wrote for one Memcached (mc-00000),
// read back from the apiserver after it converged: the floors repeat it for
// every CR with no controller, so that they do the operator's work and
// nothing else.
type operatorWrites struct {
	// objects are the Deployment, Service and PodDisruptionBudget as a
	// client creates them (server-set fields removed): the objects-only floor.
	objects []client.Object
	// owned are the same three as the operator wrote them, as JSON with the
	// CR's name and UID in place.
	owned []ownedWrite
	// status is the Memcached's status as the operator wrote it.
	status map[string]any
	// event is the one event the operator recorded for a new Memcached.
	event *eventsv1.Event
	// name and uid of the Memcached they were captured from, replaced by each
	// CR's own.
	name string
	uid  types.UID
}

// captureWrites reads what the operator wrote for the first CR.
func captureWrites(ctx context.Context, restCfg *rest.Config) (*operatorWrites, error) {
	c, err := client.New(restCfg, client.Options{Scheme: cluster.Scheme})
	if err != nil {
		return nil, err
	}
	key := types.NamespacedName{Namespace: namespace, Name: "mc-00000"}
	mc := &unstructured.Unstructured{}
	mc.SetGroupVersionKind(cachev1alpha1.GroupVersion.WithKind("Memcached"))
	if err := c.Get(ctx, key, mc); err != nil {
		return nil, fmt.Errorf("read the operator's Memcached: %w", err)
	}
	w := &operatorWrites{name: key.Name, uid: mc.GetUID()}
	status, _, _ := unstructured.NestedMap(mc.Object, "status")
	if len(status) == 0 {
		return nil, fmt.Errorf("the operator wrote no status on %s", key.Name)
	}
	w.status = status

	deployment, service, pdb := &appsv1.Deployment{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}
	for _, o := range []client.Object{deployment, service, pdb} {
		if err := c.Get(ctx, key, o); err != nil {
			return nil, fmt.Errorf("read the operator's objects: %w", err)
		}
	}
	extract := []func() (any, error){
		func() (any, error) { return appsv1ac.ExtractDeployment(deployment, fieldOwner) },
		func() (any, error) { return corev1ac.ExtractService(service, fieldOwner) },
		func() (any, error) { return policyv1ac.ExtractPodDisruptionBudget(pdb, fieldOwner) },
	}
	for k, o := range []client.Object{deployment, service, pdb} {
		write, err := ownedWriteOf(o, extract[k])
		if err != nil {
			return nil, err
		}
		w.owned = append(w.owned, write)
	}
	for _, o := range []client.Object{deployment, service, pdb} {
		w.objects = append(w.objects, asCreated(o))
	}

	events := &eventsv1.EventList{}
	if err := c.List(ctx, events, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	for i := range events.Items {
		if e := &events.Items[i]; e.Regarding.Name == key.Name && e.Reason == "Created" {
			w.event = e
		}
	}
	if w.event == nil {
		return nil, fmt.Errorf("no Created event for %s among %d events", key.Name, len(events.Items))
	}
	return w, nil
}

// ownedWrite is how the operator wrote one object for a new Memcached: a
// create (a POST of the whole object) or a server-side apply of exactly the
// fields its apply entry owns (client-go's Extract functions read them from
// managedFields). Which one its managedFields tell: an Update entry of the
// operator's field manager is a create, an Apply entry an apply.
type ownedWrite struct {
	create bool
	body   []byte
}

func ownedWriteOf(o client.Object, extract func() (any, error)) (ownedWrite, error) {
	for _, e := range o.GetManagedFields() {
		if e.Manager != fieldOwner {
			continue
		}
		if e.Operation == metav1.ManagedFieldsOperationUpdate {
			created := asCreated(o)
			created.SetOwnerReferences(o.GetOwnerReferences())
			// A typed Get leaves apiVersion and kind empty; a POST names them.
			gvk, err := apiutil.GVKForObject(o, cluster.Scheme)
			if err != nil {
				return ownedWrite{}, err
			}
			created.GetObjectKind().SetGroupVersionKind(gvk)
			body, err := json.Marshal(created)
			return ownedWrite{create: true, body: body}, err
		}
		ac, err := extract()
		if err != nil {
			return ownedWrite{}, err
		}
		body, err := json.Marshal(ac)
		if err != nil {
			return ownedWrite{}, err
		}
		if !bytes.Contains(body, []byte(`"spec"`)) {
			return ownedWrite{}, fmt.Errorf("nothing applied by %s in %s", fieldOwner, body)
		}
		return ownedWrite{body: body}, nil
	}
	return ownedWrite{}, fmt.Errorf("%s %s: no managedFields entry of %s", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), fieldOwner)
}

// asCreated strips what the apiserver sets, leaving what a client sends.
func asCreated(src client.Object) client.Object {
	o := src.DeepCopyObject().(client.Object)
	o.SetOwnerReferences(nil)
	o.SetResourceVersion("")
	o.SetUID("")
	o.SetCreationTimestamp(metav1.Time{})
	o.SetManagedFields(nil)
	o.SetGeneration(0)
	switch o := o.(type) {
	case *appsv1.Deployment:
		o.Status = appsv1.DeploymentStatus{}
	case *corev1.Service:
		o.Spec.ClusterIPs, o.Spec.ClusterIP = nil, corev1.ClusterIPNone
		o.Status = corev1.ServiceStatus{}
	case *policyv1.PodDisruptionBudget:
		o.Status = policyv1.PodDisruptionBudgetStatus{}
	}
	return o
}

// objectsFor are the three objects of CR i, renamed, as a client creates
// them.
func (w *operatorWrites) objectsFor(i int) []client.Object {
	var out []client.Object
	for _, src := range w.objects {
		o := src.DeepCopyObject().(client.Object)
		o.SetName(crName(i))
		o.SetNamespace(namespace)
		out = append(out, o)
	}
	return out
}

// write makes the operator's write of its k-th object for the CR named
// name with uid, as controller-runtime's client sends it.
func (w *operatorWrites) write(ctx context.Context, c client.Client, k int, name string, uid types.UID) error {
	raw := bytes.ReplaceAll(w.owned[k].body, []byte(w.name), []byte(name))
	raw = bytes.ReplaceAll(raw, []byte(w.uid), []byte(uid))
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return err
	}
	if w.owned[k].create {
		return c.Create(ctx, u, client.FieldOwner(fieldOwner))
	}
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldOwner), client.ForceOwnership)
}

// eventFor is the operator's Created event about the CR.
func (w *operatorWrites) eventFor(mc *unstructured.Unstructured) *eventsv1.Event {
	e := w.event.DeepCopy()
	// Named as client-go's event recorder names them.
	e.ObjectMeta = metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("%s.%x", mc.GetName(), time.Now().UnixNano())}
	e.Regarding.Name, e.Regarding.UID, e.Regarding.ResourceVersion = mc.GetName(), mc.GetUID(), mc.GetResourceVersion()
	e.Note = strings.ReplaceAll(e.Note, w.name, mc.GetName())
	e.EventTime = metav1.NowMicro()
	return e
}

// measureEqualFloor makes, from Clients concurrent clients with no
// controller, exactly the writes the operator makes for each new CR, the
// same way: create the CR (as the operator's clients do); then, at once, the
// finalizer apply and the three objects written as the operator wrote them
// (created, or applied with its field manager and body); then the status merge patch guarded by resourceVersion, with the
// event beside it.
func measureEqualFloor(restCfg *rest.Config, cp *controlPlane, n int, w operatorWrites) (Measurement, error) {
	ctx := context.Background()
	// Count the writes rather than assume them.
	var writes atomic.Int64
	restCfg = rest.CopyConfig(restCfg)
	restCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodGet {
				writes.Add(1)
			}
			return rt.RoundTrip(req)
		})
	})
	// The operator's event recorder sends JSON through client-go's events
	// client; so does the floor.
	events, err := eventsv1client.NewForConfig(load.Unthrottled(restCfg))
	if err != nil {
		return Measurement{}, err
	}
	cp0, err := cp.sample()
	if err != nil {
		return Measurement{}, err
	}
	self0 := selfCPUSeconds()
	t0 := time.Now()
	err = createConcurrently(restCfg, n, func(c client.Client, i int) error {
		mc := seedMemcached(i)
		if err := c.Create(ctx, mc); err != nil {
			return err
		}
		fin := &unstructured.Unstructured{}
		fin.SetGroupVersionKind(mc.GroupVersionKind())
		fin.SetNamespace(namespace)
		fin.SetName(mc.GetName())
		fin.SetUID(mc.GetUID())
		fin.SetFinalizers([]string{cachev1alpha1.Finalizer})

		errs := make([]error, len(w.owned)+1)
		var wg sync.WaitGroup
		wg.Go(func() {
			errs[0] = c.Apply(ctx, client.ApplyConfigurationFromUnstructured(fin), client.FieldOwner(fieldOwner), client.ForceOwnership)
		})
		for k := range w.owned {
			wg.Go(func() { errs[k+1] = w.write(ctx, c, k, mc.GetName(), mc.GetUID()) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}

		before := &unstructured.Unstructured{}
		before.SetGroupVersionKind(mc.GroupVersionKind())
		before.SetNamespace(namespace)
		before.SetName(mc.GetName())
		before.SetResourceVersion(fin.GetResourceVersion())
		after := before.DeepCopy()
		after.Object["status"] = runtime.DeepCopyJSONValue(w.status)
		var statusErr, eventErr error
		wg.Go(func() {
			statusErr = c.Status().Patch(ctx, after, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
		})
		wg.Go(func() {
			_, eventErr = events.Events(namespace).Create(ctx, w.eventFor(mc), metav1.CreateOptions{})
		})
		wg.Wait()
		return errors.Join(statusErr, eventErr)
	})
	converge := time.Since(t0)
	// Less the creates of the CRs: the operator's clients make those.
	perCR := float64(writes.Load()-int64(n)) / float64(n)
	m := Measurement{Contender: FloorEqual, N: n, Converge: converge, Writes: perCR, Requests: perCR, CPUSeconds: selfCPUSeconds() - self0}
	return m, errors.Join(err, cp.since(cp0, &m))
}

// selfCPUSeconds is the harness's own CPU time: what a client spends on
// the floor's requests, to compare with the controller's.
func selfCPUSeconds() float64 {
	s, _ := proc.CPUSeconds(os.Getpid())
	return s
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// measureFloor creates the operator's three objects for every CR: the
// objects alone, none of the operator's other writes.
func measureFloor(restCfg *rest.Config, cp *controlPlane, n int, w operatorWrites) (Measurement, error) {
	ctx := context.Background()
	cp0, err := cp.sample()
	if err != nil {
		return Measurement{}, err
	}
	self0 := selfCPUSeconds()
	t0 := time.Now()
	err = createConcurrently(restCfg, n, func(c client.Client, i int) error {
		for _, o := range w.objectsFor(i) {
			if err := c.Create(ctx, o); err != nil {
				return err
			}
		}
		return nil
	})
	m := Measurement{Contender: Floor, N: n, Converge: time.Since(t0), Writes: 3, Requests: 3, CPUSeconds: selfCPUSeconds() - self0}
	return m, errors.Join(err, cp.since(cp0, &m))
}
