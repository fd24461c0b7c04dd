// Package run executes commands and reads files for tests, failing the test
// on errors that are not the point of the test.
package run

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Command runs name with args and stdin (nil for none) and returns stdout,
// stderr and the exit code. Only a failure to start fails the test.
func Command(t testing.TB, stdin []byte, name string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return stdout.String(), stderr.String(), exit.ExitCode()
	case err != nil:
		t.Fatalf("run %s: %v", name, err)
	}
	return stdout.String(), stderr.String(), 0
}

// ReadFile returns the file's content or fails the test.
func ReadFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// UserEnv is the environment of a user's shell: this process's, without an
// outer make's variables (its own and those the Makefile exports: the
// signing keys would otherwise point a checkout's make at the outer
// repository's .work/) or a KUBECONFIG, so that nested make and kubectl
// runs behave as if typed by hand.
func UserEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKEOVERRIDES", "KUBECONFIG", "COSIGN_KEY", "COSIGN_PUBLIC_KEY":
		default:
			env = append(env, kv)
		}
	}
	return env
}

// FreePort returns a TCP port on 127.0.0.1 that nothing listens on now.
func FreePort(t testing.TB) int {
	t.Helper()
	port := FreePortOrZero()
	if port == 0 {
		t.Fatal("no free TCP port on 127.0.0.1")
	}
	return port
}

// FreePortOrZero is FreePort for code without a test at hand: 0 when the
// kernel gives no port.
func FreePortOrZero() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// HTTPGet returns the body of a GET of url; a status other than 200 is an
// error carrying the body.
func HTTPGet(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return string(body), nil
}
