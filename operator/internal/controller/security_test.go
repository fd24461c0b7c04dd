//go:build !unit

package controller

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
	"github.com/example/memcached-operator/operator/internal/secretcheck"
)

// selfSigned returns a certificate and its key in PEM, valid from a minute
// ago for lifetime from now, with the given serial.
func selfSigned(t *testing.T, serial int64, lifetime time.Duration) (certPEM, keyPEM []byte) {
	return selfSignedFrom(t, serial, time.Now().Add(-time.Minute), lifetime)
}

func selfSignedFrom(t *testing.T, serial int64, notBefore time.Time, lifetime time.Duration, dnsNames ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "cache"},
		NotBefore: notBefore, NotAfter: time.Now().Add(lifetime), DNSNames: dnsNames,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: k})
}

// A Memcached whose TLS Secret is missing stalls with a message naming
// the Secret, and gets no Deployment (its pods would exit at start);
// creating the Secret heals it through the Secret watch. Rotating the
// certificate then updates status.tls without touching the pod template:
// the reloader in the pods loads it, so the cache keeps its keys. A Secret
// whose key does not match stalls again and leaves the pods alone.
func TestTLSSecretLifecycle(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	mc := newMemcached(ns, "secure", 1, func(m *cachev1alpha1.Memcached) {
		m.Spec.Security = &cachev1alpha1.SecuritySpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "secure-tls"}}
	})
	g.Expect(k8sClient.Create(testCtx, mc)).To(Succeed())
	NewWithT(t).Eventually(func(g Gomega) {
		c := condition(g, mc, cachev1alpha1.ConditionStalled)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(secretcheck.ReasonSecretNotFound))
		g.Expect(c.Message).To(ContainSubstring("Secret " + ns + "/secure-tls named by spec.security.tls.secretName does not exist"))
	}, timeout, interval).Should(Succeed())
	g.Expect(k8sClient.Get(testCtx, key(deploymentOf(mc)), deploymentOf(mc))).NotTo(Succeed(), "a Deployment was created for a Secret that does not exist")

	crt, k := selfSigned(t, 0x10, 90*24*time.Hour)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secure-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": crt, "tls.key": k}}
	g.Expect(k8sClient.Create(testCtx, secret)).To(Succeed())
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(condition(g, mc, cachev1alpha1.ConditionStalled).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(fetch(g, mc).Status.TLS).NotTo(BeNil())
		g.Expect(fetch(g, mc).Status.TLS.SerialNumber).To(Equal("10"))
		g.Expect(condition(g, mc, cachev1alpha1.ConditionCertificateExpiring).Status).To(Equal(metav1.ConditionFalse))
	}, timeout, interval).Should(Succeed())
	markDeploymentReady(t, mc)
	expectReady(t, mc)
	generation := fetch(g, deploymentOf(mc)).Generation

	// Rotation: status follows, the template stays untouched.
	crt, k = selfSigned(t, 0x11, 24*time.Hour)
	update(t, secret, func(s *corev1.Secret) { s.Data = map[string][]byte{"tls.crt": crt, "tls.key": k} })
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(fetch(g, mc).Status.TLS.SerialNumber).To(Equal("11"))
	}, timeout, interval).Should(Succeed())
	g.Expect(fetch(g, deploymentOf(mc)).Generation).To(Equal(generation), "a certificate rotation changed the Deployment: its pods would restart and lose the cache")
	expectReady(t, mc)

	// A key that belongs to another certificate: stalled, pods left alone.
	_, otherKey := selfSigned(t, 0x12, time.Hour)
	update(t, secret, func(s *corev1.Secret) { s.Data["tls.key"] = otherKey })
	NewWithT(t).Eventually(func(g Gomega) {
		c := condition(g, mc, cachev1alpha1.ConditionStalled)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(secretcheck.ReasonSecretInvalid))
		g.Expect(c.Message).To(ContainSubstring("tls.crt and tls.key do not make a certificate and its private key"))
		g.Expect(fetch(g, mc).Status.TLS.SerialNumber).To(Equal("11"), "status.tls must keep what the pods still serve")
	}, timeout, interval).Should(Succeed())
	g.Expect(fetch(g, deploymentOf(mc)).Generation).To(Equal(generation))
}

// A certificate with less than a sixth of its life left is reported by
// CertificateExpiring, without making the cache unready.
func TestExpiringCertificateIsReported(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	// 55 minutes of life, 5 left: under the sixth (9 minutes).
	crt, k := selfSignedFrom(t, 0x20, time.Now().Add(-50*time.Minute), 5*time.Minute)
	g.Expect(k8sClient.Create(testCtx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "short"},
		Data: map[string][]byte{"tls.crt": crt, "tls.key": k}})).To(Succeed())
	mc := newMemcached(ns, "short", 1, func(m *cachev1alpha1.Memcached) {
		m.Spec.Security = &cachev1alpha1.SecuritySpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "short"}}
	})
	g.Expect(k8sClient.Create(testCtx, mc)).To(Succeed())
	markDeploymentReady(t, mc)
	expectReady(t, mc)
	NewWithT(t).Eventually(func(g Gomega) {
		c := condition(g, mc, cachev1alpha1.ConditionCertificateExpiring)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonCertificateExpiring))
		g.Expect(c.Message).To(ContainSubstring("Secret short (serial 20) expires at"))
	}, timeout, interval).Should(Succeed())
}

// A certificate that does not name the servers clients are given is
// reported by CertificateNamesMissing with the names to add, without
// making the cache unready: for a Stable cache each pod's name of
// status.serverList, which *.NAME.NAMESPACE.svc covers at every size; for
// an Ephemeral one the Service's name, which its clients verify.
func TestCertificateNamesAreChecked(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	service := "named." + ns + ".svc"
	crt, k := selfSignedFrom(t, 0x30, time.Now().Add(-time.Minute), 90*24*time.Hour, service)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "named-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": crt, "tls.key": k}}
	g.Expect(k8sClient.Create(testCtx, secret)).To(Succeed())
	mc := newMemcached(ns, "named", 2, func(m *cachev1alpha1.Memcached) {
		m.Spec.Identity = cachev1alpha1.IdentityStable
		m.Spec.Security = &cachev1alpha1.SecuritySpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "named-tls"}}
	})
	g.Expect(k8sClient.Create(testCtx, mc)).To(Succeed())
	NewWithT(t).Eventually(func(g Gomega) {
		c := condition(g, mc, cachev1alpha1.ConditionCertificateNamesMissing)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonCertificateNamesMissing))
		g.Expect(c.Message).To(Equal("The certificate in Secret named-tls (serial 30) does not name named-0." + service + ", named-1." + service +
			": clients that verify host names refuse those servers. Add *." + service +
			" to its DNS names (cert-manager: the Certificate's spec.dnsNames); the pods load the new one without a restart."))
		g.Expect(condition(g, mc, cachev1alpha1.ConditionStalled).Status).To(Equal(metav1.ConditionFalse))
	}, timeout, interval).Should(Succeed())

	// The wildcard names every ordinal: a scale-up needs no new certificate.
	crt, k = selfSignedFrom(t, 0x31, time.Now().Add(-time.Minute), 90*24*time.Hour, service, "*."+service)
	update(t, secret, func(s *corev1.Secret) { s.Data = map[string][]byte{"tls.crt": crt, "tls.key": k} })
	update(t, mc, func(m *cachev1alpha1.Memcached) { m.Spec.Size = ptr.To[int32](5) })
	NewWithT(t).Eventually(func(g Gomega) {
		c := condition(g, mc, cachev1alpha1.ConditionCertificateNamesMissing)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Message).To(Equal("The certificate names the Service and every pod of status.serverList."))
		g.Expect(c.ObservedGeneration).To(Equal(fetch(g, mc).Generation))
	}, timeout, interval).Should(Succeed())

	// Ephemeral: the Service's name is what its clients verify.
	other, k := selfSignedFrom(t, 0x32, time.Now().Add(-time.Minute), 90*24*time.Hour, "elsewhere.example.com")
	g.Expect(k8sClient.Create(testCtx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": other, "tls.key": k}})).To(Succeed())
	ephemeral := newMemcached(ns, "ephemeral", 1, func(m *cachev1alpha1.Memcached) {
		m.Spec.Security = &cachev1alpha1.SecuritySpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "other-tls"}}
	})
	g.Expect(k8sClient.Create(testCtx, ephemeral)).To(Succeed())
	NewWithT(t).Eventually(func(g Gomega) {
		c := condition(g, ephemeral, cachev1alpha1.ConditionCertificateNamesMissing)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(HavePrefix("The certificate in Secret other-tls (serial 32) does not name ephemeral." + ns + ".svc: "))
		g.Expect(c.Message).To(ContainSubstring("Add ephemeral." + ns + ".svc to its DNS names"))
	}, timeout, interval).Should(Succeed())
	markDeploymentReady(t, ephemeral)
	expectReady(t, ephemeral)
}
