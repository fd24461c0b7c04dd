package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/util/keyutil"
)

// CA is the cluster's certificate authority, the one kwokctl made: the
// apiserver trusts client certificates it signs, and the kubelets trust
// the apiserver's calls signed by it.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
}

// LoadCA reads ca.crt and ca.key from a kwokctl cluster's pki directory.
func LoadCA(dir string) (*CA, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return nil, fmt.Errorf("%s/ca.crt: no PEM certificate", dir)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s/ca.crt: %w", dir, err)
	}
	key, err := keyutil.PrivateKeyFromFile(filepath.Join(dir, "ca.key"))
	if err != nil {
		return nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s/ca.key: not a signing key", dir)
	}
	return &CA{Cert: cert, Key: signer, CertPEM: certPEM}, nil
}

// Identity is what a certificate says: the subject, as Kubernetes reads
// it (CN the user, O the groups), and the names it serves.
type Identity struct {
	CommonName    string
	Organizations []string
	IPs           []net.IP
	DNSNames      []string
	Server        bool
}

// Issue writes <name>.crt and <name>.key into dir: a fresh P-256 key and a
// certificate for id, valid for a year.
func (ca *CA) Issue(dir, name string, id Identity) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return err
	}
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if id.Server {
		usage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: id.CommonName, Organization: id.Organizations},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
		IPAddresses:  id.IPs,
		DNSNames:     id.DNSNames,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}
