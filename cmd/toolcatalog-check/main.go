// Command toolcatalog-check checks ToolDefinition, ToolCatalog and
// ToolSource manifests offline, as the cluster would, for pull requests:
// see docs/ci.md. kubectl toolcatalog check runs it when it is installed
// beside the plugin.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/toolcatalog/tool-catalog-operator/internal/check"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	cmd := check.NewCommand("toolcatalog-check", os.Stdin, os.Stdout, os.Stderr)
	err := cmd.ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "toolcatalog-check:", err)
	}
	os.Exit(check.ExitCode(err))
}
