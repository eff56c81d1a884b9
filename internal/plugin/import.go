package plugin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/egress"
	"github.com/toolcatalog/tool-catalog-operator/internal/mcpsource"
)

func (o *Options) importCommand() *cobra.Command {
	var (
		url, prefix       string
		labels, headers   []string
		include, exclude  []string
		namespace, source string
	)
	cmd := &cobra.Command{
		Use:   "import --mcp URL",
		Short: "Write ToolDefinitions for the tools an MCP server offers, as YAML on standard output",
		Long: `Connect to an MCP server over Streamable HTTP, list its tools and write one
ToolDefinition per tool as YAML, for keeping tools in Git. No cluster is
needed. Tools that cannot be ToolDefinitions (a bad name, no description, an
input schema that is not an object) are reported on standard error and
skipped.`,
		Example: `  kubectl toolcatalog import --mcp https://docs.example.com/mcp --prefix docs_ --labels toolcatalog.dev/catalog=assistant > docs-tools.yaml
  kubectl toolcatalog import --mcp http://localhost:8080/mcp --header "Authorization: Bearer $TOKEN" --exclude 'admin_*'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := withTimeout(cmd)
			defer cancel()
			lbls, err := parseLabels(labels)
			if err != nil {
				return err
			}
			hdr := http.Header{}
			for _, h := range headers {
				name, value, ok := strings.Cut(h, ":")
				if !ok || strings.TrimSpace(name) == "" {
					return fmt.Errorf("--header %q: want \"Name: value\"", h)
				}
				hdr.Add(strings.TrimSpace(name), strings.TrimSpace(value))
			}
			s, err := mcpsource.Connect(ctx, mcpsource.Config{URL: url, Header: hdr, Egress: egress.Unrestricted()})
			if err != nil {
				return err
			}
			defer func() { _ = s.Close() }()
			tools, err := s.Tools(ctx, 0)
			if err != nil {
				return err
			}
			imported, rejected, err := mcpsource.Convert(tools, mcpsource.Options{Prefix: prefix, Include: include, Exclude: exclude, ToolSource: source, URL: url})
			if err != nil {
				return err
			}
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			noun := "tools"
			if len(imported) == 1 {
				noun = "tool"
			}
			fmt.Fprintf(out, "# %d %s of MCP server %s %s (protocol %s) at %s\n", len(imported), noun, s.Server.Name, s.Server.Version, s.Server.ProtocolVersion, url)
			used := map[string]bool{}
			for _, t := range imported {
				obj := map[string]any{
					"apiVersion": v1alpha1.GroupVersion.String(),
					"kind":       "ToolDefinition",
					"metadata":   objectMeta(mcpsource.ObjectName(t.Spec.Name, used), namespace, lbls),
					"spec":       t.Spec,
				}
				raw, err := json.Marshal(obj)
				if err != nil {
					return err
				}
				y, err := yaml.JSONToYAML(raw)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "---\n%s", y)
			}
			for _, r := range rejected {
				fmt.Fprintf(errOut, "skipped %s: %s\n", r.Upstream, r.Reason)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&url, "mcp", "", "the MCP server's Streamable HTTP endpoint (required)")
	f.StringVar(&prefix, "prefix", "", "put this before every tool name")
	f.StringSliceVar(&labels, "labels", nil, "labels for every ToolDefinition, key=value, comma-separated (a catalog's selector)")
	f.StringArrayVar(&headers, "header", nil, `HTTP header for every request, "Name: value" (repeatable), e.g. "Authorization: Bearer $TOKEN"`)
	f.StringSliceVar(&include, "include", nil, "only tools whose server name matches one of these globs")
	f.StringSliceVar(&exclude, "exclude", nil, "leave out tools whose server name matches one of these globs")
	f.StringVar(&namespace, "to-namespace", "", "metadata.namespace of the ToolDefinitions (default: none, set by kubectl apply)")
	f.StringVar(&source, "source-name", "", "spec.source.toolSource of every ToolDefinition (the ToolSource that would own them), to compare with what it imports: only a ToolSource creates such ToolDefinitions, and the admission policies refuse anyone else")
	_ = cmd.MarkFlagRequired("mcp")
	return cmd
}

func parseLabels(in []string) (map[string]string, error) {
	out := map[string]string{}
	for _, l := range in {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			return nil, fmt.Errorf("--labels %q: want key=value", l)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("--labels: key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("--labels: value %q: %s", v, strings.Join(errs, "; "))
		}
		out[k] = v
	}
	return out, nil
}

func objectMeta(name, namespace string, labels map[string]string) map[string]any {
	m := map[string]any{"name": name}
	if namespace != "" {
		m["namespace"] = namespace
	}
	if len(labels) > 0 {
		m["labels"] = labels
	}
	return m
}
