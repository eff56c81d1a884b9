package gateway

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/mcptest"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
)

// What tools/list returns follows the catalog's disclosure policy, for
// the caller's principal and window.
func TestListFollowsTheDisclosurePolicy(t *testing.T) {
	ns := newNamespace(t)
	threshold := func(f float64) *float64 { return &f }
	catalogs := map[string]v1alpha1.DisclosureSpec{
		"off":       {Mode: v1alpha1.DisclosureOff},
		"on":        {Mode: v1alpha1.DisclosureOn},
		"auto-low":  {Mode: v1alpha1.DisclosureAuto, Threshold: threshold(0.001)},
		"auto-high": {Mode: v1alpha1.DisclosureAuto, Threshold: threshold(1)},
		"auto":      {},
	}
	for name, d := range catalogs {
		create(t, testCatalog(ns, name, d))
		create(t, standardTools(ns, name)...)
	}
	for name := range catalogs {
		published(t, ns, name, 5)
	}
	tools := []string{"create_issue", "get_weather", "send_email", "web_search"}
	bridge := []string{"tool_call", "tool_describe", "tool_search", "web_search"}
	for _, tt := range []struct {
		catalog, token, query string
		want                  []string
	}{
		{"off", aliceToken, "", tools},
		{"off", finToken, "", append(slices.Clone(tools), "run_sql")},
		{"on", aliceToken, "", bridge},
		{"auto-low", aliceToken, "", bridge},
		{"auto-high", aliceToken, "", tools},
		{"auto", aliceToken, "", tools},
		// Five small tools are far below 10 % of 128,000 tokens, but not
		// of a 1,000-token window.
		{"auto", aliceToken, "?contextWindow=1000", bridge},
	} {
		got := listed(t, connect(t, ns, tt.catalog, tt.token, tt.query, nil))
		slices.Sort(got)
		want := slices.Sorted(slices.Values(tt.want))
		if !slices.Equal(got, want) {
			t.Errorf("%s%s as %s: listed %v, want %v", tt.catalog, tt.query, strings.SplitN(tt.token, "-", 2)[0], got, want)
		}
	}
}

// tool_search finds a tool imported from an MCP server, tool_describe
// shows its schema, and tool_call reaches the server through the gateway;
// arguments that do not match the schema never reach it, a tool with no
// server says the runtime must run it, and a server that is down is a tool
// error while the gateway stays healthy.
func TestSearchDescribeCallProxiedUpstream(t *testing.T) {
	ns := newNamespace(t)
	srv := mcptest.New(t, mcptest.Options{Name: "weather", Version: "2.0.0", Token: "upstream-secret"})
	srv.Tool("get_weather", "Get the current weather and the forecast for a city.",
		map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
		&mcp.ToolAnnotations{ReadOnlyHint: true})
	create(t,
		testSecret(ns, "weather-token", "token", "upstream-secret"),
		&v1alpha1.ToolSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "weather"}, Spec: v1alpha1.ToolSourceSpec{
			MCP:    v1alpha1.MCPServerSpec{URL: srv.URL, BearerTokenSecretRef: &v1alpha1.SecretKeySelector{Name: "weather-token", Key: "token"}},
			Labels: map[string]string{"catalog": "calls"},
		}},
		testCatalog(ns, "calls", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOn}),
		testTool(ns, "calls", "web_search", "Search the web for recent information.", params(`{"type":"object","properties":{"query":{"type":"string"}}}`)),
		testTool(ns, "calls", "send_email", "Send an email message to a recipient.", params(`{"type":"object","properties":{"to":{"type":"string"}}}`)),
	)
	published(t, ns, "calls", 3)
	cs := connect(t, ns, "calls", aliceToken, "", nil)

	found := search(t, cs, "what is the weather in Oslo tomorrow")
	if len(found.Tools) == 0 || found.Tools[0].Name != "get_weather" || found.TotalAvailable != 2 {
		t.Fatalf("tool_search: %+v", found)
	}
	described, isErr := callTool(t, cs, "tool_describe", map[string]any{"name": "get_weather"})
	if isErr || !strings.Contains(described, `"required":["city"]`) {
		t.Fatalf("tool_describe: %s", described)
	}
	out, isErr := callTool(t, cs, "tool_call", map[string]any{"name": "get_weather", "arguments": map[string]any{"city": "Oslo"}})
	if isErr || out != `get_weather {"city":"Oslo"}` || srv.Calls() != 1 {
		t.Fatalf("tool_call: %q (error %v), upstream calls %d", out, isErr, srv.Calls())
	}
	// The schema is checked before the server is asked.
	out, isErr = callTool(t, cs, "tool_call", map[string]any{"name": "get_weather", "arguments": map[string]any{"city": 7}})
	if !isErr || !strings.Contains(out, "at /city: got number, want string") || srv.Calls() != 1 {
		t.Fatalf("bad arguments: %q (error %v), upstream calls %d", out, isErr, srv.Calls())
	}
	out, isErr = callTool(t, cs, "tool_call", map[string]any{"name": "send_email", "arguments": map[string]any{"to": "ana@example.com"}})
	if !isErr || !strings.Contains(out, "the agent runtime must execute it itself") {
		t.Fatalf("no upstream: %q", out)
	}
	// The core tool is listed, so it is called directly; it has no server.
	out, isErr = callTool(t, cs, "web_search", map[string]any{"query": "news"})
	if !isErr || !strings.Contains(out, "web_search has no upstream MCP server") {
		t.Fatalf("direct call: %q", out)
	}

	srv.Close()
	out, isErr = callTool(t, cs, "tool_call", map[string]any{"name": "get_weather", "arguments": map[string]any{"city": "Oslo"}})
	if !isErr || !strings.Contains(out, "the upstream MCP server of get_weather could not be reached") || strings.Contains(out, "upstream-secret") || strings.Contains(out, "127.0.0.1") {
		t.Fatalf("upstream down: %q", out)
	}
	if resp, err := http.Get(gatewayURL + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz after an upstream failure: %v %v", resp, err)
	}
	id := ns + "/calls"
	want := []string{
		`toolcatalog_gateway_calls_total{catalog="` + id + `",outcome="invalid_arguments",tool="get_weather"} 1`,
		`toolcatalog_gateway_calls_total{catalog="` + id + `",outcome="no_upstream",tool="send_email"} 1`,
		`toolcatalog_gateway_calls_total{catalog="` + id + `",outcome="no_upstream",tool="web_search"} 1`,
		`toolcatalog_gateway_calls_total{catalog="` + id + `",outcome="ok",tool="get_weather"} 1`,
		`toolcatalog_gateway_calls_total{catalog="` + id + `",outcome="upstream_error",tool="get_weather"} 1`,
	}
	if got := metric(t, `toolcatalog_gateway_calls_total{catalog="`+id+`"`); !slices.Equal(got, want) {
		t.Errorf("call metrics:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := metric(t, `toolcatalog_gateway_searches_total{catalog="`+id+`"}`); len(got) != 1 || !strings.HasSuffix(got[0], " 1") {
		t.Errorf("search metrics: %v", got)
	}
	if got := metric(t, `toolcatalog_gateway_upstream_seconds_count{catalog="`+id+`"}`); len(got) != 1 || !strings.HasSuffix(got[0], " 2") {
		t.Errorf("upstream latency: %v", got)
	}
}

// A tool's output schema reaches the client: tools/list and tool_describe
// show it, and the server's structured content comes back unchanged from a
// direct call and from tool_call.
func TestOutputSchemaAndStructuredContentReachTheClient(t *testing.T) {
	ns := newNamespace(t)
	srv := mcptest.New(t, mcptest.Options{Name: "orders"})
	output := map[string]any{"type": "object", "properties": map[string]any{"count": map[string]any{"type": "integer"}}, "required": []string{"count"}}
	srv.StructuredTool("count_orders", "Count today's orders.", output, map[string]any{"count": 3})
	bridged := testCatalog(ns, "bridged", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOn})
	bridged.Spec.Selector.MatchLabels = map[string]string{"catalog": "direct"}
	create(t,
		&v1alpha1.ToolSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"}, Spec: v1alpha1.ToolSourceSpec{
			MCP: v1alpha1.MCPServerSpec{URL: srv.URL}, Labels: map[string]string{"catalog": "direct"}}},
		testCatalog(ns, "direct", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOff}), bridged)
	published(t, ns, "direct", 1)
	published(t, ns, "bridged", 1)
	const wantSchema = `{"properties":{"count":{"type":"integer"}},"required":["count"],"type":"object"}`

	cs := connect(t, ns, "direct", aliceToken, "", nil)
	list, err := cs.ListTools(t.Context(), nil)
	if err != nil || len(list.Tools) != 1 {
		t.Fatalf("tools/list: %v %+v", err, list)
	}
	if got, _ := json.Marshal(list.Tools[0].OutputSchema); string(got) != wantSchema {
		t.Errorf("listed output schema %s, want %s", got, wantSchema)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "count_orders", Arguments: map[string]any{}})
	if got, _ := json.Marshal(res.StructuredContent); err != nil || res.IsError || string(got) != `{"count":3}` {
		t.Fatalf("direct call: %v, error %v, structured content %s", err, res.IsError, got)
	}

	cs = connect(t, ns, "bridged", aliceToken, "", nil)
	described, isErr := callTool(t, cs, "tool_describe", map[string]any{"name": "count_orders"})
	if isErr || !strings.Contains(described, `"outputSchema":`+wantSchema) {
		t.Fatalf("tool_describe: %s", described)
	}
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "tool_call", Arguments: map[string]any{"name": "count_orders"}})
	if got, _ := json.Marshal(res.StructuredContent); err != nil || res.IsError || string(got) != `{"count":3}` {
		t.Fatalf("tool_call: %v, error %v, structured content %s", err, res.IsError, got)
	}
}

// A new catalog version that changes what a client sees reaches it as
// notifications/tools/list_changed, and the new tool is listed: on a
// subscription (2026-07-28) and on a session's stream (2025-11-25).
func TestNewVersionNotifiesClients(t *testing.T) {
	for _, protocol := range []string{"", sessionProtocol} {
		t.Run(cmp.Or(protocol, "latest"), func(t *testing.T) { newVersionNotifies(t, protocol) })
	}
}

func newVersionNotifies(t *testing.T, protocol string) {
	ns := newNamespace(t)
	standardCatalog(t, ns, "live", v1alpha1.DisclosureOff)
	changed := make(chan struct{}, 10)
	cs := connectWith(t, gatewayURL, ns, "live", aliceToken, "", &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	}, protocol)
	if names := listed(t, cs); slices.Contains(names, "translate_text") {
		t.Fatalf("listed %v before the tool exists", names)
	}
	create(t, testTool(ns, "live", "translate_text", "Translate text between languages."))
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("no notifications/tools/list_changed within 30s of the new tool")
	}
	if names := listed(t, cs); !slices.Contains(names, "translate_text") {
		t.Fatalf("listed %v after the notification", names)
	}
}

// Every tools/list under disclosure counts the prompt tokens it saved:
// the tokens of every tool the principal may use minus those sent.
func TestTokensSavedByDisclosure(t *testing.T) {
	ns := newNamespace(t)
	create(t, testCatalog(ns, "saved", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOn}))
	create(t, standardTools(ns, "saved")...)
	for i := range 7 {
		create(t, testTool(ns, "saved", fmt.Sprintf("report_%d", i), fmt.Sprintf("Build the quarterly report number %d with charts and tables.", i),
			params(`{"type":"object","properties":{"quarter":{"type":"string","description":"the quarter, for example 2026-Q3"}}}`)))
	}
	doc := published(t, ns, "saved", 12)
	cat, err := toolcatalog.New(doc, nil)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := cat.PlanPublished("alice", []string{"staff"}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	saved := plan.AllTokens - plan.DirectTokens
	t.Logf("tokens of the 11 tools alice may use: %d; sent: %d; saved per tools/list: %d", plan.AllTokens, plan.DirectTokens, saved)
	if saved <= 0 {
		t.Fatalf("nothing saved: %+v", plan)
	}
	cs := connect(t, ns, "saved", aliceToken, "", nil)
	name := `toolcatalog_gateway_prompt_tokens_saved_total{catalog="` + ns + `/saved"}`
	for i := 1; i <= 2; i++ {
		listed(t, cs)
		if got := metric(t, name); len(got) != 1 || got[0] != fmt.Sprintf("%s %d", name, i*saved) {
			t.Fatalf("after %d lists: %v, want %d", i, got, i*saved)
		}
	}
}

// A view no session uses is dropped after IdleViews; one a session's
// stream uses is kept.
func TestIdleViewsAreDropped(t *testing.T) {
	ns := newNamespace(t)
	standardCatalog(t, ns, "idle", v1alpha1.DisclosureOff)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := New(ctx, Options{Kube: kube, Secrets: kube, Auth: &Authenticator{Verifiers: []Verifier{&StaticTokens{Path: staticTokens}}},
		Metrics: NewMetrics(prometheus.NewRegistry()), IdleViews: 200 * time.Millisecond, Log: logr.Discard()})
	srv := httptest.NewServer(g.Handler())
	defer srv.Close()
	key := client.ObjectKey{Namespace: ns, Name: "idle"}
	open := func(token, protocol string) *mcp.ClientSession {
		c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/" + ns + "/idle", HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}},
			&mcp.ClientSessionOptions{ProtocolVersion: protocol})
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	alice := open(aliceToken, sessionProtocol)
	defer alice.Close()
	waitFor(t, "alice's session stream", func() bool {
		g.mu.Lock()
		s := g.catalogs[key]
		g.mu.Unlock()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, v := range s.views {
			if v.streams.Load() > 0 {
				return true
			}
		}
		return false
	})
	fin := open(finToken, "")
	if got := g.Views(key); !slices.Equal(got, []string{"alice", "fin"}) {
		t.Fatalf("views %v", got)
	}
	// fin leaves; its view goes after IdleViews. alice's view is as old
	// and stays, because her session's stream uses it.
	_ = fin.Close()
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Equal(g.Views(key), []string{"alice"}) {
		if time.Now().After(deadline) {
			t.Fatalf("views %v 10s after fin left, want [alice]", g.Views(key))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if names := listed(t, alice); len(names) != 4 {
		t.Fatalf("alice's session after the sweep: %v", names)
	}
}

// A catalog no request used for IdleViews, with no view left, is let go
// (its tools and index leave memory) and followed again by the next
// request; one whose session keeps a stream open stays.
func TestIdleCatalogsAreLetGo(t *testing.T) {
	ns := newNamespace(t)
	standardCatalog(t, ns, "kept", v1alpha1.DisclosureOff)
	standardCatalog(t, ns, "idle", v1alpha1.DisclosureOff)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := prometheus.NewRegistry()
	g := New(ctx, Options{Kube: kube, Secrets: kube, Auth: &Authenticator{Verifiers: []Verifier{&StaticTokens{Path: staticTokens}}},
		Metrics: NewMetrics(reg), IdleViews: 200 * time.Millisecond, Log: logr.Discard()})
	srv := httptest.NewServer(g.Handler())
	defer srv.Close()
	open := func(name, protocol string) *mcp.ClientSession {
		c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/" + ns + "/" + name, HTTPClient: &http.Client{Transport: bearer{aliceToken, http.DefaultTransport}}},
			&mcp.ClientSessionOptions{ProtocolVersion: protocol})
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	kept, idle := client.ObjectKey{Namespace: ns, Name: "kept"}, client.ObjectKey{Namespace: ns, Name: "idle"}
	followed := func() float64 {
		g.mu.Lock()
		defer g.mu.Unlock()
		return testutil.ToFloat64(g.opts.Metrics.CatalogsFollowed)
	}
	session := open("kept", sessionProtocol)
	defer session.Close()
	waitFor(t, "the kept catalog's session stream", func() bool {
		g.mu.Lock()
		s := g.catalogs[kept]
		g.mu.Unlock()
		return s != nil && s.inUse.Load() > 0
	})
	stateless := open("idle", "")
	if names := listed(t, stateless); len(names) != 4 {
		t.Fatalf("the idle catalog's tools: %v", names)
	}
	_ = stateless.Close()
	if got := g.Followed(); !slices.Equal(got, []client.ObjectKey{idle, kept}) || followed() != 2 {
		t.Fatalf("followed %v (gauge %v), want both", got, followed())
	}
	// The idle catalog goes: proof that the sweep ran past IdleViews. The
	// kept one, as old, stays while its session's stream is open.
	waitFor(t, "the idle catalog let go", func() bool { return slices.Equal(g.Followed(), []client.ObjectKey{kept}) })
	if followed() != 1 {
		t.Fatalf("gauge %v, want 1", followed())
	}
	if names := listed(t, session); len(names) != 4 {
		t.Fatalf("the kept catalog's session after the sweep: %v", names)
	}
	// The next request follows it again.
	again := open("idle", "")
	defer again.Close()
	if names := listed(t, again); len(names) != 4 {
		t.Fatalf("the idle catalog's tools, followed again: %v", names)
	}
	if got := g.Followed(); !slices.Contains(got, idle) {
		t.Fatalf("followed %v after a request to the idle catalog", got)
	}
}

// An upstream server that accepts connections but never answers fails the
// call at the call timeout, not later, and the session pool recovers.
func TestUpstreamThatNeverAnswersTimesOut(t *testing.T) {
	ns := newNamespace(t)
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer hang.Close()
	defer close(release)
	create(t, testCatalog(ns, "hang", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOff}),
		testTool(ns, "hang", "slow_tool", "Answer very slowly.", upstream(hang.URL+"/mcp", "slow_tool")))
	published(t, ns, "hang", 1)
	cs := connect(t, ns, "hang", aliceToken, "", nil)
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		out, isErr := callTool(t, cs, "slow_tool", map[string]any{})
		if !isErr || !strings.Contains(out, "the upstream MCP server of slow_tool could not be reached") {
			t.Errorf("slow_tool: %q", out)
		}
		t.Logf("the call ended after %s: %s", time.Since(start).Round(time.Millisecond), out)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("a call to a server that never answers did not end within 30s (the suite's call timeout is 5s)")
	}
}
