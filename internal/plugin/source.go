package plugin

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/mcpsource"
)

func (o *Options) describeSourceCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "describe-source SOURCE",
		Short:   "Show a ToolSource's server: what it said of itself, where the source reaches it, its tools and its last sync",
		Example: `  kubectl toolcatalog describe-source crm`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kube, ns, err := o.kubeClient()
			if err != nil {
				return err
			}
			ts := &v1alpha1.ToolSource{}
			if getErr := kube.Get(cmd.Context(), types.NamespacedName{Namespace: ns, Name: args[0]}, ts); getErr != nil {
				return fmt.Errorf("reading ToolSource %s/%s: %w", ns, args[0], getErr)
			}
			describeSource(cmd.OutOrStdout(), ts)
			return nil
		},
	}
}

// describeSource prints what a ToolSource's status says of its server.
// The server's own words are printed as they are: hidden characters show
// as \u escapes.
func describeSource(out io.Writer, ts *v1alpha1.ToolSource) {
	fmt.Fprintf(out, "ToolSource:       %s/%s\n", ts.Namespace, ts.Name)
	switch ref := ts.Spec.MCP.ServerRef; {
	case ref != nil:
		fmt.Fprintf(out, "Reference:        %s %s (%s)\n", ref.Kind, ref.Name, ref.APIVersion)
		if ep := ts.Status.Endpoint; ep != nil {
			fmt.Fprintf(out, "Endpoint:         %s (ready: %t)\n", ep.URL, ep.Ready)
		}
	default:
		fmt.Fprintf(out, "URL:              %s\n", ts.Spec.MCP.URL)
	}
	if s := ts.Status.Server; s != nil {
		fmt.Fprintf(out, "Server:           %s %s (protocol %s)\n", mcpsource.Visible(s.Name), mcpsource.Visible(s.Version), mcpsource.Visible(s.ProtocolVersion))
		if s.Instructions != "" {
			fmt.Fprintf(out, "Instructions:     %s\n", mcpsource.Visible(s.Instructions))
		}
	} else {
		fmt.Fprintf(out, "Server:           not reached yet\n")
	}
	fmt.Fprintf(out, "Tools:            %d\n", ts.Status.ToolCount)
	if t := ts.Status.LastSyncTime; t != nil {
		fmt.Fprintf(out, "Last sync:        %s\n", t.UTC().Format(time.RFC3339))
	}
	if c := meta.FindStatusCondition(ts.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		fmt.Fprintf(out, "Ready:            %s (%s): %s\n", c.Status, c.Reason, mcpsource.Visible(c.Message))
	}
	if n := len(ts.Status.PendingChanges); n > 0 {
		fmt.Fprintf(out, "Pending changes:  %d (kubectl toolcatalog approve %s)\n", n, ts.Name)
	}
	for _, s := range ts.Status.SkippedTools {
		fmt.Fprintf(out, "Skipped:          %s: %s\n", mcpsource.Visible(s.Tool), mcpsource.Visible(s.Reason))
	}
}
