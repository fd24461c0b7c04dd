package memcached_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
	"github.com/example/memcached-operator/test/internal/memcached"
	"github.com/example/memcached-operator/test/internal/repo"
)

// The client examples docs/security.md gives work against memcached
// started with the operator's arguments for prod's shape (TLS with client
// certificates required, auth): the Python one (docs/examples, with
// Debian's python3-pymemcache), the Go one (docs/examples/go, with
// gomemcache) and memcached-cli's -tls-dir and -auth-file. Each reads the
// keys the others store, each verifies the server's name, and a wrong
// password is an error, not a miss.
func TestClientExamples(t *testing.T) {
	python := "/usr/bin/python3"
	if out, err := exec.Command(python, "-c", "import pymemcache").CombinedOutput(); err != nil {
		t.Fatalf("%s cannot import pymemcache (%v: %s): install the Debian package python3-pymemcache (make test does it as root: scripts/test-deps.sh)", python, err, out)
	}
	h := startHarness(t, "clients")
	h.withSecuritySecrets(t)
	mc := &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.namespace, Name: "prod-shape"},
		Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1), Security: &cachev1alpha1.SecuritySpec{
			TLS:  &cachev1alpha1.TLSSpec{SecretName: tlsSecret, ClientCertificates: cachev1alpha1.ClientCertificatesRequire},
			Auth: &cachev1alpha1.AuthSpec{SecretName: authSecret},
		}},
	}
	d := h.create(t, mc)
	pod := d.Spec.Template.Spec
	access, cleanup, err := h.secretVolumes(pod, container(pod, "memcached"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	srv, err := memcached.TryStart(container(pod, "memcached").Args, memcached.UnprivilegedIdentity(pod.SecurityContext.RunAsUser, pod.SecurityContext.RunAsGroup), freePort(), access)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })

	// What a client pod mounts: its certificate Secret and a password.
	dir := t.TempDir()
	tlsDir := filepath.Join(dir, "cache-client")
	if err := os.Mkdir(tlsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, data := range h.security.clientFiles {
		if err := os.WriteFile(filepath.Join(tlsDir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	authFile, wrongAuthFile := filepath.Join(dir, "auth-file"), filepath.Join(dir, "wrong-auth-file")
	_ = os.WriteFile(authFile, []byte(h.security.user+":"+h.security.password+"\n"), 0o600)
	_ = os.WriteFile(wrongAuthFile, []byte(h.security.user+":wrong\n"), 0o600)

	// The server's certificate names 127.0.0.1, the address both dial.
	server := "127.0.0.1:" + strconv.Itoa(srv.Ports[cachev1alpha1.MemcachedPort])
	pythonClient := func(auth string, args ...string) (string, error) {
		script := filepath.Join(repo.MustRoot(t), "docs", "examples", "cache_client.py")
		out, err := exec.Command(python, append([]string{script, "--server", server, "--tls-dir", tlsDir, "--auth-file", auth}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	cli := filepath.Join(dir, "memcached-cli")
	build := exec.Command("go", "build", "-o", cli, "./hack/cmd/memcached-cli")
	build.Dir = repo.MustRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./hack/cmd/memcached-cli: %v\n%s", err, out)
	}
	goClient := func(auth string, args ...string) (string, error) {
		out, err := exec.Command(cli, append([]string{"-server", server, "-tls-dir", tlsDir, "-auth-file", auth}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	// The Go example is a module of its own, as a user copies it.
	example := filepath.Join(dir, "cacheclient")
	build = exec.Command("go", "build", "-o", example, ".")
	build.Dir = filepath.Join(repo.MustRoot(t), "docs", "examples", "go")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build docs/examples/go: %v\n%s", err, out)
	}
	gomemcacheClient := func(auth string, args ...string) (string, error) {
		out, err := exec.Command(example, append([]string{"--server", server, "--tls-dir", tlsDir, "--auth-file", auth}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}

	if out, err := pythonClient(authFile, "set", "from-python", "hello"); err != nil || out != "STORED" {
		t.Fatalf("docs/examples/cache_client.py set: %q, %v", out, err)
	}
	if out, err := goClient(authFile, "get", "from-python"); err != nil || out != "hello" {
		t.Errorf("memcached-cli get of Python's key: %q, %v", out, err)
	}
	if out, err := goClient(authFile, "set", "from-go", "world"); err != nil || out != "STORED" {
		t.Fatalf("memcached-cli set: %q, %v", out, err)
	}
	if out, err := pythonClient(authFile, "get", "from-go"); err != nil || out != "world" {
		t.Errorf("docs/examples/cache_client.py get of Go's key: %q, %v", out, err)
	}
	if out, err := gomemcacheClient(authFile, "get", "from-python"); err != nil || out != "hello" {
		t.Errorf("docs/examples/go get of Python's key: %q, %v", out, err)
	}
	if out, err := gomemcacheClient(authFile, "set", "from-gomemcache", "again"); err != nil || out != "STORED" {
		t.Errorf("docs/examples/go set: %q, %v", out, err)
	}
	if out, err := pythonClient(authFile, "get", "from-gomemcache"); err != nil || out != "again" {
		t.Errorf("docs/examples/cache_client.py get of docs/examples/go's key: %q, %v", out, err)
	}

	for _, c := range []struct {
		name string
		run  func(auth string, args ...string) (string, error)
		// serverName says whether it takes --server-name: the one name
		// every server is verified as (an Ephemeral cache's Service, for
		// the pod addresses it lists).
		serverName bool
	}{
		{"docs/examples/cache_client.py", pythonClient, true},
		{"docs/examples/go", gomemcacheClient, true},
		{"memcached-cli", goClient, false},
	} {
		if c.serverName {
			if out, err := c.run(authFile, "--server-name", "localhost", "get", "from-go"); err != nil || out != "world" {
				t.Errorf("%s --server-name localhost, a name the certificate holds: %q, %v", c.name, out, err)
			}
			if out, err := c.run(authFile, "--server-name", "other.cache.svc", "get", "from-go"); err == nil || !strings.Contains(out, "other.cache.svc") {
				t.Errorf("%s --server-name other.cache.svc, a name the certificate lacks: %q, %v; want the host name refused", c.name, out, err)
			}
		}
		if out, err := c.run(wrongAuthFile, "get", "from-go"); err == nil || !strings.Contains(out, "refused") {
			t.Errorf("%s with a wrong password: %q, %v; want an error saying memcached refused it", c.name, out, err)
		}
	}
}
