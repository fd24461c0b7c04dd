package secretcheck

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

var now = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

type keyPair struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func (k keyPair) keyPEM(t *testing.T) []byte {
	b, err := x509.MarshalECPrivateKey(k.key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: b})
}

// issue makes a certificate valid from notBefore to notAfter, signed by
// parent (self-signed when nil), for dnsNames (cache.ns.svc when none).
func issue(t *testing.T, serial int64, isCA bool, notBefore, notAfter time.Time, parent *keyPair, dnsNames ...string) keyPair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "cache"},
		DNSNames: []string{"cache.ns.svc"}, NotBefore: notBefore, NotAfter: notAfter,
		BasicConstraintsValid: true, IsCA: isCA,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
	}
	if len(dnsNames) > 0 {
		tmpl.DNSNames = dnsNames
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return keyPair{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func secret(data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cache-tls"}, Data: data}
}

func TestTLS(t *testing.T) {
	ca := issue(t, 1, true, now.Add(-time.Hour), now.Add(365*24*time.Hour), nil)
	leaf := issue(t, 0xABC, false, now.Add(-time.Hour), now.Add(90*24*time.Hour), &ca)
	other := issue(t, 2, false, now.Add(-time.Hour), now.Add(90*24*time.Hour), &ca)
	expired := issue(t, 3, false, now.Add(-48*time.Hour), now.Add(-time.Hour), &ca)
	good := map[string][]byte{"tls.crt": leaf.pem, "tls.key": leaf.keyPEM(t), "ca.crt": ca.pem}
	with := func(key string, v []byte) map[string][]byte {
		out := map[string][]byte{}
		for k, b := range good {
			out[k] = b
		}
		if v == nil {
			delete(out, key)
		} else {
			out[key] = v
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		data   map[string][]byte
		mode   cachev1alpha1.ClientCertificateMode
		reason string // empty: valid
		says   string
	}{
		{name: "valid with client certificates", data: good, mode: cachev1alpha1.ClientCertificatesRequire},
		{name: "no CA needed without client certificates", data: with("ca.crt", nil), mode: cachev1alpha1.ClientCertificatesNone},
		{name: "missing key", data: with("tls.key", nil), reason: ReasonSecretInvalid, says: "key tls.key is missing"},
		{name: "missing certificate", data: with("tls.crt", nil), reason: ReasonSecretInvalid, says: "key tls.crt is missing"},
		{name: "key of another certificate", data: with("tls.key", other.keyPEM(t)), reason: ReasonSecretInvalid, says: "do not make a certificate and its private key"},
		{name: "CA missing for Require", data: with("ca.crt", nil), mode: cachev1alpha1.ClientCertificatesRequire, reason: ReasonSecretInvalid, says: "key ca.crt is missing"},
		{name: "CA missing for Request", data: with("ca.crt", nil), mode: cachev1alpha1.ClientCertificatesRequest, reason: ReasonSecretInvalid, says: "key ca.crt is missing"},
		{name: "CA that is not a CA", data: with("ca.crt", other.pem), mode: cachev1alpha1.ClientCertificatesRequire, reason: ReasonSecretInvalid, says: "is not a CA certificate"},
		{name: "CA that is not PEM", data: with("ca.crt", []byte("nope")), mode: cachev1alpha1.ClientCertificatesRequire, reason: ReasonSecretInvalid, says: "no PEM certificate"},
		{name: "expired", data: with("tls.crt", expired.pem), reason: ReasonSecretInvalid, says: "do not make"},
		{name: "expired with its key", data: map[string][]byte{"tls.crt": expired.pem, "tls.key": expired.keyPEM(t)}, reason: ReasonCertificateExpired, says: "expired at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cert, p := TLS(secret(tc.data), tc.mode, now)
			if tc.reason == "" {
				if p != nil {
					t.Fatalf("refused: %v", p)
				}
				if cert.Status.SerialNumber != "ABC" || cert.Status.SecretName != "cache-tls" || !cert.NotAfter.Equal(leaf.cert.NotAfter) {
					t.Errorf("reported %+v", cert.Status)
				}
				return
			}
			if p == nil {
				t.Fatal("accepted")
			}
			if p.Reason != tc.reason || !strings.Contains(p.Message, tc.says) || !strings.Contains(p.Message, "Secret ns/cache-tls") {
				t.Errorf("got %s: %s; want %s saying %q and naming the Secret", p.Reason, p.Message, tc.reason, tc.says)
			}
		})
	}
}

// A client verifying host names accepts a server whose name the
// certificate holds, a wildcard matching one label only.
func TestUnnamed(t *testing.T) {
	ca := issue(t, 1, true, now.Add(-time.Hour), now.Add(365*24*time.Hour), nil)
	check := func(names ...string) Certificate {
		t.Helper()
		leaf := issue(t, 3, false, now.Add(-time.Hour), now.Add(90*24*time.Hour), &ca, names...)
		cert, p := TLS(secret(map[string][]byte{"tls.crt": leaf.pem, "tls.key": leaf.keyPEM(t)}), cachev1alpha1.ClientCertificatesNone, now)
		if p != nil {
			t.Fatal(p)
		}
		return *cert
	}
	serviceOnly := check("cache.ns.svc")
	if got := serviceOnly.Unnamed("cache.ns.svc", "cache-0.cache.ns.svc", "10.0.0.7"); !slices.Equal(got, []string{"cache-0.cache.ns.svc", "10.0.0.7"}) {
		t.Errorf("a certificate for the Service alone leaves %v unnamed, want the pod's name and address", got)
	}
	withPods := check("cache.ns.svc", "*.cache.ns.svc")
	if got := withPods.Unnamed("cache.ns.svc", "cache-0.cache.ns.svc", "cache-11.cache.ns.svc"); len(got) != 0 {
		t.Errorf("a certificate with *.cache.ns.svc leaves %v unnamed", got)
	}
	if got := withPods.Unnamed("a.cache-0.cache.ns.svc", "other.ns.svc"); len(got) != 2 {
		t.Errorf("*.cache.ns.svc matched %v: a wildcard names one label of that domain only", got)
	}
	if got := (Certificate{}).Unnamed("cache.ns.svc"); len(got) != 1 {
		t.Errorf("a certificate without a leaf names %v", got)
	}
}

func TestExpiringWithin(t *testing.T) {
	for _, tc := range []struct {
		lifetime, want time.Duration
	}{
		{90 * 24 * time.Hour, 7 * 24 * time.Hour},
		{24 * time.Hour, 4 * time.Hour},
	} {
		c := Certificate{NotBefore: now, NotAfter: now.Add(tc.lifetime)}
		if got := c.ExpiringWithin(); got != tc.want {
			t.Errorf("lifetime %v: %v, want %v", tc.lifetime, got, tc.want)
		}
	}
}

func TestAuth(t *testing.T) {
	for _, tc := range []struct {
		file, says string
	}{
		{file: "alice:secret\n"},
		{file: "alice:old\nalice:new\n"},
		{file: "", says: "missing or empty"},
		{file: "alice\n", says: "line 1 is not user:password"},
		{file: "alice:\n", says: "line 1 is not user:password"},
		{file: "alice:ok\nbob:with blank\n", says: "line 2: user and password must not contain blanks"},
		{file: "alice:secret", says: "is one line without a final newline: memcached would drop the last character of alice's password"},
		{file: "alice:old\nbob:new"},
		{file: "alice:secret\r\n", says: "line 1 ends with a carriage return"},
		{file: "alice:secret\n\n", says: "line 2 is empty"},
		{file: "\nalice:secret\n", says: "line 1 is empty"},
		{file: "alice:sec:ret\n"},
		{file: "alice:" + strings.Repeat("p", MaxAuthLine-len("alice:")) + "\n"},
		{file: "alice:" + strings.Repeat("p", MaxAuthLine-len("alice:")+1) + "\n", says: "line 1 is 256 bytes"},
	} {
		p := Auth(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "auth"}, Data: map[string][]byte{"auth-file": []byte(tc.file)}})
		switch {
		case tc.says == "" && p != nil:
			t.Errorf("%q refused: %v", tc.file, p)
		case tc.says != "" && (p == nil || !strings.Contains(p.Message, tc.says)):
			t.Errorf("%q: %v, want %q", tc.file, p, tc.says)
		}
	}
}
