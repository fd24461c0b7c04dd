package deploy

import (
	"bytes"
	"errors"
	"os/exec"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"
)

// run executes a command and returns stdout, stderr and the exit code.
func run(t *testing.T, stdin []byte, name string, args ...string) (string, string, int) {
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

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// yamlToObject decodes YAML into a typed API object, strictly.
func yamlToObject(s string, obj any) error {
	return sigsyaml.UnmarshalStrict([]byte(s), obj)
}
