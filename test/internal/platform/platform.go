// Package platform gives a test cluster what prod's overlay expects of the
// cluster it runs on: cert-manager (its CRDs, and this tier's stand-in for
// its controller, package certmanager) and the password Secret the
// overlay leaves out of Git, made as docs/deploy/kubectl.md tells users to.
package platform

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/test/internal/certmanager"
	"github.com/example/memcached-operator/test/internal/guide"
	"github.com/example/memcached-operator/test/internal/names"
)

// AuthSecret is the password Secret prod's overlay names
// (overlays/prod/instances/memcached-ha.yaml).
const AuthSecret = "app-cache-auth"

// authGuide is the guide whose commands make AuthSecret, and a marker of
// its block.
const authGuide, authMarker = "docs/deploy/kubectl.md", "create secret generic " + AuthSecret

// Prepare installs cert-manager's CRDs, makes the cache namespace (as
// prod's overlay does) and in it the password Secret with the commands
// docs/deploy/kubectl.md gives, verbatim. The caller starts issuing
// certificates (certmanager.Start) when the test is ready for
// cert-manager's writes; Credentials reads the password back.
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
	guide.Run(t, kubeconfig, authGuide, authMarker)
}

// Credentials are the user and password of AuthSecret's first line, as a
// client mounting the Secret reads them.
func Credentials(t testing.TB, c client.Client) (user, password string) {
	t.Helper()
	s := &corev1.Secret{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: names.CacheNamespace, Name: AuthSecret}, s); err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(s.Data["auth-file"]), "\n")
	user, password, ok := strings.Cut(first, ":")
	if !ok {
		t.Fatalf("Secret %s/%s made by %s: auth-file's first line is not user:password", names.CacheNamespace, AuthSecret, authGuide)
	}
	return user, password
}
