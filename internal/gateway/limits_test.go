package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/egress"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/mcptest"
)

// ownGateway serves the suite's catalogs with other limits, on a loopback
// port of its own; it returns the gateway and its base URL.
func ownGateway(t testing.TB, limits Limits, edits ...func(*Options)) (*Gateway, string) {
	t.Helper()
	shared.Use(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	policy, err := egress.New(egressAllow)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Kube: kube, Secrets: kube, Auth: &Authenticator{Verifiers: []Verifier{&StaticTokens{Path: staticTokens}}},
		Metrics: NewMetrics(prometheus.NewRegistry()), Egress: policy, Limits: limits, CallTimeout: 5 * time.Second, ListTTL: -1, Log: logr.Discard()}
	for _, edit := range edits {
		edit(&opts)
	}
	g := New(ctx, opts)
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	return g, srv.URL
}

// What one client can make the gateway do is bounded: the body of a
// request, the query a search reads, the result an upstream may send
// back, the sessions a principal may hold and how long they live, the
// views its windows make, and its rate of calls.
func TestLimits(t *testing.T) {
	ns := newNamespace(t)
	huge := mcptest.New(t, mcptest.Options{Name: "huge"})
	huge.AddTool(&mcp.Tool{Name: "dump", Description: "Dump everything.", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", 6<<20)}}}, nil
		})
	create(t, testCatalog(ns, "bounded", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOn}))
	create(t, standardTools(ns, "bounded")...)
	huge.AddTool(&mcp.Tool{Name: "items", Description: "List n items.", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct{ N int }
			_ = json.Unmarshal(req.Params.Arguments, &args)
			items := make([]map[string]int, args.N)
			for i := range items {
				items[i] = map[string]int{"a": 1}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "items"}}, StructuredContent: map[string]any{"items": items}}, nil
		})
	create(t, testTool(ns, "bounded", "dump", "Dump everything the server has.", upstream(huge.URL, "dump")),
		testTool(ns, "bounded", "items", "List items of the server.", upstream(huge.URL, "items")))
	published(t, ns, "bounded", 7)
	g, base := ownGateway(t, Limits{RequestBytes: 64 << 10, SessionsPerPrincipal: 2, CallsPerSecond: 1, SearchesPerSecond: 1000,
		SessionLifetime: time.Hour, UpstreamResultBytes: 1 << 20})

	t.Run("request body", func(t *testing.T) {
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"` + strings.Repeat("a", 70<<10) + `"}}`
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp/"+ns+"/bounded", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("a 70 KiB body: %d, want 413", resp.StatusCode)
		}
	})

	t.Run("request nesting", func(t *testing.T) {
		// 30,000 levels fit the 64 KiB body; the MCP SDK's decoder would
		// recurse through each.
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":` + strings.Repeat("[", 30000) + strings.Repeat("]", 30000) + `}}`
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp/"+ns+"/bounded", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(answer), "nests deeper than 10000 levels") {
			t.Fatalf("a body nested 30,000 deep: %d %.200s, want the gateway's 400", resp.StatusCode, answer)
		}
	})

	cs := connectAt(t, base, ns, "bounded", aliceToken, "", nil)
	t.Run("search query", func(t *testing.T) {
		// Fits the 64 KiB body; only the first 2 KiB are searched.
		query := "weather forecast for a city " + strings.Repeat("and more words ", 60<<10/15)
		out, isErr := callTool(t, cs, "tool_search", map[string]any{"query": query})
		if isErr || !strings.Contains(out, "get_weather") {
			t.Fatalf("a 60 KiB query: %.200s", out)
		}
	})

	t.Run("upstream result", func(t *testing.T) {
		out, isErr := callTool(t, cs, "tool_call", map[string]any{"name": "dump"})
		if !isErr || out != fmt.Sprintf("the upstream MCP server of dump answered with more than %d bytes or %d JSON values, more than the gateway passes on", 1<<20, DefaultLimits.UpstreamResultValues) {
			t.Fatalf("a 6 MiB result: %.300s", out)
		}
	})

	t.Run("upstream values", func(t *testing.T) {
		// Under 1 MiB, but 100,000 small objects: decoded, a result of
		// 4 MiB of them took 100 MiB of the gateway. 1,000 pass.
		for _, n := range []int{1_000, 100_000} {
			out, isErr := callTool(t, cs, "tool_call", map[string]any{"name": "items", "arguments": map[string]any{"n": n}})
			if refused := isErr && strings.Contains(out, "JSON values, more than the gateway passes on"); refused != (n > 1_000) {
				t.Fatalf("a result of %d objects: %.300s (error %v)", n, out, isErr)
			}
		}
	})

	t.Run("call rate", func(t *testing.T) {
		// The budget is 1 call a second with a burst of 3: the fourth
		// call in a row is refused with Retry-After (dump used one).
		var last error
		for range 4 {
			_, last = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "web_search", Arguments: map[string]any{"query": "news"}})
		}
		if last == nil || !strings.Contains(last.Error(), "Too Many Requests") {
			t.Fatalf("the fourth call in a row: %v", last)
		}
		// Searches have their own budget.
		if _, isErr := callTool(t, cs, "tool_search", map[string]any{"query": "send an email"}); isErr {
			t.Fatal("a search was refused with the calls")
		}
	})

	t.Run("sessions per principal", func(t *testing.T) {
		connectSession(t, base, ns, "bounded", aliceToken)
		second := connectSession(t, base, ns, "bounded", aliceToken)
		c := mcp.NewClient(&mcp.Implementation{Name: "third", Version: "1"}, nil)
		_, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp/" + ns + "/bounded",
			HTTPClient: &http.Client{Transport: bearer{aliceToken, http.DefaultTransport}}, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: sessionProtocol})
		if err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
			t.Fatalf("a third session: %v", err)
		}
		// The share is the principal's across replicas: a second
		// gateway on the same Redis refuses a third session too.
		_, other := ownGateway(t, Limits{SessionsPerPrincipal: 2})
		if _, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: other + "/mcp/" + ns + "/bounded",
			HTTPClient: &http.Client{Transport: bearer{aliceToken, http.DefaultTransport}}, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: sessionProtocol}); err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
			t.Fatalf("a third session at another replica: %v", err)
		}
		// Clients without sessions (2026-07-28) are not counted.
		connectAt(t, base, ns, "bounded", aliceToken, "", nil)
		// Another principal has its own share, and a closed session
		// frees a place.
		connectSession(t, base, ns, "bounded", finToken)
		if err := second.Close(); err != nil {
			t.Fatal(err)
		}
		connectSession(t, base, ns, "bounded", aliceToken)
	})

	t.Run("windows", func(t *testing.T) {
		for _, w := range []int{1000, 1500, 1999, 2000, 3000, 100_000, 130_000, 50_000_000} {
			c := mcp.NewClient(&mcp.Implementation{Name: "w", Version: "1"}, nil)
			cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: fmt.Sprintf("%s/mcp/%s/bounded?contextWindow=%d", base, ns, w),
				HTTPClient: &http.Client{Transport: bearer{finToken, http.DefaultTransport}}, MaxRetries: -1}, nil)
			if err != nil {
				t.Fatalf("window %d: %v", w, err)
			}
			_ = cs.Close()
		}
		// fin's windows fall in 1000, 2000, 64000, 128000 and the
		// largest bucket, besides its window-less view.
		n := 0
		for _, u := range g.Views(client.ObjectKey{Namespace: ns, Name: "bounded"}) {
			if u == "fin" {
				n++
			}
		}
		if n != 6 {
			t.Fatalf("fin has %d views, want 6", n)
		}
	})
}

// A session that sends nothing for SessionIdle is closed, and so is a
// busy one at SessionLifetime; their IDs are then refused.
func TestSessionsExpire(t *testing.T) {
	ns := newNamespace(t)
	standardCatalog(t, ns, "expiring", v1alpha1.DisclosureOff)
	for _, tt := range []struct {
		name   string
		limits Limits
		busy   bool
	}{
		{"idle", Limits{SessionIdle: 500 * time.Millisecond}, false},
		{"lifetime", Limits{SessionLifetime: time.Second}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g, base := ownGateway(t, tt.limits)
			cs := connectSession(t, base, ns, "expiring", aliceToken)
			key := client.ObjectKey{Namespace: ns, Name: "expiring"}
			g.mu.Lock()
			s := g.catalogs[key]
			g.mu.Unlock()
			if open, err := s.sessions.exists(context.Background(), cs.ID()); err != nil || !open {
				t.Fatalf("the session is not kept in Redis: %v", err)
			}
			waitFor(t, "the session to close", func() bool {
				if tt.busy {
					if _, err := cs.ListTools(context.Background(), nil); err != nil {
						return true
					}
				}
				open, err := s.sessions.exists(context.Background(), cs.ID())
				return err == nil && !open
			})
			// Its ID is refused, as the protocol asks: 404, so that the
			// client opens a new session.
			if code, _ := postSession(t, base, ns, "expiring", cs.ID(), `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`); code != http.StatusNotFound {
				t.Fatalf("the expired session: %d, want 404", code)
			}
		})
	}
}

// Upstream sessions, compiled schemas and resolved settings no call used
// for a while are dropped: what the gateway holds follows use.
func TestUpstreamCachesAreSwept(t *testing.T) {
	ns := newNamespace(t)
	srv := mcptest.New(t, mcptest.Options{Name: "echo"})
	srv.Tool("echo", "Echo the arguments.", nil, nil)
	create(t, testCatalog(ns, "swept", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOff}),
		testTool(ns, "swept", "echo", "Echo the arguments.", upstream(srv.URL, "echo")))
	published(t, ns, "swept", 1)
	g, base := ownGateway(t, Limits{}, func(o *Options) { o.IdleViews = 200 * time.Millisecond })
	cs := connectAt(t, base, ns, "swept", aliceToken, "", nil)
	if out, isErr := callTool(t, cs, "echo", map[string]any{}); isErr {
		t.Fatal(out)
	}
	if sessions, schemas, _ := g.up.sizes(); sessions != 1 || schemas != 1 {
		t.Fatalf("after a call: %d sessions, %d schemas", sessions, schemas)
	}
	waitFor(t, "the idle upstream session and schema to go", func() bool {
		sessions, schemas, _ := g.up.sizes()
		return sessions == 0 && schemas == 0
	})
	// A later call connects again.
	if out, isErr := callTool(t, cs, "echo", map[string]any{}); isErr || srv.Calls() != 2 {
		t.Fatalf("a call after the sweep: %q, upstream calls %d", out, srv.Calls())
	}
}

// A session has one notification stream on a replica: a second GET ends
// the first, so a client cannot hold the gateway's resources by opening
// stream after stream.
func TestOneStreamPerSession(t *testing.T) {
	ns := newNamespace(t)
	standardCatalog(t, ns, "streams", v1alpha1.DisclosureOff)
	code, header, body := initialize(t, "/mcp/"+ns+"/streams", "Bearer "+aliceToken)
	id := header.Get("Mcp-Session-Id")
	if code != http.StatusOK || id == "" {
		t.Fatalf("initialize: %d, session %q: %s", code, id, body)
	}
	open := func(ctx context.Context) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, gatewayURL+"/mcp/"+ns+"/streams", nil)
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET stream: %v %v", err, resp)
		}
		return resp
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	first := open(ctx)
	defer first.Body.Close()
	// The priming event arrives, then the stream stays open.
	line, err := bufio.NewReader(first.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "id: ") {
		t.Fatalf("the first stream's first line: %q %v", line, err)
	}
	second := open(ctx)
	defer second.Body.Close()
	if _, err := io.Copy(io.Discard, first.Body); err != nil {
		t.Fatalf("the first stream did not end when the second opened: %v", err)
	}
}

// The gateway counts the calls of a body as the SDK reads it, so a body
// two readers could read differently is refused before it is counted or
// run. A member "PARAMS" made encoding/json, which matches names whatever
// their case, fail on the body and count no call, while the SDK, which
// matches by case, ran the call: every such call passed the rate limit.
// The same call without it, sent the same way, runs.
func TestOneReadingOfARequest(t *testing.T) {
	ns := newNamespace(t)
	srv := mcptest.New(t, mcptest.Options{Name: "search"})
	srv.Tool("web_search", "Search the web.", nil, nil)
	create(t, testCatalog(ns, "read", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOff}),
		testTool(ns, "read", "web_search", "Search the web for recent information.", upstream(srv.URL, "web_search")))
	published(t, ns, "read", 1)
	_, base := ownGateway(t, Limits{CallsPerSecond: 0.001, SearchesPerSecond: 1000})
	cs := connectSession(t, base, ns, "read", aliceToken)
	call := func(id int, extra string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"web_search","arguments":{"query":"news"}}%s}`, id, extra)
	}
	for i, extra := range []string{`,"PARAMS":0`, `,"Params":{"name":"tool_search"}`, `,"params":{"name":"web_search"}`, `,"Method":"ping"`, ` {}`} {
		code, out := postSession(t, base, ns, "read", cs.ID(), call(i+10, extra))
		if code != http.StatusBadRequest || !strings.Contains(out, "the request body is refused: ambiguous or malformed JSON-RPC body") {
			t.Fatalf("a call with %s: %d %.300s; want 400", extra, code, out)
		}
	}
	if n := srv.Calls(); n != 0 {
		t.Fatalf("ambiguous bodies reached the upstream: %d calls", n)
	}
	code, out := postSession(t, base, ns, "read", cs.ID(), call(1, ""))
	if code != http.StatusOK || srv.Calls() != 1 {
		t.Fatalf("the plain call: %d %.300s, %d upstream calls", code, out, srv.Calls())
	}
}

// The subscriptions/listen streams a replica holds are bounded per
// principal and in all: each is a request held open with its goroutines,
// and one anonymous client held 2,000 of them. The SDK's client opens
// one as it connects and does not fail the connection when it is
// refused, so the refusals are read from the gateway's count of them. A
// stream closed frees its place.
func TestListenStreamsAreBounded(t *testing.T) {
	ns := newNamespace(t)
	create(t, testCatalog(ns, "listen", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOff}),
		testTool(ns, "listen", "web_search", "Search the web for recent information."))
	published(t, ns, "listen", 1)
	g, base := ownGateway(t, Limits{ListensPerPrincipal: 2, Listens: 3})
	refusals := g.opts.Metrics.Rejected.WithLabelValues("rate_limited")
	open := func() int {
		g.listens.mu.Lock()
		defer g.listens.mu.Unlock()
		return g.listens.count
	}
	listen := func(token string, wantOpen int, wantRefused float64) *mcp.ClientSession {
		t.Helper()
		before := testutil.ToFloat64(refusals)
		c := mcp.NewClient(&mcp.Implementation{Name: "listener", Version: "1"}, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {}})
		cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp/" + ns + "/listen",
			HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		waitFor(t, fmt.Sprintf("%d streams open and %v refused", wantOpen, wantRefused), func() bool {
			return open() == wantOpen && testutil.ToFloat64(refusals)-before == wantRefused
		})
		return cs
	}
	first := listen(aliceToken, 1, 0)
	listen(aliceToken, 2, 0)
	listen(aliceToken, 2, 1) // alice's third
	listen(finToken, 3, 0)
	listen(finToken, 3, 1) // the replica's fourth
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "alice's closed stream to free its place", func() bool { return open() == 2 })
	listen(aliceToken, 3, 0)
}
