// Package platform gives a test cluster what prod's overlay expects of the
// cluster it runs on: cert-manager (its CRDs, and this tier's stand-in for
// its controller, package certmanager) and the password Secret that a
// secret manager writes and the overlay leaves out of Git.
package platform

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/test/internal/certmanager"
	"github.com/example/memcached-operator/test/internal/names"
)

// AuthSecret is the password Secret prod's overlay names
// (overlays/prod/instances/memcached-ha.yaml); Prepare writes one user.
const (
	AuthSecret   = "app-cache-auth"
	AuthUser     = "app"
	AuthPassword = "test-password"
)

// Prepare installs cert-manager's CRDs and writes the password Secret.
// The caller starts issuing certificates (certmanager.Start) when the
// test is ready for cert-manager's writes.
func Prepare(t testing.TB, kubeconfig string) {
	t.Helper()
	certmanager.InstallCRDs(t, kubeconfig)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names.CacheNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: names.CacheNamespace, Name: AuthSecret},
		Data:       map[string][]byte{"auth-file": []byte(AuthUser + ":" + AuthPassword + "\n")},
	}); err != nil {
		t.Fatal(err)
	}
}
