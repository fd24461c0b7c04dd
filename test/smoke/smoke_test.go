// Package smoke proves the toolchain in bin/ works: envtest starts the
// kube-apiserver and etcd that `make tools` built, and they serve requests.
package smoke

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/example/memcached-operator/test/internal/repo"
)

func TestEnvtestFromBin(t *testing.T) {
	if _, err := repo.Bin("kube-apiserver", "etcd"); err != nil {
		t.Fatal(err)
	}
	dir, err := repo.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: dir}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest from %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})

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
