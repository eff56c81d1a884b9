package mcpdemo

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The docs server answers an SDK client over Streamable HTTP: two tools,
// a search that finds the section about approvals, a page read, and a
// tool error for a page that does not exist.
func TestDocsServerOverStreamableHTTP(t *testing.T) {
	dir := t.TempDir()
	pages := map[string]string{
		"sources.md": "# Tools from MCP servers\nIntro.\n## Change approval\nRequireApproval holds upstream changes until approved.\n## Import\nkubectl toolcatalog import writes YAML.\n",
		"search.md":  "# Search\nHybrid search blends BM25 and cosine. Approval is not needed to search.\n",
	}
	for name, text := range pages {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d.Handler())
	defer srv.Close()
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	if strings.Join(names, ",") != "read_doc,search_docs" {
		t.Fatalf("tools %v", names)
	}
	text := func(res *mcp.CallToolResult) string {
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String()
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_docs", Arguments: map[string]any{"query": "approve upstream changes with RequireApproval", "limit": 1}})
	if err != nil || res.IsError {
		t.Fatalf("search: %v %+v", err, res)
	}
	if got := text(res); !strings.HasPrefix(got, "## sources — Change approval\nRequireApproval holds") || strings.Count(got, "## ") != 1 {
		t.Errorf("search found %q", got)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_doc", Arguments: map[string]any{"page": "sources"}})
	if err != nil || res.IsError || !strings.HasPrefix(text(res), "# Tools from MCP servers") {
		t.Fatalf("read: %v %+v", err, res)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_doc", Arguments: map[string]any{"page": "nope"}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "no page \"nope\"; the pages are") {
		t.Fatalf("unknown page: %v %+v", err, res)
	}
}
