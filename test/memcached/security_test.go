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
	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/guide"
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
	if err := layOutSecretVolume(dir, data); err != nil {
		t.Fatal(err)
	}
}

func layOutSecretVolume(dir string, data map[string][]byte) error {
	version := filepath.Join(dir, fmt.Sprintf("..%d", time.Now().UnixNano()))
	if err := os.MkdirAll(version, 0o755); err != nil {
		return err
	}
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(version, k), v, 0o644); err != nil {
			return err
		}
		_ = os.Symlink(filepath.Join("..data", k), filepath.Join(dir, k))
	}
	tmp := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(filepath.Base(version), tmp); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "..data"))
}

// Secrets the generated specs' spec.security names; withSecuritySecrets
// creates them in the property test's namespace. They are the names prod's
// overlay gives its Secrets, so its instance runs as rendered.
const (
	tlsSecret  = "app-cache-tls"
	authSecret = "app-cache-auth"
)

// securityFixture is what the harness's Secrets hold and what a client
// needs to reach a memcached that mounts them.
type securityFixture struct {
	data           map[string]map[string][]byte
	tlsClient      *tls.Config
	user, password string
	// clientFiles is a client's certificate Secret: tls.crt, tls.key, ca.crt.
	clientFiles map[string][]byte
}

// withSecuritySecrets creates the Secrets spec.security may name: a
// server certificate with its CA, and a password file.
func (h *harness) withSecuritySecrets(t *testing.T) {
	t.Helper()
	ca := newCA(t, "cache-ca")
	serverCert, serverKey := ca.issue(t, 100, x509.ExtKeyUsageServerAuth)
	clientCert, clientKey := ca.issue(t, 7, x509.ExtKeyUsageClientAuth)
	pair, err := tls.X509KeyPair(clientCert, clientKey)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	f := &securityFixture{
		data: map[string]map[string][]byte{
			tlsSecret:  {"tls.crt": serverCert, "tls.key": serverKey, "ca.crt": ca.pem},
			authSecret: {"auth-file": []byte("app:app-password\nreader:reader-password\n")},
		},
		tlsClient: &tls.Config{RootCAs: roots, ServerName: "localhost", Certificates: []tls.Certificate{pair}},
		user:      "app", password: "app-password",
		clientFiles: map[string][]byte{"tls.crt": clientCert, "tls.key": clientKey, "ca.crt": ca.pem},
	}
	for name, data := range f.data {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.namespace, Name: name}, Data: data}
		if name == tlsSecret {
			secret.Type = corev1.SecretTypeTLS
		}
		if err := h.c.Create(context.Background(), secret); err != nil {
			t.Fatal(err)
		}
	}
	h.security = f
}

// secretVolumes lays out the pod's Secret volumes as the kubelet would,
// from the harness's Secrets, and returns how to run and reach memcached
// with them mounted.
func (h *harness) secretVolumes(pod corev1.PodSpec, main *corev1.Container) (*memcached.Access, func(), error) {
	access := &memcached.Access{Mounts: map[string]string{}}
	var dirs []string
	cleanup := func() {
		for _, d := range dirs {
			_ = os.RemoveAll(d)
		}
	}
	for _, v := range pod.Volumes {
		if v.Secret == nil {
			continue
		}
		if h.security == nil || h.security.data[v.Secret.SecretName] == nil {
			return nil, cleanup, fmt.Errorf("volume %s: Secret %s is not one the harness made", v.Name, v.Secret.SecretName)
		}
		data := h.security.data[v.Secret.SecretName]
		if len(v.Secret.Items) > 0 {
			projected := map[string][]byte{}
			for _, item := range v.Secret.Items {
				projected[item.Path] = data[item.Key]
			}
			data = projected
		}
		var mountPath string
		for _, m := range main.VolumeMounts {
			if m.Name == v.Name {
				mountPath = m.MountPath
			}
		}
		if mountPath == "" {
			return nil, cleanup, fmt.Errorf("volume %s is not mounted in the memcached container", v.Name)
		}
		dir, err := os.MkdirTemp("", "secret-volume-")
		if err != nil {
			return nil, cleanup, err
		}
		dirs = append(dirs, dir)
		if err := os.Chmod(dir, 0o755); err != nil {
			return nil, cleanup, err
		}
		if err := layOutSecretVolume(dir, data); err != nil {
			return nil, cleanup, err
		}
		access.Mounts[mountPath] = dir
	}
	if h.security != nil {
		access.TLS = h.security.tlsClient
		access.User, access.Password = h.security.user, h.security.password
	}
	return access, cleanup, nil
}

// startReloader runs the sidecar's command, the operator image's
// /reloader (bin/reloader here), with its arguments against a running
// memcached and waits for its first pass to load every file it watches:
// the sidecar's flags must match the pod's listeners and mounts. listeners
// maps the ports it listens on in the pod (for the exporter) to local
// addresses; the caller stops it.
func startReloader(container *corev1.Container, mounts map[string]string, address string) (p *proc.Process, listeners map[int]string, err error) {
	if !slices.Equal(container.Command, []string{"/reloader"}) {
		return nil, nil, fmt.Errorf("the reloader container runs %q, want the image's /reloader", container.Command)
	}
	bins, err := repo.Bin("reloader")
	if err != nil {
		return nil, nil, err
	}
	args, listeners := localReloaderArgs(container.Args, mounts, address)
	args = append(args, "--interval=200ms")
	p, err = proc.TryStart(proc.Spec{Name: "reloader", Path: bins["reloader"], Args: args})
	if err != nil {
		return nil, nil, err
	}
	var want []string
	for _, a := range args {
		switch {
		case strings.HasPrefix(a, "--tls-dir="):
			want = append(want, "memcached loaded the certificate")
		case strings.HasPrefix(a, "--auth-file="):
			want = append(want, "memcached loaded the password file")
		case strings.HasPrefix(a, "--exporter-listen-address="):
			want = append(want, "relaying the exporter's connections")
		case strings.HasPrefix(a, "--memory-file="):
			// Its SIGTERM handler is in place once it says so.
			want = append(want, `"msg":"watching"`)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		missing := slices.DeleteFunc(slices.Clone(want), func(w string) bool { return strings.Contains(p.Output(), w) })
		if len(missing) == 0 {
			return p, listeners, nil
		}
		if exited, _ := p.Exited(); exited || time.Now().After(deadline) {
			_ = p.Stop()
			return nil, nil, fmt.Errorf("reloader %q: no %q in its log:\n%s", args, missing, p.Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// localReloaderArgs turns the reloader sidecar's arguments into local
// ones: mount paths point at the local copies of the volumes, the
// memcached address at the local listener, and the exporter's
// authenticating listener, if any, at a free port: listeners maps its port
// in the pod to the local address.
func localReloaderArgs(args []string, mounts map[string]string, address string) (out []string, listeners map[int]string) {
	listeners = map[int]string{}
	out = slices.Clone(args)
	for i, a := range out {
		for from, to := range mounts {
			a = strings.ReplaceAll(a, from, to)
		}
		switch {
		case strings.HasPrefix(a, "--memcached-address="):
			a = "--memcached-address=" + address
		case strings.HasPrefix(a, "--drain="):
			// The drain waits for clients that this test does not have.
			a = "--drain=0s"
		case strings.HasPrefix(a, "--exporter-listen-address="):
			_, port, _ := net.SplitHostPort(strings.TrimPrefix(a, "--exporter-listen-address="))
			n, _ := strconv.Atoi(port)
			listeners[n] = "127.0.0.1:" + strconv.Itoa(freePort())
			a = "--exporter-listen-address=" + listeners[n]
		}
		out[i] = a
	}
	return out, listeners
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
// real reloader (bin/reloader), which must make memcached serve the
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
	d := h.create(t, mc)
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
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	clientCert, clientKey := ca.issue(t, 7, x509.ExtKeyUsageClientAuth)
	clientPair, err := tls.X509KeyPair(clientCert, clientKey)
	if err != nil {
		t.Fatal(err)
	}
	mounts := map[string]string{"/etc/memcached/tls": tlsDir}
	srv, err := memcached.TryStart(main.Args, memcached.UnprivilegedIdentity(pod.SecurityContext.RunAsUser, pod.SecurityContext.RunAsGroup), run.FreePort(t), &memcached.Access{
		Mounts: mounts,
		TLS:    &tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{clientPair}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	tlsAddr := srv.Addr
	plainAddr := "127.0.0.1:" + strconv.Itoa(srv.Ports[11212])
	loopback := srv.PlainAddr
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
	if err := waitUp(e); err != nil {
		t.Errorf("with TLS on: %v", err)
	}

	// Rotation: the kubelet swaps the volume; the reloader, given the
	// pod's arguments pointed at the local files and listener, loads it.
	reloaderProc, _, err := startReloader(reloader, mounts, loopback)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reloaderProc.Stop() })
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

// TestAuthAgainstRealMemcached runs memcached with the arguments the
// operator writes for spec.security.auth and the password file its pod
// would mount: a client with the password is served, one without or with
// a wrong one is refused, and the real exporter, scraping through the
// reloader, reports memcached_up 1 before and after the rotation. Rotating the file (the new password added, then
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
		}, Monitoring: &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: true}}},
	}
	d := h.create(t, mc)
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
	mounts := map[string]string{"/etc/memcached/auth": authDir}
	srv, err := memcached.TryStart(main.Args, memcached.UnprivilegedIdentity(pod.SecurityContext.RunAsUser, pod.SecurityContext.RunAsGroup), run.FreePort(t),
		&memcached.Access{Mounts: mounts, User: "app", Password: "old-password"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	addr := srv.Addr

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

	// The exporter cannot authenticate: it scrapes through the reloader,
	// which does.
	reloaderProc, listeners, err := startReloader(reloader, mounts, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reloaderProc.Stop() })
	exp := container(pod, "exporter")
	target, err := exporterTarget(exp.Args, listeners)
	if err != nil {
		t.Fatal(err)
	}
	e, err := memcached.TryStartExporter(exp.Args, target, run.FreePort(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Stop() })
	if err := waitUp(e); err != nil {
		t.Errorf("with auth: %v", err)
	}

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
	if err := waitUp(e); err != nil {
		t.Errorf("after the password rotation: %v", err)
	}
	if exited, _ := srv.Exited(); exited {
		t.Error("memcached restarted")
	}
}

// The password files the operator accepts are the ones memcached reads as
// written, and the ones it refuses are the ones memcached would misread or
// refuse. Every case also runs memcached on the file with the pod's own
// arguments: an accepted file must authenticate each of its users with
// exactly their password; a refused one must fail in memcached too, so no
// refusal is a guess. memcached 1.6.18 drops the last character of a
// one-line file without a newline (what kubectl create secret
// --from-literal writes), exits on an empty line or a carriage return, and
// refuses a "user password" token over 255 bytes.
func TestPasswordFilesAgainstRealMemcached(t *testing.T) {
	h := startHarness(t, "passwords")
	ctx := context.Background()
	var podArgs []string // the first accepted case's memcached arguments
	var id memcached.Identity
	for i, c := range []struct {
		name, file string
		refused    string // what the operator's message says; empty: accepted
	}{
		{"one user", "app:secret\n", ""},
		{"two users, a colon in a password", "app:one\nops:t:wo\n", ""},
		{"the longest line memcached takes", "app:" + strings.Repeat("p", 251) + "\n", ""},
		{"one line without a final newline, as --from-literal writes it", "app:secret", "one line without a final newline"},
		{"two users, the last without a newline", "app:one\nops:two", ""},
		{"a Windows line end", "app:secret\r\n", "carriage return"},
		{"an empty last line", "app:secret\n\n", "line 2 is empty"},
		{"a line one byte too long", "app:" + strings.Repeat("p", 252) + "\n", "256 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("passwords-%d", i)
			if err := h.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.namespace, Name: name},
				Data: map[string][]byte{"auth-file": []byte(c.file)}}); err != nil {
				t.Fatal(err)
			}
			mc := &cachev1alpha1.Memcached{
				ObjectMeta: metav1.ObjectMeta{Namespace: h.namespace, Name: name},
				Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1), Security: &cachev1alpha1.SecuritySpec{
					Auth: &cachev1alpha1.AuthSpec{SecretName: name},
				}},
			}
			if err := h.c.Create(ctx, mc); err != nil {
				t.Fatal(err)
			}
			d, err := h.waitDeployment(ctx, mc, time.Minute)
			if c.refused == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				pod := d.Spec.Template.Spec
				if podArgs == nil {
					podArgs = container(pod, "memcached").Args
					id = memcached.UnprivilegedIdentity(pod.SecurityContext.RunAsUser, pod.SecurityContext.RunAsGroup)
				}
			} else if err == nil || !strings.Contains(err.Error(), "SecretInvalid") || !strings.Contains(err.Error(), c.refused) {
				t.Fatalf("got %v; want Stalled, SecretInvalid, saying %q", err, c.refused)
			}
			if podArgs == nil {
				t.Fatal("no accepted case ran first to give memcached's arguments")
			}
			misread := readByMemcached(t, podArgs, id, c.file)
			switch {
			case c.refused == "" && misread != "":
				t.Errorf("accepted, but memcached %s", misread)
			case c.refused != "" && misread == "":
				t.Errorf("refused, but memcached reads every user:password as written")
			case c.refused != "":
				t.Logf("refused; memcached %s", misread)
			}
		})
	}

	// The commands docs/security.md gives for the Secret, run as written
	// in a shell with bin/ on PATH: the operator accepts what they make,
	// and memcached reads it as written.
	t.Run("as docs/security.md makes it", func(t *testing.T) {
		if err := cluster.RestrictedNamespace(ctx, h.c, "cache"); err != nil {
			t.Fatal(err)
		}
		guide.Run(t, h.env.Kubeconfig, "docs/security.md", "create secret generic sessions-auth")
		secret := &corev1.Secret{}
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: "cache", Name: "sessions-auth"}, secret); err != nil {
			t.Fatal(err)
		}
		mc := &cachev1alpha1.Memcached{
			ObjectMeta: metav1.ObjectMeta{Namespace: "cache", Name: "sessions"},
			Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1), Security: &cachev1alpha1.SecuritySpec{
				Auth: &cachev1alpha1.AuthSpec{SecretName: "sessions-auth"},
			}},
		}
		if err := h.c.Create(ctx, mc); err != nil {
			t.Fatal(err)
		}
		if _, err := h.waitDeployment(ctx, mc, time.Minute); err != nil {
			t.Fatalf("refused: %v", err)
		}
		if misread := readByMemcached(t, podArgs, id, string(secret.Data["auth-file"])); misread != "" {
			t.Errorf("accepted, but memcached %s", misread)
		}
	})
}

// readByMemcached runs memcached with args on a password file and says how
// it misreads it: "" when every user:password line authenticates with
// exactly its password.
func readByMemcached(t *testing.T, args []string, id memcached.Identity, file string) string {
	t.Helper()
	var users []memcached.Credentials
	for line := range strings.SplitSeq(strings.TrimSuffix(file, "\n"), "\n") {
		user, password, _ := strings.Cut(line, ":")
		users = append(users, memcached.Credentials{User: user, Password: password})
	}
	// Not t.TempDir: its parent is private to root, and memcached runs as
	// the pod's unprivileged uid.
	dir, err := os.MkdirTemp("", "auth-volume-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeSecretVolume(t, dir, map[string][]byte{"auth-file": []byte(file)})
	srv, err := memcached.TryStart(args, id, run.FreePort(t),
		&memcached.Access{Mounts: map[string]string{"/etc/memcached/auth": dir}, User: users[0].User, Password: users[0].Password})
	if err != nil {
		return fmt.Sprintf("with it as -Y: %v", err)
	}
	defer func() { _ = srv.Stop() }()
	for _, u := range users {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := memcached.DialClient(ctx, srv.Addr, nil, &u)
		cancel()
		if err != nil {
			return fmt.Sprintf("refuses %s's password as written (%d bytes): %v", u.User, len(u.Password), err)
		}
		_ = conn.Close()
	}
	return ""
}
