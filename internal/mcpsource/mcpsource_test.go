package mcpsource

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcatalog/tool-catalog-operator/internal/egress"
	"github.com/toolcatalog/tool-catalog-operator/internal/mcptest"
)

func connect(t *testing.T, cfg Config) *Session {
	t.Helper()
	s, err := Connect(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestImportsEveryPageAndConvertsTools(t *testing.T) {
	srv := mcptest.New(t, mcptest.Options{Name: "docs", Version: "2.1.0", PageSize: 2})
	srv.Tool("search", "Search the documentation by keywords.",
		map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string", "description": "the keywords"}}, "required": []string{"q"}},
		&mcp.ToolAnnotations{Title: "Search docs", ReadOnlyHint: true, OpenWorldHint: new(false)})
	for i := range 4 {
		srv.Tool(fmt.Sprintf("page_%d", i), fmt.Sprintf("Read page %d of the manual.", i), nil, nil)
	}
	srv.Tool("internal_debug", "Dump internal state.", nil, nil)

	s := connect(t, Config{URL: srv.URL, Egress: testEgress})
	if s.Server.Name != "docs" || s.Server.Version != "2.1.0" || s.Server.ProtocolVersion == "" {
		t.Fatalf("server info %+v", s.Server)
	}
	tools, err := s.Tools(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 6 {
		t.Fatalf("listed %d tools over pages of 2, want 6", len(tools))
	}

	got, rejected, err := Convert(tools, Options{Prefix: "docs_", Exclude: []string{"internal_*"}, ToolSource: "docs", URL: srv.URL})
	if err != nil || len(rejected) != 0 {
		t.Fatalf("convert: %v, rejected %v", err, rejected)
	}
	if len(got) != 5 || got[0].Spec.Name != "docs_page_0" || got[4].Spec.Name != "docs_search" {
		t.Fatalf("imported %v, want docs_page_0..3 and docs_search in name order, internal_debug excluded", names(got))
	}
	search := got[4].Spec
	if search.Description != "Search the documentation by keywords." || !strings.Contains(string(search.Parameters.Raw), `"required":["q"]`) {
		t.Errorf("search spec %+v parameters %s", search, search.Parameters.Raw)
	}
	if a := search.Annotations; a == nil || a.Title != "Search docs" || !*a.ReadOnlyHint || *a.OpenWorldHint || a.DestructiveHint != nil {
		t.Errorf("annotations %+v", search.Annotations)
	}
	if src := search.Source; src == nil || src.Tool != "search" || src.ToolSource != "docs" || src.MCPURL != srv.URL {
		t.Errorf("source %+v", search.Source)
	}

	only, _, _ := Convert(tools, Options{Include: []string{"page_[12]"}})
	if len(only) != 2 || only[0].Spec.Name != "page_1" || only[1].Spec.Name != "page_2" {
		t.Errorf("include page_[12]: %v", names(only))
	}
	if _, _, err := Convert(tools, Options{Include: []string{"["}}); err == nil {
		t.Error("a bad pattern was accepted")
	}
}

func names(in []Imported) []string {
	var out []string
	for _, i := range in {
		out = append(out, i.Spec.Name)
	}
	return out
}

// One bad tool is reported and skipped; the others convert.
func TestMalformedToolsAreRejectedWithTheReason(t *testing.T) {
	tools := []*mcp.Tool{
		{Name: "ok", Description: "Fine.", InputSchema: map[string]any{"type": "object"}},
		{Name: "has space", Description: "Bad name.", InputSchema: map[string]any{"type": "object"}},
		{Name: "mute", InputSchema: map[string]any{"type": "object"}},
		{Name: "list", Description: "Schema of an array.", InputSchema: map[string]any{"type": "array"}},
		{Name: "broken", Description: "Schema with a bad keyword.", InputSchema: map[string]any{"type": "object", "properties": 12}},
		{Name: "call", Description: "Collides with the bridge once prefixed.", InputSchema: map[string]any{"type": "object"}},
	}
	got, rejected, err := Convert(tools, Options{Prefix: "tool_"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Spec.Name != "tool_ok" {
		t.Fatalf("imported %v, want only tool_ok", names(got))
	}
	want := map[string]string{
		"has space": "is not a valid tool name",
		"mute":      "has no description",
		"list":      "input schema is rejected",
		"broken":    "input schema is rejected",
		"call":      "reserved for progressive disclosure",
	}
	if len(rejected) != len(want) {
		t.Fatalf("rejected %+v", rejected)
	}
	for _, r := range rejected {
		if !strings.Contains(r.Reason, want[r.Upstream]) {
			t.Errorf("%s rejected for %q, want %q", r.Upstream, r.Reason, want[r.Upstream])
		}
	}
}

func TestBearerTokenReachesTheServer(t *testing.T) {
	srv := mcptest.New(t, mcptest.Options{Token: "s3cret"})
	srv.Tool("ping", "Answer pong.", nil, nil)
	if _, err := Connect(context.Background(), Config{URL: srv.URL, Egress: testEgress}); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("without a token: %v, want ErrUnauthorized", err)
	}
	s := connect(t, Config{URL: srv.URL, Egress: testEgress, Header: http.Header{"Authorization": {"Bearer s3cret"}, "X-Team": {"search"}}})
	tools, err := s.Tools(context.Background(), 0)
	if err != nil || len(tools) != 1 {
		t.Fatalf("tools %v, %v", tools, err)
	}
	last := srv.Headers()[len(srv.Headers())-1]
	if last.Get("X-Team") != "search" {
		t.Errorf("custom header not sent: %v", last)
	}
}

func TestUnreachableServerNamesTheURL(t *testing.T) {
	srv := mcptest.New(t, mcptest.Options{})
	url := srv.URL
	srv.Close()
	_, err := Connect(context.Background(), Config{URL: url, Egress: testEgress})
	if err == nil || !strings.Contains(err.Error(), url) || errors.Is(err, ErrUnauthorized) {
		t.Fatalf("unreachable server: %v", err)
	}
}

// testEgress lets the tests reach their servers on 127.0.0.1.
var testEgress, _ = egress.New([]string{"127.0.0.1/32"})
