package console

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	g "maragu.dev/gomponents"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/versiondiff"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
)

// hostile is text as a ToolDefinition's author, an upstream MCP server or
// what sits in Redis may write it: markup that would run script or leave
// its attribute if a page wrote it unescaped.
const hostile = `"><script>alert(1)</script><img src=x onerror=alert(2)>`

// Every page writes hostile text as text: no element or attribute comes
// of it, and a link built from it stays a path of the console.
func TestPagesEscapeWhatTheyShow(t *testing.T) {
	quality := &v1alpha1.CatalogQuality{Version: 2, ConfusablePairs: []v1alpha1.ConfusablePair{{Tools: []string{hostile, "b"}, Similarity: hostile}},
		Outranked: []v1alpha1.OutrankedTool{{Tool: hostile, By: hostile}}}
	tool := contract.Tool{Name: hostile, Description: hostile, Toolset: hostile, SpecHash: hostile,
		Annotations: &contract.Annotations{Title: hostile}, Source: &contract.Source{ToolSource: hostile, Tool: hostile}}
	for name, page := range map[string]renderer{
		"catalogs": catalogsPage{Rows: []catalogRow{{Namespace: "ns", Name: hostile, Ready: hostile, Reason: hostile, Message: hostile, SelfRecall: hostile, LastRefresh: hostile, Pinned: hostile}},
			Denied: []denial{{hostile, hostile}}, Checked: []string{hostile}},
		"catalog": catalogPage{Namespace: "ns", Name: hostile, Row: catalogRow{Ready: hostile, Reason: hostile, Message: hostile, Pinned: hostile, PinnedVersion: 1}, Version: 2, Total: 1,
			Tools:    []toolRow{{Name: hostile, Description: hostile, Toolset: hostile, Source: hostile, Parameters: []string{hostile}}},
			Toolsets: []string{hostile}, Sources: []string{hostile}, Query: hostile, Toolset: hostile, Src: hostile, Quality: quality,
			Gradings: []gradingRow{{Version: 2, Graded: time.Now()}}},
		"tool": toolPage{Namespace: "ns", Name: hostile, Tool: hostile, Error: hostile, Parameters: hostile, Entry: &tool,
			Metadata: &contract.Metadata{Model: hostile, SyntheticQueries: []string{hostile}}, Definition: hostile,
			Records:    []recordRow{{Catalog: hostile, Model: hostile, Reason: hostile, Message: hostile}},
			Conditions: []conditionRow{{Type: hostile, Status: metav1.ConditionStatus(hostile), Reason: hostile, Message: hostile}},
			Learned:    []learned{{Request: hostile}}, MetadataError: hostile},
		"search": searchPage{Namespace: "ns", Name: hostile, Query: hostile, Method: hostile, Error: hostile, Methods: []toolcatalog.Method{toolcatalog.Method(hostile)},
			Resp: &toolcatalog.Response{Fallback: hostile, Intents: []toolcatalog.Intent{{Text: hostile}}}, Hits: []hit{{Rank: 1, Name: hostile, Description: hostile, Why: hostile}}},
		"versions": versionsPage{Namespace: "ns", Name: hostile, Versions: []versionDoc{{Version: 1}}, From: 1, To: 1, Added: []string{hostile}, Removed: []string{hostile},
			Changed: []versiondiff.Change{{Name: hostile, FromDescription: hostile, ToDesc: hostile, ParametersDiff: hostile, Other: []string{hostile}}}},
		"map":     chart{drawMap(hostileCatalog(t), [][2]string{{hostile, "b"}})},
		"quality": chart{drawQuality([]gradingRow{{Version: 1}, {Version: 2, SelfRecallAt5: 0.5}})},
		"source": sourcePage{Namespace: "ns", Name: hostile, Rows: sourceRows(&v1alpha1.ToolSource{
			Spec: v1alpha1.ToolSourceSpec{MCP: v1alpha1.MCPServerSpec{URL: hostile}},
			Status: v1alpha1.ToolSourceStatus{Server: &v1alpha1.MCPServerInfo{Name: hostile, Version: hostile, ProtocolVersion: hostile, Instructions: hostile},
				Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: hostile, Message: hostile}}}})},
		"source error": sourcePage{Namespace: "ns", Name: "x", Error: hostile},
		"approvals": approvalsPage{Sources: []pendingSource{{Namespace: "ns", Name: hostile, Changes: []pendingChange{{Tool: hostile, Change: hostile, SpecHash: hostile, Short: hostile, Summary: hostile, Diff: hostile}}}},
			Denied: []denial{{hostile, hostile}}, Token: hostile, Approved: hostile, Failed: hostile},
	} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := page.node().Render(&b); err != nil {
				t.Fatal(err)
			}
			doc, err := html.Parse(&b)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := page.(chart); ok && name == "quality" {
				return // nothing hostile to show
			}
			shown := 0
			for n := range doc.Descendants() {
				if n.Type == html.ElementNode && (n.Data == "script" || n.Data == "img" && !strings.HasSuffix(attr(n, "src"), ".svg")) {
					t.Errorf("a <%s> came of the text shown", n.Data)
				}
				for _, a := range n.Attr {
					if a.Key == "onerror" {
						t.Errorf("an attribute %s came of the text shown", a.Key)
					}
					if (a.Key == "href" || a.Key == "action" || a.Key == "src") && !strings.HasPrefix(a.Val, "/") && a.Val != "#main" && a.Val != "data:," {
						t.Errorf("%s %q leaves the console", a.Key, a.Val)
					}
					if a.Key == "href" && strings.HasPrefix(a.Val, "/catalogs/") && strings.ContainsAny(a.Val, `"<> `) {
						t.Errorf("href %q holds unescaped text", a.Val)
					}
				}
				if n.Type == html.TextNode && strings.Contains(n.Data, hostile) {
					shown++
				}
			}
			if shown == 0 {
				t.Error("the hostile text is not shown as text")
			}
		})
	}
}

type renderer interface{ node() g.Node }

// chart is an image of the console, as its page would embed it.
type chart struct{ g.Node }

func (c chart) node() g.Node { return c.Node }

// hostileCatalog is a published version whose tool names and toolsets
// are hostile.
func hostileCatalog(t *testing.T) *toolcatalog.Catalog {
	doc := &contract.Document{Version: 1, Embedding: contract.EmbeddingInfo{Model: "m", Dimensions: 2}}
	raw := map[string][]byte{}
	for i, name := range []string{hostile, "b", "c"} {
		doc.Tools = append(doc.Tools, contract.Tool{Name: name, Description: "d", Toolset: hostile, SpecHash: "h"})
		raw[name] = contract.EncodeVector([]float32{float32(i), float32(i * i)})
	}
	cat, err := toolcatalog.New(doc, raw)
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// A source page lists what the server said of itself, where the source
// reaches it, and its tools, its hidden characters escaped.
func TestSourcePageShowsTheServer(t *testing.T) {
	ts := &v1alpha1.ToolSource{Spec: v1alpha1.ToolSourceSpec{MCP: v1alpha1.MCPServerSpec{ServerRef: &v1alpha1.ServerReference{APIVersion: "v1", Kind: "Service", Name: "docs"}}},
		Status: v1alpha1.ToolSourceStatus{Server: &v1alpha1.MCPServerInfo{Name: "docs", Version: "2.1.0", ProtocolVersion: "2025-11-25", Instructions: "Search first.\u200b"},
			Endpoint: &v1alpha1.ServerEndpoint{Kind: "Service", Name: "docs", URL: "http://docs.ns.svc.cluster.local:8080/mcp", Ready: true}, ToolCount: 3}}
	got := map[string]string{}
	for _, r := range sourceRows(ts) {
		got[r[0]] = r[1]
	}
	want := map[string]string{"Reference": "Service docs (v1)", "Endpoint": "http://docs.ns.svc.cluster.local:8080/mcp (ready: true)",
		"Server": "docs 2.1.0 (protocol 2025-11-25)", "Instructions": `Search first.\u200B`, "Tools": "3"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
}
