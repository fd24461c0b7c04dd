//go:build !unit

package certmanager

import (
	"context"
	"crypto/x509"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cert-manager/cert-manager/pkg/util/pki"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/repo"
)

// The component's objects, applied to a real apiserver with cert-manager's
// CRDs, come out as cert-manager's CA issuer would write them: a server
// certificate for the Service's names and a client certificate, both
// chaining to the cache-ca CA that their ca.crt holds; a renewal gives a
// new serial and key.
func TestIssuesTheComponentsCertificates(t *testing.T) {
	bins, err := repo.Bin("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	env := cluster.StartEnvtest(t)
	InstallCRDs(t, env.Kubeconfig)
	cluster.Run(t, env.Kubeconfig, nil, bins["kubectl"], "create", "namespace", "cache")
	component := filepath.Join(repo.MustRoot(t), "deploy", "components", "cert-manager")
	for _, f := range []string{"issuers.yaml", "certificates.yaml"} {
		cluster.Run(t, env.Kubeconfig, nil, bins["kubectl"], "apply", "--server-side", "-f", filepath.Join(component, f))
	}
	Start(t, env.Kubeconfig)
	ctx := context.Background()

	secret := func(name string) *corev1.Secret {
		t.Helper()
		s := &corev1.Secret{}
		cluster.Eventually(t, 30*time.Second, "Secret "+name, func() error {
			return env.Client.Get(ctx, types.NamespacedName{Namespace: "cache", Name: name}, s)
		})
		return s
	}
	verify := func(s *corev1.Secret, usage x509.ExtKeyUsage, dnsName string) *x509.Certificate {
		t.Helper()
		cert, err := pki.DecodeX509CertificateBytes(s.Data["tls.crt"])
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(s.Data["ca.crt"]) {
			t.Fatalf("%s: ca.crt holds no certificate", s.Name)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}, DNSName: dnsName}); err != nil {
			t.Errorf("%s does not verify against its ca.crt for %v %q: %v", s.Name, usage, dnsName, err)
		}
		if s.Type != corev1.SecretTypeTLS || s.Annotations["cert-manager.io/certificate-name"] != s.Name {
			t.Errorf("%s: type %s, annotations %v: not what cert-manager writes", s.Name, s.Type, s.Annotations)
		}
		return cert
	}
	ca := secret("cache-ca")
	caCert := verify(ca, x509.ExtKeyUsageAny, "")
	if !caCert.IsCA {
		t.Error("cache-ca is not a CA")
	}
	server := verify(secret("app-cache-tls"), x509.ExtKeyUsageServerAuth, "app-cache.cache.svc")
	if !slices.Contains(server.DNSNames, "app-cache.cache.svc.cluster.local") {
		t.Errorf("the server certificate names %v", server.DNSNames)
	}
	verify(secret("app-cache-client"), x509.ExtKeyUsageClientAuth, "")

	if err := Renew(ctx, env.Kubeconfig, "cache", "app-cache-tls"); err != nil {
		t.Fatal(err)
	}
	cluster.Eventually(t, 30*time.Second, "a renewed app-cache-tls", func() error {
		s := secret("app-cache-tls")
		renewed, err := pki.DecodeX509CertificateBytes(s.Data["tls.crt"])
		if err != nil {
			return err
		}
		if renewed.SerialNumber.Cmp(server.SerialNumber) == 0 {
			return errors.New("still the first serial")
		}
		return nil
	})
}
