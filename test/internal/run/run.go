// Package run executes commands and reads files for tests, failing the test
// on errors that are not the point of the test.
package run

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
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
