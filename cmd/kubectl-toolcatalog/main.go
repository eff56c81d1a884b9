// Command kubectl-toolcatalog is the kubectl plugin of tool-catalog-operator:
// put it on PATH and run `kubectl toolcatalog search|describe-tool|refresh|versions|check`.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"

	"github.com/toolcatalog/tool-catalog-operator/internal/plugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cmd := plugin.NewCommand(&plugin.Options{Out: os.Stdout, Err: os.Stderr})
	if err := cmd.ExecuteContext(ctx); err != nil {
		if exit := (*plugin.ExitError)(nil); errors.As(err, &exit) {
			// The command has said why.
			stop()
			os.Exit(exit.Code)
		}
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
