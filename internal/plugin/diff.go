package plugin

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/toolcatalog/tool-catalog-operator/internal/mcpsource"
	"github.com/toolcatalog/tool-catalog-operator/internal/versiondiff"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

func (o *Options) diffCommand() *cobra.Command {
	var from, to int64
	cmd := &cobra.Command{
		Use:   "diff CATALOG",
		Short: "Show the tools one version of a catalog added, removed and changed since another",
		Long: `Compare two versions of a catalog kept in Redis: the tools added, removed
and changed, with the description and a diff of the parameter schema of
each changed tool. --to defaults to the newest version; --from to the
pinned version while the catalog is pinned (what consumers are served),
else to the version before --to. Any retained version can be compared
(kubectl toolcatalog versions lists them), and the pinned one however old.`,
		Example: `  kubectl toolcatalog diff assistant
  kubectl toolcatalog diff assistant --from 3 --to 5`,
		Args: cobra.ExactArgs(1),
		RunE: o.withRedis(func(ctx context.Context, cmd *cobra.Command, args []string, s *session) error {
			k := s.config.Keys
			newest, err := s.redis.Get(ctx, k.Version()).Int64()
			if err != nil {
				return fmt.Errorf("catalog %s/%s has not been published to Redis yet (%s: %w)", s.catalog.Namespace, s.catalog.Name, k.Version(), err)
			}
			if to == 0 {
				to = newest
			}
			if from == 0 {
				from = max(to-1, 1)
				served, v, servedErr := contract.Served(ctx, s.redis, k)
				if servedErr != nil {
					return servedErr
				}
				if served != k && v != to {
					from = v // the pinned version
				}
			}
			var docs [2]*contract.Document
			for i, v := range []int64{from, to} {
				if v < 1 || v > newest {
					return fmt.Errorf("version %d of %s/%s is not published (the newest is %d)", v, s.catalog.Namespace, s.catalog.Name, newest)
				}
				if docs[i], err = contract.ReadVersion(ctx, s.redis, k, v); err != nil {
					return fmt.Errorf("reading version %d: %w; kubectl toolcatalog versions %s lists those kept", v, err, s.catalog.Name)
				}
			}
			printDiff(cmd.OutOrStdout(), docs[0], docs[1], versiondiff.Compare(docs[0], docs[1]))
			return nil
		}),
	}
	cmd.Flags().Int64Var(&from, "from", 0, "the version to compare from (default: the pinned version, else the one before --to)")
	cmd.Flags().Int64Var(&to, "to", 0, "the version to compare to (default: the newest)")
	return cmd
}

// printDiff writes a comparison for a terminal: counts first, then each
// tool added, removed and changed. Tool text is the catalog's, written by
// whoever may edit a ToolDefinition: what a terminal would hide or obey
// is printed escaped (mcpsource.Visible).
func printDiff(w io.Writer, from, to *contract.Document, d versiondiff.Diff) {
	fmt.Fprintf(w, "version %d → version %d: %d added, %d removed, %d changed, %d unchanged\n", from.Version, to.Version, len(d.Added), len(d.Removed), len(d.Changed), d.Same)
	for _, name := range d.Added {
		fmt.Fprintf(w, "+ %s\n", mcpsource.Visible(name))
	}
	for _, name := range d.Removed {
		fmt.Fprintf(w, "- %s\n", mcpsource.Visible(name))
	}
	for _, c := range d.Changed {
		fmt.Fprintf(w, "~ %s\n", mcpsource.Visible(c.Name))
		if c.FromDescription != "" || c.ToDesc != "" {
			fmt.Fprintf(w, "    description: %s\n    now:         %s\n", mcpsource.Visible(c.FromDescription), mcpsource.Visible(c.ToDesc))
		}
		if c.ParametersDiff != "" {
			for line := range strings.Lines(c.ParametersDiff) {
				fmt.Fprintf(w, "    %s", mcpsource.Visible(line))
			}
		}
		if len(c.Other) > 0 {
			fmt.Fprintf(w, "    also changed: %s\n", strings.Join(c.Other, ", "))
		}
	}
}
