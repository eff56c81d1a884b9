package gateway

import (
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/mcptest"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// What happens during a long upstream call reaches both ends: the
// server's progress reaches the client under the client's own token, and
// a client that cancels cancels the call on the server; with protocol
// 2026-07-28 (the request is the call) and in a 2025-11-25 session
// (notifications/cancelled).
func TestProgressAndCancellationCrossTheGateway(t *testing.T) {
	for _, protocol := range []string{"", sessionProtocol} {
		t.Run(cmp.Or(protocol, "latest"), func(t *testing.T) { progressAndCancellation(t, protocol) })
	}
}

func progressAndCancellation(t *testing.T, protocol string) {
	ns := newNamespace(t)
	srv := mcptest.New(t, mcptest.Options{Name: "reports"})
	var upstreamTokens []any
	var mu sync.Mutex
	// The upstream sends its next step only once the client has the last
	// one: notifications that overtake the result are dropped by design
	// (progress ends with the call), so this checks the relay, not a race.
	reached := make(chan struct{}, 3)
	srv.AddTool(&mcp.Tool{Name: "build_report", Title: "Build a report", Description: "Build the quarterly sales report, slowly.", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			token := req.Params.GetProgressToken()
			mu.Lock()
			upstreamTokens = append(upstreamTokens, token)
			mu.Unlock()
			if token != nil {
				for i := 1; i <= 3; i++ {
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(i), Total: 3, Message: "step"})
					select {
					case <-reached:
					case <-time.After(10 * time.Second):
						return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "progress never reached the client"}}, IsError: true}, nil
					}
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "report ready"}}}, nil
		})
	started, cancelled := make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv.AddTool(&mcp.Tool{Name: "export_archive", Description: "Export the whole archive; takes hours.", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			once.Do(func() { close(started) })
			select {
			case <-ctx.Done():
				close(cancelled)
				return nil, ctx.Err()
			case <-time.After(time.Hour):
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "exported"}}}, nil
			}
		})
	create(t,
		sourceFor(ns, "reports", srv.URL, "long"),
		testCatalog(ns, "long", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOff}),
	)
	published(t, ns, "long", 2)

	type note struct {
		token        any
		progress, of float64
		message      string
	}
	var notes []note
	var notesMu sync.Mutex
	// A gateway whose call timeout cannot be what cancels the upstream.
	_, base := ownGateway(t, Limits{}, func(o *Options) { o.CallTimeout = time.Hour })
	cs := connectWith(t, base, ns, "long", aliceToken, "", &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		notesMu.Lock()
		defer notesMu.Unlock()
		notes = append(notes, note{req.Params.ProgressToken, req.Params.Progress, req.Params.Total, req.Params.Message})
		reached <- struct{}{}
	}}, protocol)
	if (cs.ID() != "") != (protocol == sessionProtocol) {
		t.Fatalf("protocol %q: session ID %q", cs.InitializeResult().ProtocolVersion, cs.ID())
	}

	params := &mcp.CallToolParams{Name: "build_report", Arguments: map[string]any{}}
	params.SetProgressToken("client-42")
	res, err := cs.CallTool(t.Context(), params)
	if err != nil || res.IsError {
		t.Fatalf("build_report: %v %+v", err, res)
	}
	notesMu.Lock()
	got := slices.Clone(notes)
	notesMu.Unlock()
	if len(got) != 3 || got[0].token != "client-42" || got[2].progress != 3 || got[2].of != 3 || got[0].message != "step" {
		t.Fatalf("progress the client received: %+v; want 3 notifications under its token client-42", got)
	}
	mu.Lock()
	first := upstreamTokens[0]
	mu.Unlock()
	if first == "client-42" || first == nil {
		t.Fatalf("the upstream was asked for progress under %v; want a token of the gateway's own, not the client's", first)
	}

	// A call without a progress token asks the upstream for none.
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "build_report", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if last := upstreamTokens[len(upstreamTokens)-1]; last != nil {
		t.Errorf("a call without a progress token reached the upstream with token %v", last)
	}
	mu.Unlock()

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "export_archive", Arguments: map[string]any{}})
		done <- err
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not reach the upstream")
	}
	cancel()
	select {
	case <-cancelled:
	case <-time.After(30 * time.Second):
		t.Fatal("the client cancelled, but the upstream call was not cancelled")
	}
	<-done
}

// Bridge tools carry MCP annotations, and tool_describe shows a tool's
// title and annotations as its server declared them.
func TestBridgeAnnotationsAndDescribedTitles(t *testing.T) {
	ns := newNamespace(t)
	srv := mcptest.New(t, mcptest.Options{Name: "reports"})
	srv.AddTool(&mcp.Tool{Name: "build_report", Title: "Build a report", Description: "Build the quarterly sales report.", InputSchema: map[string]any{"type": "object"},
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	create(t,
		sourceFor(ns, "reports", srv.URL, "bridged"),
		testCatalog(ns, "bridged", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOn}),
	)
	published(t, ns, "bridged", 1)
	cs := connect(t, ns, "bridged", aliceToken, "", nil)
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	hints := map[string]string{}
	for _, tool := range res.Tools {
		if a := tool.Annotations; a != nil {
			hints[tool.Name] = tool.Title + "|" + strings.Join([]string{boolString(a.ReadOnlyHint), ptrString(a.DestructiveHint), ptrString(a.OpenWorldHint)}, ",")
		}
	}
	want := map[string]string{
		"tool_search":   "Search tools|true,false,false",
		"tool_describe": "Describe a tool|true,false,false",
		"tool_call":     "Call a tool|false,nil,true",
	}
	for name, w := range want {
		if hints[name] != w {
			t.Errorf("%s annotations: %q, want %q", name, hints[name], w)
		}
	}
	described, isErr := callTool(t, cs, "tool_describe", map[string]any{"name": "build_report"})
	var def struct {
		Title       string
		Annotations struct {
			ReadOnlyHint *bool `json:"readOnlyHint"`
		}
	}
	if err := json.Unmarshal([]byte(described), &def); isErr || err != nil || def.Title != "Build a report" || def.Annotations.ReadOnlyHint == nil || !*def.Annotations.ReadOnlyHint {
		t.Fatalf("tool_describe: %s", described)
	}
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func ptrString(b *bool) string {
	if b == nil {
		return "nil"
	}
	return boolString(*b)
}

// Icons reach clients in tools/list (tool_describe: TestDescribeShowsIcons), from an upstream
// server through a ToolSource and from a hand-written ToolDefinition; an
// icon a client could be harmed by rendering never does: the API server
// refuses a javascript: src, the ToolDefinition controller an SVG, the
// import leaves such icons out, and the gateway leaves out what Redis
// holds that fails the same check.
func TestIconsReachClientsChecked(t *testing.T) {
	ns := newNamespace(t)
	const png = "data:image/png;base64,iVBORw0KGgo="
	srv := mcptest.New(t, mcptest.Options{Name: "crm"})
	srv.AddTool(&mcp.Tool{Name: "find_contact", Description: "Find a contact in the CRM by name.", InputSchema: map[string]any{"type": "object"},
		Icons: []mcp.Icon{{Source: "https://cdn.example.com/crm.png", Sizes: []string{"48x48"}, Theme: mcp.IconThemeDark},
			{Source: "javascript:alert(document.cookie)"}, {Source: "data:image/svg+xml;base64,PHN2Zy8+"}}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	handWritten := testTool(ns, "icons", "send_fax", "Send a fax to a number.")
	handWritten.Spec.Icons = []v1alpha1.ToolIcon{{Src: png, MIMEType: "image/png"}}
	create(t, sourceFor(ns, "crm", srv.URL, "icons"), testCatalog(ns, "icons", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOff}), handWritten)
	published(t, ns, "icons", 2)

	// The API server refuses a src that is no URL or image, and the
	// controller an SVG.
	bad := testTool(ns, "other", "bad_icon", "A tool with a hostile icon.")
	bad.Spec.Icons = []v1alpha1.ToolIcon{{Src: "javascript:alert(1)"}}
	if err := kube.Create(t.Context(), bad); err == nil || !strings.Contains(err.Error(), "src must be an https URL or a data URI of an image") {
		t.Fatalf("a javascript: icon: %v", err)
	}
	svg := testTool(ns, "other", "svg_icon", "A tool with an SVG icon.")
	svg.Spec.Icons = []v1alpha1.ToolIcon{{Src: "data:image/svg+xml;base64,PHN2Zy8+"}}
	create(t, svg)
	waitFor(t, "the SVG icon to be refused", func() bool {
		var td v1alpha1.ToolDefinition
		if err := kube.Get(t.Context(), client.ObjectKeyFromObject(svg), &td); err != nil {
			return false
		}
		c := meta.FindStatusCondition(td.Status.Conditions, v1alpha1.ConditionValid)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonInvalidIcons
	})

	icons := func(cs *mcp.ClientSession) map[string][]string {
		res, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]string{}
		for _, tool := range res.Tools {
			for _, i := range tool.Icons {
				out[tool.Name] = append(out[tool.Name], i.Source+" "+strings.Join(i.Sizes, ",")+" "+string(i.Theme))
			}
		}
		return out
	}
	cs := connect(t, ns, "icons", aliceToken, "", nil)
	want := map[string][]string{"find_contact": {"https://cdn.example.com/crm.png 48x48 dark"}, "send_fax": {png + "  "}}
	if got := icons(cs); !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("icons listed: %q, want %q", got, want)
	}

	// What Redis holds is checked again: an entry written there with a
	// hostile icon is listed without it.
	injected := contract.Tool{Name: "injected", Description: "Written straight into Redis.", Parameters: json.RawMessage(`{"type":"object"}`),
		Icons: []contract.Icon{{Src: "javascript:alert(1)"}, {Src: png}}}
	inject(t, ns, "icons", injected)
	waitFor(t, "the injected entry to be listed", func() bool {
		_, ok := icons(cs)["injected"]
		return ok
	})
	if got := icons(cs)["injected"]; len(got) != 1 || got[0] != png+"  " {
		t.Fatalf("the injected entry's icons: %q", got)
	}
}
