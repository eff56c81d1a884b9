package gateway

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/mcptest"
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
