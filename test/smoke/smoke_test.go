// Package smoke proves the toolchain in bin/ works: envtest starts the
// kube-apiserver and etcd that `make tools` built, and they serve requests.
package smoke

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/example/memcached-operator/test/internal/cluster"
)

func TestEnvtestFromBin(t *testing.T) {
	cfg := cluster.StartEnvtest(t).Config
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	version, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if version.GitVersion != "v1.37.2" {
		t.Errorf("kube-apiserver reports %s, want the pinned v1.37.2", version.GitVersion)
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "smoke", Labels: map[string]string{"purpose": "smoke"}}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	got, err := cs.CoreV1().Namespaces().Get(ctx, "smoke", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read namespace back: %v", err)
	}
	if got.Labels["purpose"] != "smoke" || got.UID == "" {
		t.Errorf("namespace read back as %+v", got.ObjectMeta)
	}
}
