package bench

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/example/memcached-operator/test/internal/load"
)

// changeTimeout bounds the wait for one change to be carried through.
const changeTimeout = 30 * time.Second

// Latencies are the operator's reaction times to single changes while it
// holds N converged Memcacheds.
type Latencies struct {
	// Scale: `kubectl scale memcached/NAME --replicas=K`, from the watch
	// event that shows the new spec.size until the one that shows the
	// Deployment with K replicas.
	Scale []time.Duration
	// Heal: `kubectl set image` on the Deployment behind the operator's back,
	// from the watch event that shows the foreign image until the one that
	// shows the operator's image back.
	Heal []time.Duration
}

// observed is one watch event's value, stamped when the harness received it.
type observed struct {
	at    time.Time
	value string
}

// watchValue watches one named object and sends value(object) with the
// time of every event. Both ends of a latency are stamped by this process
// on arrival of a watch event, so the watch's own delivery delay cancels
// out and kubectl's start-up is not counted.
func watchValue(ctx context.Context, cfg *rest.Config, gvr schema.GroupVersionResource, name string, value func(*unstructured.Unstructured) string) (<-chan observed, error) {
	dyn, err := dynamic.NewForConfig(load.Unthrottled(cfg))
	if err != nil {
		return nil, err
	}
	w, err := dyn.Resource(gvr).Namespace(namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return nil, err
	}
	out := make(chan observed, 1024)
	go func() {
		defer w.Stop()
		for e := range w.ResultChan() {
			if u, ok := e.Object.(*unstructured.Unstructured); ok && (e.Type == watch.Added || e.Type == watch.Modified) {
				out <- observed{at: time.Now(), value: value(u)}
			}
		}
		close(out)
	}()
	return out, nil
}

// await reads events until one has the wanted value.
func await(ch <-chan observed, want, what string) (time.Time, error) {
	timeout := time.After(changeTimeout)
	for {
		select {
		case o, ok := <-ch:
			if !ok {
				return time.Time{}, fmt.Errorf("%s: watch closed", what)
			}
			if o.value == want {
				return o.at, nil
			}
		case <-timeout:
			return time.Time{}, fmt.Errorf("%s: not %q within %v", what, want, changeTimeout)
		}
	}
}

// measureChangeLatency scales one Memcached `changes` times with kubectl,
// then changes its Deployment's image by hand `changes` times, and times
// each until the operator has carried it through.
func measureChangeLatency(ctx context.Context, restCfg *rest.Config, kubectl, kubeconfig string, changes int) (Latencies, error) {
	var l Latencies
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	name := crName(1)
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	sizes, err := watchValue(ctx, restCfg, memcachedGVR, name, func(u *unstructured.Unstructured) string {
		v, _, _ := unstructured.NestedInt64(u.Object, "spec", "size")
		return fmt.Sprint(v)
	})
	if err != nil {
		return l, err
	}
	replicas, err := watchValue(ctx, restCfg, deployments, name, func(u *unstructured.Unstructured) string {
		v, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
		return fmt.Sprint(v)
	})
	if err != nil {
		return l, err
	}
	images, err := watchValue(ctx, restCfg, deployments, name, memcachedImage)
	if err != nil {
		return l, err
	}
	var original string
	select {
	case o := <-images: // the watch starts with the object as it is
		original = o.value
	case <-time.After(changeTimeout):
		return l, fmt.Errorf("no Deployment %s within %v", name, changeTimeout)
	}
	if original == "" {
		return l, fmt.Errorf("the Deployment %s has no memcached container", name)
	}

	for k := range changes {
		size := fmt.Sprint(4 - k%2) // 4, 3, 4, ...: every scale is a change
		if out, err := runKubectl(kubectl, kubeconfig, "-n", namespace, "scale", "memcached/"+name, "--replicas="+size); err != nil {
			return l, fmt.Errorf("kubectl scale: %w\n%s", err, out)
		}
		changed, err := await(sizes, size, "Memcached spec.size")
		if err != nil {
			return l, err
		}
		carried, err := await(replicas, size, "Deployment spec.replicas")
		if err != nil {
			return l, err
		}
		l.Scale = append(l.Scale, carried.Sub(changed))
	}
	for k := range changes {
		foreign := fmt.Sprintf("registry.invalid/not-memcached:%d", k)
		if out, err := runKubectl(kubectl, kubeconfig, "-n", namespace, "set", "image", "deployment/"+name, "memcached="+foreign); err != nil {
			return l, fmt.Errorf("kubectl set image: %w\n%s", err, out)
		}
		changed, err := await(images, foreign, "Deployment image changed by hand")
		if err != nil {
			return l, err
		}
		healed, err := await(images, original, "Deployment image healed")
		if err != nil {
			return l, err
		}
		l.Heal = append(l.Heal, healed.Sub(changed))
	}
	return l, nil
}

// memcachedImage is the image of a Deployment's memcached container.
func memcachedImage(u *unstructured.Unstructured) string {
	containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		if c, ok := c.(map[string]any); ok && c["name"] == "memcached" {
			image, _ := c["image"].(string)
			return image
		}
	}
	return ""
}
