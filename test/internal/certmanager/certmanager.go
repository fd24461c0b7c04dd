// Package certmanager stands in for cert-manager's controller in test
// clusters. cert-manager itself cannot run here: its controller's module
// (github.com/cert-manager/cert-manager/cmd/controller) is not served by
// the Go module proxy, so the binary cannot be built. Its API and its pki
// package are served, so:
//
//   - the CRDs are cert-manager's own, generated from its API module
//     (bin/certmanager-crds, scripts/build-tools.sh);
//   - the certificates are made by cert-manager's own code: the x509
//     template from the Certificate (pki.CertificateTemplateFromCertificate),
//     the key (pki.GeneratePrivateKeyForCertificate, pki.EncodePrivateKey),
//     and the signature (pki.SignCertificate);
//   - only the reconcile loop is this package's, and it encodes what
//     cert-manager's SelfSigned and CA issuers write: a kubernetes.io/tls
//     Secret with tls.crt, tls.key and ca.crt (the certificate itself for
//     SelfSigned, the CA's certificate for CA), the cert-manager.io
//     annotations on it, and Ready conditions on Issuers and Certificates
//     (which Argo CD's health checks and Flux's kstatus read).
//
// It issues a Certificate when its Secret is missing, and again when its
// Issuing condition is True, which is how `cmctl renew` asks cert-manager
// to renew one (Renew does the same); it does not renew on a schedule. It
// supports the issuers deploy/components/cert-manager uses: namespaced
// SelfSigned and CA.
package certmanager

import (
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	"github.com/cert-manager/cert-manager/pkg/util/pki"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/repo"
)

// InstallCRDs applies cert-manager's CRDs with kubectl and waits for them.
func InstallCRDs(t testing.TB, kubeconfig string) {
	t.Helper()
	bins, err := repo.Bin("kubectl", "certmanager-crds")
	if err != nil {
		t.Fatal(err)
	}
	cluster.Run(t, kubeconfig, nil, bins["kubectl"], "apply", "--server-side", "-f", bins["certmanager-crds"])
	// kubectl wait fails, rather than waits, on a CRD so new that it has
	// no conditions yet.
	cluster.Eventually(t, time.Minute, "cert-manager's CRDs to be Established", func() error {
		_, err := cluster.TryRun(kubeconfig, nil, bins["kubectl"], "wait", "--for=condition=Established", "--timeout=10s",
			"crd/certificates.cert-manager.io", "crd/issuers.cert-manager.io")
		return err
	})
}

// Start issues the Certificates of the cluster at kubeconfig until the
// test ends, checking every 200 ms.
func Start(t testing.TB, kubeconfig string) {
	t.Helper()
	c, err := newClient(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
	})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if err := reconcile(ctx, c); err != nil && ctx.Err() == nil {
				t.Logf("certmanager: %v", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
}

// newClient is a client of the cluster at kubeconfig that knows
// cert-manager's kinds.
func newClient(kubeconfig string) (client.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := cmapi.AddToScheme(s); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: s})
}

// reconcile makes every Issuer Ready that can sign, and issues every
// Certificate that has no Secret yet.
func reconcile(ctx context.Context, c client.Client) error {
	var issuers cmapi.IssuerList
	if err := c.List(ctx, &issuers); err != nil {
		return err
	}
	var errs []error
	for i := range issuers.Items {
		iss := &issuers.Items[i]
		if _, _, err := signer(ctx, c, iss); err != nil {
			errs = append(errs, setIssuerReady(ctx, c, iss, cmmeta.ConditionFalse, "ErrGetKeyPair", err.Error()))
			continue
		}
		errs = append(errs, setIssuerReady(ctx, c, iss, cmmeta.ConditionTrue, "KeyPairVerified", "Signing CA verified"))
	}
	var certs cmapi.CertificateList
	if err := c.List(ctx, &certs); err != nil {
		return err
	}
	for i := range certs.Items {
		errs = append(errs, issue(ctx, c, &certs.Items[i]))
	}
	return errors.Join(errs...)
}

// signer returns the CA certificate and key an Issuer signs with; nil, nil
// for SelfSigned, which signs each certificate with its own key.
func signer(ctx context.Context, c client.Client, iss *cmapi.Issuer) (*x509.Certificate, crypto.Signer, error) {
	switch {
	case iss.Spec.SelfSigned != nil:
		return nil, nil, nil
	case iss.Spec.CA != nil:
		var secret corev1.Secret
		if err := c.Get(ctx, types.NamespacedName{Namespace: iss.Namespace, Name: iss.Spec.CA.SecretName}, &secret); err != nil {
			return nil, nil, fmt.Errorf("get the CA issuer's key pair: %w", err)
		}
		cert, err := pki.DecodeX509CertificateBytes(secret.Data[corev1.TLSCertKey])
		if err != nil {
			return nil, nil, err
		}
		key, err := pki.DecodePrivateKeyBytes(secret.Data[corev1.TLSPrivateKeyKey])
		if err != nil {
			return nil, nil, err
		}
		return cert, key, nil
	default:
		return nil, nil, errors.New("only SelfSigned and CA issuers are supported here")
	}
}

func issuerReady(iss *cmapi.Issuer) bool {
	for _, cond := range iss.Status.Conditions {
		if cond.Type == cmapi.IssuerConditionReady {
			return cond.Status == cmmeta.ConditionTrue
		}
	}
	return false
}

func setIssuerReady(ctx context.Context, c client.Client, iss *cmapi.Issuer, status cmmeta.ConditionStatus, reason, message string) error {
	for _, cond := range iss.Status.Conditions {
		if cond.Type == cmapi.IssuerConditionReady && cond.Status == status && cond.Reason == reason {
			return nil
		}
	}
	now := metav1.Now()
	iss.Status.Conditions = []cmapi.IssuerCondition{{
		Type: cmapi.IssuerConditionReady, Status: status, Reason: reason, Message: message,
		LastTransitionTime: &now, ObservedGeneration: iss.Generation,
	}}
	return client.IgnoreNotFound(c.Status().Update(ctx, iss))
}

// Renew asks for a new certificate as `cmctl renew` does: it sets the
// Certificate's Issuing condition.
func Renew(ctx context.Context, kubeconfig, namespace, name string) error {
	c, err := newClient(kubeconfig)
	if err != nil {
		return err
	}
	var crt cmapi.Certificate
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &crt); err != nil {
		return err
	}
	now := metav1.Now()
	crt.Status.Conditions = append(crt.Status.Conditions, cmapi.CertificateCondition{
		Type: cmapi.CertificateConditionIssuing, Status: cmmeta.ConditionTrue, Reason: "ManuallyTriggered",
		Message: "Certificate re-issuance manually triggered", LastTransitionTime: &now, ObservedGeneration: crt.Generation,
	})
	return c.Status().Update(ctx, &crt)
}

// issuing reports whether a renewal was asked for.
func issuing(crt *cmapi.Certificate) bool {
	for _, cond := range crt.Status.Conditions {
		if cond.Type == cmapi.CertificateConditionIssuing && cond.Status == cmmeta.ConditionTrue {
			return true
		}
	}
	return false
}

// issue writes the Certificate's Secret, if it has none or a renewal was
// asked for, as the issuer it names would, and marks the Certificate Ready.
func issue(ctx context.Context, c client.Client, crt *cmapi.Certificate) error {
	existing := &corev1.Secret{}
	err := c.Get(ctx, types.NamespacedName{Namespace: crt.Namespace, Name: crt.Spec.SecretName}, existing)
	switch {
	case err == nil && !issuing(crt):
		return nil
	case apierrors.IsNotFound(err):
		existing = nil
	case err != nil:
		return err
	}
	if crt.Spec.IssuerRef.Kind != "" && crt.Spec.IssuerRef.Kind != cmapi.IssuerKind {
		return fmt.Errorf("certificate %s/%s: only namespaced Issuers are supported here", crt.Namespace, crt.Name)
	}
	var iss cmapi.Issuer
	if err := c.Get(ctx, types.NamespacedName{Namespace: crt.Namespace, Name: crt.Spec.IssuerRef.Name}, &iss); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !issuerReady(&iss) {
		return nil // on a later pass
	}
	caCert, caKey, err := signer(ctx, c, &iss)
	if err != nil {
		return err
	}
	key, err := pki.GeneratePrivateKeyForCertificate(crt)
	if err != nil {
		return err
	}
	template, err := pki.CertificateTemplateFromCertificate(crt)
	if err != nil {
		return err
	}
	signerKey := key
	issuerCert := template
	if caCert != nil {
		issuerCert, signerKey = caCert, caKey
	}
	certPEM, cert, err := pki.SignCertificate(template, issuerCert, key.Public(), signerKey)
	if err != nil {
		return err
	}
	keyPEM, err := pki.EncodePrivateKey(key, crt.Spec.PrivateKey.Encoding)
	if err != nil {
		return err
	}
	caPEM := certPEM
	if caCert != nil {
		if caPEM, err = pki.EncodeX509(caCert); err != nil {
			return err
		}
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: crt.Namespace, Name: crt.Spec.SecretName, Annotations: map[string]string{
			cmapi.CertificateNameKey:       crt.Name,
			cmapi.IssuerNameAnnotationKey:  iss.Name,
			cmapi.IssuerKindAnnotationKey:  cmapi.IssuerKind,
			cmapi.IssuerGroupAnnotationKey: "cert-manager.io",
			cmapi.CommonNameAnnotationKey:  cert.Subject.CommonName,
		}},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM, "ca.crt": caPEM},
	}
	if existing == nil {
		err = c.Create(ctx, secret)
	} else {
		existing.Annotations, existing.Data = secret.Annotations, secret.Data
		err = c.Update(ctx, existing)
	}
	if err != nil {
		return err
	}
	now := metav1.Now()
	crt.Status.Conditions = []cmapi.CertificateCondition{{
		Type: cmapi.CertificateConditionReady, Status: cmmeta.ConditionTrue, Reason: "Ready",
		Message: "Certificate is up to date and has not expired", LastTransitionTime: &now, ObservedGeneration: crt.Generation,
	}}
	crt.Status.NotBefore = &metav1.Time{Time: cert.NotBefore}
	crt.Status.NotAfter = &metav1.Time{Time: cert.NotAfter}
	revision := 1
	if crt.Status.Revision != nil {
		revision = *crt.Status.Revision + 1
	}
	crt.Status.Revision = &revision
	return client.IgnoreNotFound(c.Status().Update(ctx, crt))
}
