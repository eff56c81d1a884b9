package index

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// What a model sends to the bridge tools is untrusted: any arguments get a
// result or a BridgeError, never a panic, and a resolved call always
// carries a JSON object for a real, permitted tool.
func FuzzBridgeHandle(f *testing.F) {
	for _, seed := range []string{
		`{"query":"send an email","top_k":2}`, `{"query":"x","top_k":1e308}`, `{"query":"x","top_k":-5}`,
		`{"name":"create_issue","arguments":{"repo":"a/b"}}`, `{"name":"create_issue","arguments":"{\"a\":1}"}`,
		`{"name":"create_issue","arguments":"\"{}\""}`, `{"name":"tool_call"}`, `null`, `[]`, `{"name":{"x":1}}`,
	} {
		for _, tool := range []string{ToolSearch, ToolDescribe, ToolCall} {
			f.Add(tool, seed)
		}
	}
	c := buildFixture(f, fixture, contract.SearchDefaults{Method: "bm25", TopK: 3})
	b := &Bridge{Catalog: func() *Catalog { return c }, Principal: "group:sales"}
	f.Fuzz(func(t *testing.T, tool, args string) {
		if len(args) > 1<<14 {
			return
		}
		out, call, err := b.Handle(context.Background(), tool, args)
		var be *BridgeError
		switch {
		case err != nil && !errors.As(err, &be):
			t.Fatalf("%s %q: an error not meant for the model: %v", tool, args, err)
		case call != nil:
			var obj map[string]json.RawMessage
			if json.Unmarshal(call.Arguments, &obj) != nil || obj == nil {
				t.Fatalf("%s %q: call arguments %s are not an object", tool, args, call.Arguments)
			}
			if _, ok := c.Tool(call.Name); !ok || !c.IsAllowed(call.Name, b.Principal) || IsBridgeTool(call.Name) {
				t.Fatalf("%s %q: resolved a call to %s", tool, args, call.Name)
			}
		case err == nil && !json.Valid(out):
			t.Fatalf("%s %q: result is not JSON: %s", tool, args, out)
		}
	})
}

// Queries are untrusted text: BM25 search over them never panics and
// returns at most what was asked for, plus always-included tools.
func FuzzSearchBM25(f *testing.F) {
	for _, q := range []string{"will it rain tomorrow", "", "   ", "get_weather", "日本語のテキスト", "🙂🙂", "a\x00b", "camelCaseHTTPServer_snake-kebab"} {
		f.Add(q)
	}
	c := buildFixture(f, fixture, contract.SearchDefaults{Method: "bm25", TopK: 3})
	f.Fuzz(func(t *testing.T, q string) {
		if len(q) > 1<<12 {
			return
		}
		resp, err := c.Search(context.Background(), q, Options{Method: BM25, TopK: 2})
		if err != nil {
			return
		}
		if len(resp.Results) > 2+len(c.AlwaysIncluded()) {
			t.Fatalf("%q: %d results", q, len(resp.Results))
		}
	})
}
