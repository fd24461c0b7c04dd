// Package secretcheck reads the Secrets a Memcached's spec.security names
// the way memcached will, before any pod mounts them: a certificate and
// key that do not belong together, a CA that is not one, an expired
// certificate or a malformed password file would otherwise become a pod
// that exits at start (memcached refuses to load them) or a cache no
// client can use. The checks are pure functions of the Secret and the
// time, so they are table-tested without a cluster.
package secretcheck

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// Problem is why a Secret cannot be used: Reason is a condition reason,
// Message names the Secret, the key and the fix.
type Problem struct {
	Reason  string
	Message string
}

func (p *Problem) Error() string { return p.Message }

// Condition reasons of the problems.
const (
	ReasonSecretNotFound     = "SecretNotFound"
	ReasonSecretInvalid      = "SecretInvalid"
	ReasonCertificateExpired = "CertificateExpired"
)

func invalid(s *corev1.Secret, format string, args ...any) *Problem {
	return &Problem{Reason: ReasonSecretInvalid, Message: fmt.Sprintf("Secret %s/%s: ", s.Namespace, s.Name) + fmt.Sprintf(format, args...)}
}

// NotFound is the problem of a Secret that does not exist.
func NotFound(namespace, name, field string) *Problem {
	return &Problem{Reason: ReasonSecretNotFound, Message: fmt.Sprintf(
		"Secret %s/%s named by %s does not exist: create it (cert-manager's Certificate does, see docs/security.md) or correct the name", namespace, name, field)}
}

// Certificate is what the operator reports of a valid TLS Secret.
type Certificate struct {
	Status cachev1alpha1.TLSStatus
	// NotBefore and NotAfter bound the certificate's validity.
	NotBefore, NotAfter time.Time
	// leaf is the parsed server certificate, for Unnamed.
	leaf *x509.Certificate
}

// Unnamed is the hosts a client verifying host names would refuse with
// this certificate, in the order given: the ones none of its DNS names or
// IP addresses match, wildcards matched as TLS clients match them (one
// label). A certificate whose leaf is unknown names nothing.
func (c Certificate) Unnamed(hosts ...string) []string {
	var out []string
	for _, h := range hosts {
		if c.leaf == nil || c.leaf.VerifyHostname(h) != nil {
			out = append(out, h)
		}
	}
	return out
}

// ExpiringWithin is how long before its end a certificate is reported as
// expiring: a sixth of its lifetime, at most a week. cert-manager renews
// at two thirds of the lifetime by default, so a certificate this close to
// its end means renewal has failed for a while.
func (c Certificate) ExpiringWithin() time.Duration {
	return min(c.NotAfter.Sub(c.NotBefore)/6, 7*24*time.Hour)
}

// TLS checks a TLS Secret for the given client certificate mode at now.
func TLS(s *corev1.Secret, mode cachev1alpha1.ClientCertificateMode, now time.Time) (*Certificate, *Problem) {
	certPEM, keyPEM := s.Data[cachev1alpha1.TLSCertKey], s.Data[cachev1alpha1.TLSKeyKey]
	for key, v := range map[string][]byte{cachev1alpha1.TLSCertKey: certPEM, cachev1alpha1.TLSKeyKey: keyPEM} {
		if len(v) == 0 {
			return nil, invalid(s, "key %s is missing or empty: a TLS Secret holds tls.crt and tls.key (kubectl create secret tls)", key)
		}
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, invalid(s, "tls.crt and tls.key do not make a certificate and its private key: %v", err)
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, invalid(s, "tls.crt: %v", err)
		}
	}
	cert := &Certificate{
		Status: cachev1alpha1.TLSStatus{
			SecretName:   s.Name,
			SerialNumber: Serial(leaf),
			NotAfter:     &metav1.Time{Time: leaf.NotAfter},
			DNSNames:     leaf.DNSNames,
		},
		NotBefore: leaf.NotBefore,
		NotAfter:  leaf.NotAfter,
		leaf:      leaf,
	}
	if mode == cachev1alpha1.ClientCertificatesRequest || mode == cachev1alpha1.ClientCertificatesRequire {
		if p := checkCA(s, mode); p != nil {
			return nil, p
		}
	}
	if now.After(leaf.NotAfter) {
		return nil, &Problem{Reason: ReasonCertificateExpired, Message: fmt.Sprintf(
			"Secret %s/%s: the certificate in tls.crt (serial %s) expired at %s: clients refuse it. Renew it (cert-manager: cmctl renew) and the pods load the new one without a restart",
			s.Namespace, s.Name, cert.Status.SerialNumber, leaf.NotAfter.UTC().Format(time.RFC3339))}
	}
	return cert, nil
}

// checkCA: memcached verifies client certificates against ca.crt, so it
// must hold at least one CA certificate and nothing that is not one.
func checkCA(s *corev1.Secret, mode cachev1alpha1.ClientCertificateMode) *Problem {
	rest := s.Data[cachev1alpha1.TLSCAKey]
	if len(rest) == 0 {
		return invalid(s, "key ca.crt is missing: clientCertificates: %s checks client certificates against it. Add the CA that signs your clients' certificates (cert-manager's CA and Vault issuers write it), or set clientCertificates: None", mode)
	}
	n := 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		ca, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return invalid(s, "ca.crt: certificate %d: %v", n+1, err)
		}
		if !ca.BasicConstraintsValid || !ca.IsCA {
			return invalid(s, "ca.crt: certificate %d (%s) is not a CA certificate (basicConstraints CA:TRUE): memcached would accept no client. Put the issuing CA there, not a leaf certificate", n+1, ca.Subject)
		}
		n++
	}
	if n == 0 {
		return invalid(s, "ca.crt holds no PEM certificate")
	}
	return nil
}

// MaxAuthLine is the longest user:password line memcached accepts: a
// client authenticates with "user password", and memcached 1.6.18 refuses
// a token over 255 bytes.
const MaxAuthLine = 255

// Auth checks a password Secret as memcached 1.6 reads it (measured by
// test/memcached against the real server): user:password lines. memcached
// refuses to start on an empty line or a Windows line end, and it drops the
// last character of a one-line file without a newline, so that user's
// password would silently be one character short.
func Auth(s *corev1.Secret) *Problem {
	file, ok := s.Data[cachev1alpha1.AuthFileKey]
	if !ok || len(file) == 0 {
		return invalid(s, "key %s is missing or empty: it holds memcached's password file, one user:password per line (kubectl create secret generic %s --from-file=%s=FILE)", cachev1alpha1.AuthFileKey, s.Name, cachev1alpha1.AuthFileKey)
	}
	lines := strings.Split(strings.TrimSuffix(string(file), "\n"), "\n")
	if len(lines) == 1 && !strings.HasSuffix(string(file), "\n") {
		return invalid(s, "%s is one line without a final newline: memcached would drop the last character of %s's password. End the file with a newline (printf 'user:password\\n' > FILE; kubectl create secret generic %s --from-file=%s=FILE); --from-literal leaves it out",
			cachev1alpha1.AuthFileKey, strings.SplitN(lines[0], ":", 2)[0], s.Name, cachev1alpha1.AuthFileKey)
	}
	for i, line := range lines {
		user, password, found := strings.Cut(line, ":")
		switch {
		case line == "":
			return invalid(s, "%s line %d is empty: memcached refuses a password file with an empty line", cachev1alpha1.AuthFileKey, i+1)
		case strings.HasSuffix(line, "\r"):
			return invalid(s, "%s line %d ends with a carriage return (a Windows line end): memcached refuses the file; save it with Unix line ends", cachev1alpha1.AuthFileKey, i+1)
		case !found || user == "" || password == "":
			return invalid(s, "%s line %d is not user:password", cachev1alpha1.AuthFileKey, i+1)
		case strings.ContainsAny(user, " \t\r") || strings.ContainsAny(password, " \t\r"):
			// A client authenticates with "user password": a blank in
			// either would split differently.
			return invalid(s, "%s line %d: user and password must not contain blanks", cachev1alpha1.AuthFileKey, i+1)
		case len(line) > MaxAuthLine:
			return invalid(s, "%s line %d is %d bytes: memcached accepts user:password lines of at most %d bytes", cachev1alpha1.AuthFileKey, i+1, len(line), MaxAuthLine)
		}
	}
	return nil
}

// Serial formats a certificate's serial number as openssl prints it:
// upper-case hexadecimal.
func Serial(c *x509.Certificate) string {
	return fmt.Sprintf("%X", c.SerialNumber)
}
