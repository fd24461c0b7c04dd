package memcached_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
	"github.com/example/memcached-operator/test/internal/memcached"
	"github.com/example/memcached-operator/test/internal/proc"
	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

// testCA issues the certificates of one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		BasicConstraintsValid: true, IsCA: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a certificate and key in PEM, for a server or a client.
func (ca *testCA) issue(t *testing.T, serial int64, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "cache"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(12 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: k})
}

// writeSecretVolume lays out data as the kubelet does for a Secret
// volume: the files are links into a ..data directory that is swapped
// atomically on every update.
func writeSecretVolume(t *testing.T, dir string, data map[string][]byte) {
	t.Helper()
	version := filepath.Join(dir, fmt.Sprintf("..%d", time.Now().UnixNano()))
	if err := os.MkdirAll(version, 0o755); err != nil {
		t.Fatal(err)
	}
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(version, k), v, 0o644); err != nil {
			t.Fatal(err)
		}
		_ = os.Symlink(filepath.Join("..data", k), filepath.Join(dir, k))
	}
	tmp := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(filepath.Base(version), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

// localSecureArgs turns a secured memcached container's arguments into
// local ones: mount paths point at the local copies of the volumes, the
// wildcard listeners at 127.0.0.1, and every port at a free one. ports
// maps the container's ports to the local ones.
func localSecureArgs(t *testing.T, args []string, mounts map[string]string) (out []string, ports map[int]int) {
	t.Helper()
	ports = map[int]int{}
	local := func(p string) string {
		n, err := strconv.Atoi(p)
		if err != nil {
			t.Fatalf("port %q: %v", p, err)
		}
		if _, ok := ports[n]; !ok {
			ports[n] = run.FreePort(t)
		}
		return strconv.Itoa(ports[n])
	}
	out = slices.Clone(args)
	for i, a := range out {
		for from, to := range mounts {
			a = strings.ReplaceAll(a, from, to)
		}
		if i > 0 && out[i-1] == "-p" {
			a = local(a)
		}
		if i > 0 && out[i-1] == "-l" {
			var listeners []string
			for l := range strings.SplitSeq(a, ",") {
				host, port, _ := strings.Cut(strings.TrimPrefix(l, "notls:"), ":")
				if host == "*" {
					host = "127.0.0.1"
				}
				prefix := ""
				if strings.HasPrefix(l, "notls:") {
					prefix = "notls:"
				}
				listeners = append(listeners, prefix+host+":"+local(port))
			}
			a = strings.Join(listeners, ",")
		}
		out[i] = a
	}
	return out, ports
}

// command sends one ASCII command on conn and returns the first line of
// the answer.
func command(conn net.Conn, cmd string) (string, error) {
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(conn, cmd); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line), err
}

// TestTLSAgainstRealMemcached runs memcached with exactly the arguments
// the operator writes for spec.security.tls (clientCertificates: Require,
// a plaintext migration port) and the files its pod would mount, then
// speaks TLS to it with Go's crypto/tls: with and without a client
// certificate, with a certificate of another CA, plaintext on the TLS
// port, the exporter through the loopback listener; then rotates the certificate as the kubelet does and runs the
// real reloader (bin/manager reload), which must make memcached serve the
// new serial with every key kept and no restart.
func TestTLSAgainstRealMemcached(t *testing.T) {
	h := startHarness(t, "tls")
	ctx := context.Background()
	ca, stranger := newCA(t, "cache-ca"), newCA(t, "another-ca")
	serverCert, serverKey := ca.issue(t, 100, x509.ExtKeyUsageServerAuth)
	secretData := map[string][]byte{"tls.crt": serverCert, "tls.key": serverKey, "ca.crt": ca.pem}
	if err := h.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.namespace, Name: "cache-tls"}, Type: corev1.SecretTypeTLS, Data: secretData}); err != nil {
		t.Fatal(err)
	}
	mc := &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.namespace, Name: "secure"},
		Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1), Security: &cachev1alpha1.SecuritySpec{TLS: &cachev1alpha1.TLSSpec{
			SecretName: "cache-tls", ClientCertificates: cachev1alpha1.ClientCertificatesRequire, PlaintextPort: ptr.To[int32](11212),
		}}, Monitoring: &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: true}}},
	}
	if err := h.c.Create(ctx, mc); err != nil {
		t.Fatal(err)
	}
	d, err := h.waitDeployment(ctx, mc, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.c.Get(ctx, client.ObjectKeyFromObject(mc), mc); err != nil {
		t.Fatal(err)
	}
	if mc.Status.TLS == nil || mc.Status.TLS.SerialNumber != "64" {
		t.Errorf("status.tls = %+v, want serial 64 (100)", mc.Status.TLS)
	}
	pod := d.Spec.Template.Spec
	main, reloader := container(pod, "memcached"), container(pod, "reloader")
	if main == nil || reloader == nil {
		t.Fatalf("want memcached and reloader containers, got %v", pod.Containers)
	}

	// Readable by the user memcached drops to, as the pod's fsGroup makes
	// the Secret volume readable by the pod's user.
	tlsDir, err := os.MkdirTemp("", "tls-volume-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(tlsDir) })
	if err := os.Chmod(tlsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeSecretVolume(t, tlsDir, secretData)
	args, ports := localSecureArgs(t, main.Args, map[string]string{"/etc/memcached/tls": tlsDir})
	bin, err := memcached.Binary()
	if err != nil {
		t.Fatal(err)
	}
	// Run as the test's user: the files are this process's, as the
	// Secret volume's are the pod's through fsGroup.
	srv := proc.Start(t, proc.Spec{Name: "memcached", Path: bin, Args: append(args, "-u", "nobody"), StopTimeout: 5 * time.Second})
	tlsAddr := "127.0.0.1:" + strconv.Itoa(ports[cachev1alpha1.MemcachedPort])
	plainAddr := "127.0.0.1:" + strconv.Itoa(ports[11212])
	loopback := "127.0.0.1:" + strconv.Itoa(ports[cachev1alpha1.LoopbackPort])
	waitAnswer(t, plainAddr)

	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	clientCert, clientKey := ca.issue(t, 7, x509.ExtKeyUsageClientAuth)
	strangerCert, strangerKey := stranger.issue(t, 8, x509.ExtKeyUsageClientAuth)
	dialTLS := func(certPEM, keyPEM []byte) (*tls.Conn, error) {
		cfg := &tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12}
		if certPEM != nil {
			pair, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				return nil, err
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		return tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", tlsAddr, cfg)
	}
	roundTrip := func(certPEM, keyPEM []byte, cmd string) (string, string, error) {
		conn, err := dialTLS(certPEM, keyPEM)
		if err != nil {
			return "", "", err
		}
		defer func() { _ = conn.Close() }()
		answer, err := command(conn, cmd)
		return answer, fmt.Sprintf("%X", conn.ConnectionState().PeerCertificates[0].SerialNumber), err
	}

	if got, serial, err := roundTrip(clientCert, clientKey, "set kept 0 0 5\r\nvalue\r\n"); err != nil || got != "STORED" || serial != "64" {
		t.Fatalf("with a client certificate: %q, serial %s, %v; want STORED from serial 64", got, serial, err)
	}
	if got, _, err := roundTrip(nil, nil, "version\r\n"); err == nil && strings.HasPrefix(got, "VERSION") {
		t.Error("a client without a certificate was served: ssl_verify_mode does not require one")
	}
	if got, _, err := roundTrip(strangerCert, strangerKey, "version\r\n"); err == nil && strings.HasPrefix(got, "VERSION") {
		t.Error("a client certificate of another CA was accepted")
	}
	if conn, err := net.DialTimeout("tcp", tlsAddr, 3*time.Second); err == nil {
		if got, _ := command(conn, "version\r\n"); strings.HasPrefix(got, "VERSION") {
			t.Error("plaintext was served on the TLS port")
		}
		_ = conn.Close()
	}
	if conn, err := net.DialTimeout("tcp", plainAddr, 3*time.Second); err != nil {
		t.Errorf("plaintext port: %v", err)
	} else {
		if got, _ := command(conn, "get kept\r\n"); got != "VALUE kept 0 5" {
			t.Errorf("plaintext port: get kept = %q", got)
		}
		_ = conn.Close()
	}

	// Monitoring keeps working with client certificates required: the
	// exporter, with the sidecar's arguments, scrapes the pod's loopback
	// listener.
	exp := container(pod, "exporter")
	if exp == nil || !slices.Contains(exp.Args, "--memcached.address=127.0.0.1:11210") {
		t.Fatalf("exporter %+v: want it on the loopback listener", exp)
	}
	e, err := memcached.TryStartExporter(exp.Args, loopback, run.FreePort(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Stop() }()
	var metrics string
	for range 50 {
		if metrics, err = e.Metrics(); err == nil && strings.Contains(metrics, "\nmemcached_up 1\n") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(metrics, "\nmemcached_up 1\n") {
		t.Errorf("the exporter does not report memcached_up 1 with TLS on (%v):\n%s", err, grep(metrics, "memcached_up"))
	}

	// Rotation: the kubelet swaps the volume; the reloader, given the
	// pod's arguments pointed at the local files and listener, loads it.
	bins, err := repo.Bin("manager")
	if err != nil {
		t.Fatal(err)
	}
	reloaderArgs, _ := localSecureArgs(t, reloader.Args, map[string]string{"/etc/memcached/tls": tlsDir})
	for i, a := range reloaderArgs {
		if strings.HasPrefix(a, "--memcached-address=") {
			reloaderArgs[i] = "--memcached-address=" + loopback
		}
	}
	proc.Start(t, proc.Spec{Name: "reloader", Path: bins["manager"], Args: append(reloaderArgs, "--interval=200ms")})
	newCert, newKey := ca.issue(t, 101, x509.ExtKeyUsageServerAuth)
	rotated := time.Now()
	writeSecretVolume(t, tlsDir, map[string][]byte{"tls.crt": newCert, "tls.key": newKey, "ca.crt": ca.pem})
	var serial, got string
	for time.Since(rotated) < 20*time.Second {
		if got, serial, err = roundTrip(clientCert, clientKey, "get kept\r\n"); err == nil && serial == "65" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if serial != "65" || got != "VALUE kept 0 5" {
		t.Fatalf("after rotation: serial %s, get kept = %q, %v; want serial 65 and the key kept", serial, got, err)
	}
	t.Logf("rotation: the new serial was served %v after the files changed, the key kept", time.Since(rotated).Round(10*time.Millisecond))
	if exited, _ := srv.Exited(); exited {
		t.Error("memcached restarted")
	}
}

// waitAnswer waits for memcached to answer version on a plaintext address.
func waitAnswer(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			got, _ := command(conn, "version\r\n")
			_ = conn.Close()
			if strings.HasPrefix(got, "VERSION") {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("memcached does not answer on %s", addr)
}

// TestAuthAgainstRealMemcached runs memcached with the arguments the
// operator writes for spec.security.auth and the password file its pod
// would mount: a client with the password is served, one without or with
// a wrong one is refused. Rotating the file (the new password added, then
// the old one removed, as docs/security.md says) is loaded by the real
// reloader with SIGHUP, with the keys kept and no restart.
func TestAuthAgainstRealMemcached(t *testing.T) {
	h := startHarness(t, "auth")
	ctx := context.Background()
	if err := h.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.namespace, Name: "cache-auth"},
		Data: map[string][]byte{"auth-file": []byte("app:old-password\n")}}); err != nil {
		t.Fatal(err)
	}
	mc := &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.namespace, Name: "private"},
		Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1), Security: &cachev1alpha1.SecuritySpec{
			Auth: &cachev1alpha1.AuthSpec{SecretName: "cache-auth"},
		}},
	}
	if err := h.c.Create(ctx, mc); err != nil {
		t.Fatal(err)
	}
	d, err := h.waitDeployment(ctx, mc, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	pod := d.Spec.Template.Spec
	main, reloader := container(pod, "memcached"), container(pod, "reloader")
	if main == nil || reloader == nil || !ptr.Deref(pod.ShareProcessNamespace, false) {
		t.Fatalf("want memcached and reloader containers sharing the process namespace, got %+v", pod)
	}
	authDir, err := os.MkdirTemp("", "auth-volume-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(authDir) })
	if err := os.Chmod(authDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeSecretVolume(t, authDir, map[string][]byte{"auth-file": []byte("app:old-password\n")})
	args, ports := localSecureArgs(t, main.Args, map[string]string{"/etc/memcached/auth": authDir})
	bin, err := memcached.Binary()
	if err != nil {
		t.Fatal(err)
	}
	srv := proc.Start(t, proc.Spec{Name: "memcached", Path: bin, Args: append(args, "-l", "127.0.0.1", "-u", "nobody"), StopTimeout: 5 * time.Second})
	addr := "127.0.0.1:" + strconv.Itoa(ports[cachev1alpha1.MemcachedPort])

	// session authenticates (unless password is empty) and sends cmd.
	session := func(password, cmd string) (string, error) {
		conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			return "", err
		}
		defer func() { _ = conn.Close() }()
		if password != "" {
			token := "app " + password
			if got, err := command(conn, fmt.Sprintf("set auth 0 0 %d\r\n%s\r\n", len(token), token)); err != nil || got != "STORED" {
				return got, err
			}
		}
		return command(conn, cmd)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := session("old-password", "set kept 0 0 5\r\nvalue\r\n")
		if got == "STORED" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("with the password: %q, %v", got, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got, _ := session("", "get kept\r\n"); strings.HasPrefix(got, "VALUE") {
		t.Error("served without authenticating")
	}
	if got, _ := session("wrong", "get kept\r\n"); strings.HasPrefix(got, "VALUE") {
		t.Error("served with a wrong password")
	}

	bins, err := repo.Bin("manager")
	if err != nil {
		t.Fatal(err)
	}
	reloaderArgs, _ := localSecureArgs(t, reloader.Args, map[string]string{"/etc/memcached/auth": authDir})
	for i, a := range reloaderArgs {
		if strings.HasPrefix(a, "--memcached-address=") {
			reloaderArgs[i] = "--memcached-address=" + addr
		}
	}
	proc.Start(t, proc.Spec{Name: "reloader", Path: bins["manager"], Args: append(reloaderArgs, "--interval=200ms")})
	rotated := time.Now()
	writeSecretVolume(t, authDir, map[string][]byte{"auth-file": []byte("app:new-password\n")})
	var got string
	for time.Since(rotated) < 20*time.Second {
		if got, _ = session("new-password", "get kept\r\n"); got == "VALUE kept 0 5" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got != "VALUE kept 0 5" {
		t.Fatalf("after rotation, the new password: get kept = %q; want the key kept", got)
	}
	t.Logf("rotation: the new password was accepted %v after the file changed, the key kept", time.Since(rotated).Round(10*time.Millisecond))
	if got, _ := session("old-password", "get kept\r\n"); strings.HasPrefix(got, "VALUE") {
		t.Error("the removed password is still accepted")
	}
	if exited, _ := srv.Exited(); exited {
		t.Error("memcached restarted")
	}
}
