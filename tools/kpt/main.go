// Command kpt is kpt's own `kpt fn render`, built from the kpt module the Go
// module proxy serves. The kpt CLI's main package cannot be built from the
// proxy (it imports github.com/kptdev/kpt/rollouts, which is not served), so
// this wires kpt's public render command (commands/fn/render) into a root
// command as kpt's main does: the rendering itself (reading the package,
// running exec functions, writing files back) is kpt's code, unchanged.
//
//	bin/kpt fn render overlays/prod --allow-exec
package main

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"

	fnrender "github.com/kptdev/kpt/commands/fn/render"
	"github.com/kptdev/kpt/pkg/printer"
	"github.com/spf13/cobra"
)

func main() {
	ctx := printer.WithContext(context.Background(), printer.New(os.Stdout, os.Stderr))
	root := &cobra.Command{Use: "kpt", SilenceUsage: true, SilenceErrors: true}
	fn := &cobra.Command{Use: "fn", Short: "Run functions on packages"}
	fn.AddCommand(fnrender.NewCommand(ctx, "kpt fn"))
	root.AddCommand(fn, &cobra.Command{
		Use:   "version",
		Short: "Print the kpt module version this binary is built from",
		Run: func(*cobra.Command, []string) {
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, d := range bi.Deps {
					if d.Path == "github.com/kptdev/kpt" {
						fmt.Println(d.Version)
						return
					}
				}
			}
			fmt.Println("unknown")
		},
	})
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}
