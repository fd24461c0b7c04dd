// Command cluster creates and deletes the local Kubernetes cluster that
// make cluster-up, make run and make cluster-down use (see package
// hack/cluster).
//
//	cluster up     create or reuse it, and wait for its nodes
//	cluster down   delete it and undo what its real nodes changed
//	cluster images print the real nodes' images, as NAME=reference lines
//	               (MEMCACHED_IMAGE, EXPORTER_IMAGE, CLIENT_IMAGE, ...)
//
// The environment says which cluster: CLUSTER_NAME (memcached),
// KWOK_WORKDIR (.work/kwok), CLUSTER_KUBECONFIG (.work/kubeconfig),
// NODES (kwok's fake nodes, 0 with real nodes, else 3), REAL_NODES (0),
// KWOK_ARGS (more kwokctl create cluster flags).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/example/memcached-operator/hack/cluster"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "cluster: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 1 || (args[0] != "up" && args[0] != "down" && args[0] != "images") {
		return fmt.Errorf("usage: cluster up|down|images")
	}
	repo, err := os.Getwd()
	if err != nil {
		return err
	}
	real, err := envInt("REAL_NODES", 0)
	if err != nil {
		return err
	}
	fakeDefault := 3
	if real > 0 {
		fakeDefault = 0
	}
	fake, err := envInt("NODES", fakeDefault)
	if err != nil {
		return err
	}
	c := cluster.New(cluster.Options{
		Name:       env("CLUSTER_NAME", "memcached"),
		Workdir:    env("KWOK_WORKDIR", filepath.Join(repo, ".work", "kwok")),
		Kubeconfig: env("CLUSTER_KUBECONFIG", filepath.Join(repo, ".work", "kubeconfig")),
		Repo:       repo,
		FakeNodes:  fake,
		RealNodes:  real,
		KwokArgs:   strings.Fields(os.Getenv("KWOK_ARGS")),
		Progress:   os.Stderr,
	})
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	switch args[0] {
	case "down":
		return c.Down(ctx)
	case "images":
		if c.Images.Pause == "" {
			return fmt.Errorf("cluster %q has no real nodes (make cluster-up REAL_NODES=3)", c.Name)
		}
		fmt.Printf("MEMCACHED_IMAGE=%s\nEXPORTER_IMAGE=%s\nCLIENT_IMAGE=%s\nCOREDNS_IMAGE=%s\nPAUSE_IMAGE=%s\nMANAGER_IMAGE=%s\n",
			c.Images.Memcached, c.Images.Exporter, c.Images.Client, c.Images.CoreDNS, c.Images.Pause, c.Images.Manager)
		return nil
	}
	return c.Up(ctx)
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func envInt(key string, def int) (int, error) {
	v := os.Getenv(key)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s=%q: want a number of nodes, 0 or more", key, v)
	}
	return n, nil
}
