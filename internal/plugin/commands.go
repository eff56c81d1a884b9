package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/kube"
	"github.com/toolcatalog/tool-catalog-operator/internal/mcpsource"
	"github.com/toolcatalog/tool-catalog-operator/pkg/clip"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
)

func (o *Options) searchCommand() *cobra.Command {
	var (
		method, principal string
		intents           string
		topK              int
		explain           bool
	)
	cmd := &cobra.Command{
		Use:   "search CATALOG QUERY",
		Short: "Search a published catalog and show each tool's scores",
		Example: `  kubectl toolcatalog search assistant "will it rain tomorrow"
  kubectl toolcatalog search assistant "open a bug" --method bm25 --top-k 3 --explain`,
		Args: cobra.ExactArgs(2),
		RunE: o.withCatalog(func(ctx context.Context, cmd *cobra.Command, args []string, s *session, cat *toolcatalog.Catalog) error {
			opts := toolcatalog.Options{Method: toolcatalog.Method(method), TopK: topK, Principal: principal, Intents: intents}
			if s.embedder != nil {
				opts.Embedder = s.embedder
			}
			// The catalog's most used tools, as its consumers include them.
			popular, err := toolcatalog.MostUsed(ctx, s.redis, s.config.Keys, cat)
			if err != nil {
				return err
			}
			opts.MostUsed = popular
			resp, err := cat.Search(ctx, args[1], opts)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if explain {
				fmt.Fprintf(out, "catalog %s version %d (%d tools), embedding model %s, method %s\n",
					cat.Document.Catalog, cat.Version(), len(cat.Tools()), cat.Document.Embedding.Model, resp.Method)
				if resp.Fallback != "" {
					fmt.Fprintf(out, "semantic ranking not used: %s\n", resp.Fallback)
				}
				explainBlend(out, "", resp.Method, resp.Blend)
				if len(resp.Intents) > 0 {
					fmt.Fprintf(out, "%d intents, each searched on its own and given its share of the results:\n", len(resp.Intents))
					for i, in := range resp.Intents {
						fmt.Fprintf(out, "  intent %d: %q\n", i+1, in.Text)
						explainBlend(out, "    ", resp.Method, in.Blend)
					}
				}
			}
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			header := "RANK\tTOOL\tWHY\tSCORE\tSEMANTIC\tBM25"
			if !explain {
				header = "RANK\tTOOL\tSCORE\tDESCRIPTION"
			}
			fmt.Fprintln(tw, header)
			for i, r := range resp.Results {
				if explain {
					why := r.Why
					if r.Why == toolcatalog.WhyIntent {
						why = fmt.Sprintf("intent %d", slices.IndexFunc(resp.Intents, func(in toolcatalog.Intent) bool { return in.Text == r.Intent })+1)
					}
					fmt.Fprintf(tw, "%d\t%s\t%s\t%.4f\t%s\t%s\n", i+1, r.Tool.Name, why, r.Score, arm(r.Semantic), arm(r.BM25))
				} else {
					fmt.Fprintf(tw, "%d\t%s\t%.4f\t%s\n", i+1, r.Tool.Name, r.Score, clip.Truncate(r.Tool.Description, 70))
				}
			}
			return tw.Flush()
		}),
	}
	cmd.Flags().StringVar(&method, "method", "", "semantic, bm25, hybrid or rrf (default: the catalog's)")
	cmd.Flags().IntVar(&topK, "top-k", 0, "number of tools to return (default: the catalog's)")
	cmd.Flags().StringVar(&principal, "principal", "", "only show tools this principal may use")
	cmd.Flags().BoolVar(&explain, "explain", false, "show why each tool was returned: each arm's score and rank, and the request's intents")
	cmd.Flags().StringVar(&intents, "intents", "", "on or off: search each intent of a request that asks for several things (default: the catalog's)")
	return cmd
}

// withCatalog runs a command on the loaded catalog named by its first
// argument.
func (o *Options) withCatalog(run func(ctx context.Context, cmd *cobra.Command, args []string, s *session, cat *toolcatalog.Catalog) error) func(*cobra.Command, []string) error {
	return o.withRedis(func(ctx context.Context, cmd *cobra.Command, args []string, s *session) error {
		cat, err := s.load(ctx)
		if err != nil {
			return err
		}
		return run(ctx, cmd, args, s, cat)
	})
}

// withRedis runs a command on the catalog named by its first argument,
// with a client of its Redis.
func (o *Options) withRedis(run func(ctx context.Context, cmd *cobra.Command, args []string, s *session) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		ctx, cancel := withTimeout(cmd)
		defer cancel()
		s, err := o.open(ctx, args[0], true)
		if err != nil {
			return err
		}
		defer s.Close()
		return run(ctx, cmd, args, s)
	}
}

// explainBlend says how hybrid search ranked one text.
func explainBlend(out io.Writer, indent string, method toolcatalog.Method, b toolcatalog.Blend) {
	switch {
	case b.SemanticOnly:
		fmt.Fprintf(out, "%ssemantic-only rule fired: lexical evidence %.2f < %.2f, so the text shares no telling word with any tool; ranked by cosine alone\n",
			indent, b.LexicalEvidence, b.MinLexicalEvidence)
	case method == toolcatalog.Hybrid:
		fmt.Fprintf(out, "%sblend: %.2f·cosine + %.2f·bm25 (each normalised); lexical evidence %.2f (semantic-only below %.2f)\n",
			indent, b.SemanticWeight, 1-b.SemanticWeight, b.LexicalEvidence, b.MinLexicalEvidence)
	}
}

func arm(a *toolcatalog.Arm) string {
	if a == nil {
		return "-"
	}
	return fmt.Sprintf("%.4f (#%d)", a.Score, a.Rank)
}

func (o *Options) describeToolCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "describe-tool CATALOG TOOL",
		Short: "Show a tool as published: description, spec hash, model, synthetic queries, version",
		Args:  cobra.ExactArgs(2),
		RunE: o.withCatalog(func(ctx context.Context, cmd *cobra.Command, args []string, s *session, cat *toolcatalog.Catalog) error {
			tool, ok := cat.Tool(args[1])
			if !ok {
				return fmt.Errorf("catalog %s version %d has no tool %q", cat.Document.Catalog, cat.Version(), args[1])
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Tool:             %s\n", tool.Name)
			fmt.Fprintf(out, "Catalog:          %s (version %d)\n", cat.Document.Catalog, cat.Version())
			// What Redis holds is printed as it is: hidden characters
			// show as \u escapes.
			fmt.Fprintf(out, "Description:      %s\n", mcpsource.Visible(tool.Description))
			if tool.Toolset != "" {
				fmt.Fprintf(out, "Toolset:          %s\n", tool.Toolset)
			}
			fmt.Fprintf(out, "Spec hash:        %s\n", tool.SpecHash)
			fmt.Fprintf(out, "Flags:            alwaysInclude=%t allowRepeat=%t noBackground=%t\n", tool.AlwaysInclude, tool.AllowRepeat, tool.NoBackground)
			if p, ok := cat.Document.Permissions[tool.Name]; ok && len(p) == 0 {
				fmt.Fprintf(out, "Allowed:          nobody\n")
			} else if ok {
				fmt.Fprintf(out, "Allowed:          %s\n", strings.Join(p, ", "))
			} else {
				fmt.Fprintf(out, "Allowed:          everyone\n")
			}
			meta, err := toolcatalog.ReadMetadata(ctx, s.redis, s.config.Keys, tool.Name)
			if err != nil {
				return err
			}
			if m := meta[tool.Name]; m != nil {
				fmt.Fprintf(out, "Embedded:         %s, %d dimensions, at %s\n", m.Model, m.Dimensions, m.EmbeddedAt.Format(time.RFC3339))
				fmt.Fprintf(out, "Embedded spec:    %s\n", m.SpecHash)
				fmt.Fprintf(out, "Synthetic queries:\n")
				for _, q := range m.SyntheticQueries {
					fmt.Fprintf(out, "  - %s\n", mcpsource.Visible(q))
				}
				if len(m.LearnedQueries) > 0 {
					// Who taught each: a request one principal made is
					// never learned (spec.learning.minPrincipals).
					taught, err := contract.Teachers(ctx, s.redis, s.config.Keys, tool.Name, m.LearnedQueries)
					if err != nil {
						return err
					}
					fmt.Fprintf(out, "Learned requests (principals who made them):\n")
					for _, q := range m.LearnedQueries {
						fmt.Fprintf(out, "  - %s (%d)\n", mcpsource.Visible(q), taught[q])
					}
				}
			} else {
				fmt.Fprintf(out, "Embedded:         no metadata\n")
			}
			var params any
			_ = json.Unmarshal(tool.Parameters, &params)
			raw, _ := json.MarshalIndent(params, "  ", "  ")
			fmt.Fprintf(out, "Parameters:\n  %s\n", raw)
			return nil
		}),
	}
}

func (o *Options) refreshCommand() *cobra.Command {
	var (
		mode, tools string
		waitFor     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "refresh CATALOG",
		Short: "Request a refresh of a catalog (sets the toolcatalog.dev/refresh-* annotations)",
		Example: `  kubectl toolcatalog refresh assistant --mode force
  kubectl toolcatalog refresh assistant --mode embed-only --tools get_weather,send_email --wait 2m`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch mode {
			case "", string(v1alpha1.RefreshModeForce), string(v1alpha1.RefreshModeInvalidOnly), string(v1alpha1.RefreshModeEmbedOnly):
			default:
				return fmt.Errorf("--mode must be force, invalid-only or embed-only, not %q", mode)
			}
			ctx := cmd.Context()
			s, err := o.open(ctx, args[0], false)
			if err != nil {
				return err
			}
			token := time.Now().UTC().Format(time.RFC3339Nano)
			patch := kube.AnnotationsPatch(map[string]*string{
				v1alpha1.AnnotationRefreshRequestedAt: &token,
				v1alpha1.AnnotationRefreshMode:        orNil(mode),
				v1alpha1.AnnotationRefreshTools:       orNil(tools),
			})
			if mergePatchErr := s.kube.MergePatch(ctx, s.catalog, patch); mergePatchErr != nil {
				return fmt.Errorf("requesting refresh: %w", mergePatchErr)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "refresh of %s/%s requested (token %s)\n", s.catalog.Namespace, s.catalog.Name, token)
			if waitFor <= 0 {
				return nil
			}
			tc := &v1alpha1.ToolCatalog{}
			err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, waitFor, true, func(ctx context.Context) (bool, error) {
				if getErr := s.kube.Get(ctx, types.NamespacedName{Namespace: s.catalog.Namespace, Name: s.catalog.Name}, tc); getErr != nil {
					return false, getErr
				}
				return tc.Status.LastHandledRefreshAt == token, nil
			})
			if err != nil {
				return fmt.Errorf("waiting for the refresh to be handled: %w", err)
			}
			if lr := tc.Status.LastRefresh; lr != nil && lr.RequestedAt == token {
				switch lr.Result {
				case v1alpha1.RefreshFailed:
					return errors.New(lr.Message)
				case v1alpha1.RefreshPartiallyIgnored:
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", lr.Message)
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "handled: version %d\n", tc.Status.Version)
			return nil
		},
	}
	cmd.Flags().StringVar(&mode, "mode", "", "force, invalid-only or embed-only (default: refresh stale and invalid tools; with --tools: force them)")
	cmd.Flags().StringVar(&tools, "tools", "", "comma-separated tool names to limit the refresh to")
	cmd.Flags().DurationVar(&waitFor, "wait", 0, "wait up to this long for the operator to handle the request")
	return cmd
}

// orNil is v, or nil (an annotation to remove) when v is empty.
func orNil(v string) *string {
	if v == "" {
		return nil
	}
	return &v
}

func (o *Options) versionsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "versions CATALOG",
		Short: "List the catalog versions kept in Redis",
		Args:  cobra.ExactArgs(1),
		RunE: o.withRedis(func(ctx context.Context, cmd *cobra.Command, args []string, s *session) error {
			docs, err := contract.ReadHistory(ctx, s.redis, s.config.Keys)
			if err != nil {
				return err
			}
			if len(docs) == 0 {
				return fmt.Errorf("catalog %s/%s has not been published to Redis yet", s.catalog.Namespace, s.catalog.Name)
			}
			_, served, err := contract.Served(ctx, s.redis, s.config.Keys)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "VERSION\tCURRENT\tSERVED\tTOOLS\tSCHEMA HASH\tGENERATED")
			for i, doc := range docs {
				current, servedMark := "", ""
				if i == 0 {
					current = "*"
				}
				if doc.Version == served {
					servedMark = "*"
					if i > 0 {
						servedMark = "* (pinned)"
					}
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\n", doc.Version, current, servedMark, len(doc.Tools), doc.SchemaHash[:min(12, len(doc.SchemaHash))], doc.GeneratedAt.Format(time.RFC3339))
			}
			return tw.Flush()
		}),
	}
}

func (o *Options) purgeRequestsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "purge-requests CATALOG",
		Short: "Delete the request texts consumers recorded for a learning catalog",
		Long: `Delete every request text consumers recorded for the catalog (P:requests).
The operator then re-embeds the tools that had learned requests without them,
in a new version. While spec.learning.enabled is true, consumers keep
recording; turn it off to stop.`,
		Args: cobra.ExactArgs(1),
		RunE: o.withRedis(func(ctx context.Context, cmd *cobra.Command, args []string, s *session) error {
			n, err := s.redis.ZCard(ctx, s.config.Keys.Requests()).Result()
			if err != nil {
				return fmt.Errorf("counting recorded requests: %w", err)
			}
			if err := contract.PurgeRequests(ctx, s.redis, s.config.Keys); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "deleted %d recorded requests of catalog %s/%s\n", n, s.catalog.Namespace, s.catalog.Name)
			if s.catalog.Spec.Learning.Enabled {
				fmt.Fprintln(out, "learning is still enabled: consumers keep recording; set spec.learning.enabled to false to stop")
			}
			return nil
		}),
	}
}
