package ship

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/test/internal/names"
)

// checkPulledByDigest holds prod's pods to its pins: every container (the
// manager, the cache's memcached, reloader and exporter) runs an image
// prod pins by digest, resolved by the runtime to that digest, and each
// such image reached the nodes by a kubelet's pull of the pinned reference
// (its Pulled event), not by an import.
func checkPulledByDigest(t *testing.T, c client.Client, pinned []string) {
	t.Helper()
	ctx := context.Background()
	byDigest := map[string]string{}
	for _, ref := range pinned {
		if _, d, ok := strings.Cut(ref, "@"); ok {
			byDigest[d] = ref
		}
	}
	running := map[string]bool{}
	for _, ns := range []string{names.OperatorNamespace, names.CacheNamespace} {
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			for _, st := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
				_, d, _ := strings.Cut(st.ImageID, "@")
				ref, ok := byDigest[d]
				if !ok {
					t.Errorf("pod %s/%s: container %s runs %s (%s), which prod does not pin", ns, p.Name, st.Name, st.Image, st.ImageID)
					continue
				}
				running[ref] = true
			}
		}
	}
	events := &corev1.EventList{}
	if err := c.List(ctx, events); err != nil {
		t.Fatal(err)
	}
	pulls := map[string]string{}
	for _, e := range events.Items {
		for ref := range running {
			if e.Reason == "Pulled" && strings.Contains(e.Message, `Successfully pulled image "`+ref+`"`) {
				pulls[ref] = e.Source.Host + ": " + e.Message
			}
		}
	}
	for ref := range running {
		if pulls[ref] == "" {
			t.Errorf("no kubelet pulled %s: it runs, but no Pulled event says so", ref)
			continue
		}
		t.Logf("pulled by digest: %s", pulls[ref])
	}
	if len(running) != len(byDigest) {
		t.Errorf("prod's pods run %d of the %d images prod pins: %v of %v", len(running), len(byDigest), running, pinned)
	}
}
