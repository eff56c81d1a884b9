package plugin

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/kube"
	"github.com/toolcatalog/tool-catalog-operator/internal/mcpsource"
	"github.com/toolcatalog/tool-catalog-operator/pkg/clip"
)

func (o *Options) approveCommand() *cobra.Command {
	var (
		all, policy bool
		hash        string
		waitFor     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "approve SOURCE [TOOL...]",
		Short: "List or approve the upstream tool changes a ToolSource holds (changePolicy RequireApproval)",
		Long: `Without a tool, approve lists the changes the ToolSource holds for approval.
With tools, it approves the version of each that is pending now, by its spec
hash: a later upstream change needs a new approval. An approval is a
ToolSourceApproval made as you (kubectl auth whoami): making one needs create
on toolsourceapprovals, and the operator applies it only if you may "approve"
the source (the tool-catalog-approver ClusterRole). --hash refuses when the
pending change is no longer the one you reviewed. --change-policy approves
the source's return from RequireApproval to Apply, as its spec asks now.`,
		Example: `  kubectl toolcatalog approve crm
  kubectl toolcatalog approve crm crm_find_contact --hash d9d71e5ebc23 --wait 30s
  kubectl toolcatalog approve crm --all
  kubectl toolcatalog approve crm --change-policy`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			kube, ns, err := o.kubeClient()
			if err != nil {
				return err
			}
			ts := &v1alpha1.ToolSource{}
			if getErr := kube.Get(ctx, types.NamespacedName{Namespace: ns, Name: args[0]}, ts); getErr != nil {
				return fmt.Errorf("reading ToolSource %s/%s: %w", ns, args[0], getErr)
			}
			out := cmd.OutOrStdout()
			if policy {
				ap, approveErr := mcpsource.ApprovePolicyChange(ctx, kube, ts)
				if approveErr != nil {
					return approveErr
				}
				fmt.Fprintf(out, "approved the return of ToolSource %s to changePolicy Apply (generation %d) as %s: ToolSourceApproval %s\n", ts.Name, ts.Generation, ap.Spec.Approver.Username, ap.Name)
				return nil
			}
			if len(args) == 1 && !all {
				return listPending(out, ts)
			}
			chosen, err := mcpsource.ChoosePending(ts.Status.PendingChanges, args[1:], all, hash)
			if err != nil {
				return err
			}
			ap, err := mcpsource.Approve(ctx, kube, ts, chosen)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "ToolSourceApproval %s approves, as %s:\n", ap.Name, ap.Spec.Approver.Username)
			for _, p := range chosen {
				fmt.Fprintf(out, "approved %s (%s, spec hash %s): %s\n", p.Tool, strings.ToLower(string(p.Change)), p.SpecHash[:mcpsource.ShortHash], mcpsource.Visible(p.Summary))
			}
			if waitFor <= 0 {
				return nil
			}
			if err := waitApplied(ctx, kube, ts, chosen, waitFor); err != nil {
				return err
			}
			fmt.Fprintln(out, "applied")
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "approve every pending change")
	cmd.Flags().BoolVar(&policy, "change-policy", false, "approve the source's return to changePolicy Apply, which its spec asks for now")
	cmd.Flags().StringVar(&hash, "hash", "", "the spec hash (or its first 12 or more digits) you reviewed; refuse if the pending change has another")
	cmd.Flags().DurationVar(&waitFor, "wait", 0, "wait up to this long for the source to apply the approved versions")
	return cmd
}

// listPending prints a source's pending changes as a table.
func listPending(out io.Writer, ts *v1alpha1.ToolSource) error {
	if len(ts.Status.PendingChanges) == 0 {
		policy := ts.Spec.ChangePolicy
		if policy == "" {
			policy = v1alpha1.ChangePolicyApply
		}
		fmt.Fprintf(out, "ToolSource %s holds no change for approval (changePolicy %s)\n", ts.Name, policy)
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tCHANGE\tSPEC HASH\tSINCE\tSUMMARY")
	for _, p := range ts.Status.PendingChanges {
		since := ""
		if p.Since != nil {
			since = p.Since.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Tool, p.Change, p.SpecHash[:mcpsource.ShortHash], since, mcpsource.Visible(clip.Truncate(p.Summary, 100)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Then each change whole, as a reviewer must read it.
	for _, p := range ts.Status.PendingChanges {
		fmt.Fprintf(out, "\n%s (%s, spec hash %s):\n", p.Tool, strings.ToLower(string(p.Change)), p.SpecHash)
		diff := p.Diff
		if diff == "" {
			diff = "(no diff recorded: the source has not synced since it began recording them)\n"
		}
		fmt.Fprint(out, mcpsource.Visible(diff))
	}
	return nil
}

// waitApplied waits until the source holds none of the approved changes
// and its ToolDefinitions carry them.
func waitApplied(ctx context.Context, kube *kube.Client, ts *v1alpha1.ToolSource, approved []v1alpha1.PendingChange, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		now := &v1alpha1.ToolSource{}
		if err := kube.Get(ctx, types.NamespacedName{Namespace: ts.Namespace, Name: ts.Name}, now); err != nil {
			return false, err
		}
		tds := &v1alpha1.ToolDefinitionList{}
		if err := kube.List(ctx, tds, ts.Namespace, labels.Set{v1alpha1.LabelToolSource: ts.Name}); err != nil {
			return false, err
		}
		applied := map[string]bool{}
		for _, td := range tds.Items {
			if h, err := mcpsource.SurfaceHash(td.Spec); err == nil {
				applied[td.Spec.Name+"="+h] = true
			}
		}
		for _, p := range approved {
			if !applied[p.Tool+"="+p.SpecHash] {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for ToolSource %s to apply the approved changes: %w", ts.Name, err)
	}
	return nil
}
