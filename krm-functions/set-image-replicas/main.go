// Command set-image-replicas is a KRM function that pins container images and
// replica counts. It runs as a kustomize exec transformer, as a kpt
// function (exec or container), or standalone:
//
//	set-image-replicas CONFIG [RESOURCES...]    # resources from stdin when none are given
//	set-image-replicas < resource-list.yaml      # the KRM function protocol (kpt, kustomize)
//
// The exit code is 1 when any error result was produced; the output then
// holds no resources.
package main

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"sigs.k8s.io/kustomize/kyaml/fn/framework/command"

	"github.com/example/memcached-operator/krm-functions/set-image-replicas/internal/pin"
)

func main() {
	if err := newCommand(os.Stderr).Execute(); err != nil {
		// The error (the function's error results) is already printed.
		os.Exit(1)
	}
}

func newCommand(stderr io.Writer) *cobra.Command {
	processor := &pin.Processor{}
	cmd := command.Build(processor, command.StandaloneEnabled, false)
	cmd.Use = "set-image-replicas [CONFIG [RESOURCES...]]"
	cmd.Short = "Pin container images and replica counts in Kubernetes manifests"
	cmd.SetErr(stderr)
	quiet := cmd.Flags().BoolP("quiet", "q", false, "standalone mode: do not print info and warning results to stderr")

	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return run(c, args) // a ResourceList on stdin
		}
		// Standalone: stdout carries only resources, so results go to stderr.
		if !*quiet {
			processor.Log = c.ErrOrStderr()
		}
		input, err := concatInputs(c.InOrStdin(), args[1:])
		if err != nil {
			return err
		}
		c.SetIn(input)
		return run(c, []string{args[0], "-"})
	}
	return cmd
}

// concatInputs joins the resource files into one stream, reading stdin when
// there are none (or for "-"). kyaml's command reads files back to back, so
// a file not starting with "---" would merge into the previous file's last
// document; each is separated explicitly here.
func concatInputs(stdin io.Reader, paths []string) (io.Reader, error) {
	if len(paths) == 0 {
		paths = []string{"-"}
	}
	var buf bytes.Buffer
	for _, p := range paths {
		var data []byte
		var err error
		if p == "-" {
			data, err = io.ReadAll(stdin)
		} else {
			data, err = os.ReadFile(p)
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		buf.WriteString("\n---\n")
		buf.Write(data)
	}
	return &buf, nil
}
