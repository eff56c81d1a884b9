package gateway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/mcptest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/testenv"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// replica is one gateway process.
type replica struct {
	addr string
	cmd  *exec.Cmd
	done chan struct{}
	out  *bytes.Buffer
}

// startReplica runs the gateway binary on addr and waits until it is
// ready.
func startReplica(t *testing.T, bin, kubeconfigPath, addr string) *replica {
	t.Helper()
	shared.Use(t)
	cmd := exec.Command(bin, "--kubeconfig", kubeconfigPath, "--bind-address", addr, "--metrics-bind-address", "0",
		"--static-tokens", staticTokens, "--egress-allow", strings.Join(egressAllow, ","), "--shutdown-delay", "300ms",
		"--searches-per-second", "1000", "--calls-per-second", "1000", "--audit=false",
		// A 2026-07-28 client keeps a list this long (ttlMs): it has no
		// stream for notifications/tools/list_changed.
		"--list-ttl", "1s")
	r := &replica{addr: addr, cmd: cmd, done: make(chan struct{}), out: &bytes.Buffer{}}
	cmd.Stdout, cmd.Stderr = r.out, r.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-r.done
	})
	waitFor(t, "gateway replica "+addr+" to be ready", func() bool {
		select {
		case <-r.done:
			t.Fatalf("replica %s exited: %s", addr, r.out)
		default:
		}
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return r
}

// inService takes a backend out of service or puts it back.
func (rr *roundRobin) inService(backend string, in bool) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	rr.out[backend] = !in
}

// stop asks the replica to stop, as Kubernetes does, and waits until it
// has.
func (r *replica) stop(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("replica %s did not stop within 60s of SIGTERM", r.addr)
	}
	if code := r.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("replica %s exited with %d: %s", r.addr, code, r.out)
	}
}

// roundRobin sends each request to the next backend in service, as a
// Service without session affinity does: a replica that is stopping is
// taken out first, as Kubernetes takes a terminating pod's endpoint out,
// and one that refuses connections is skipped. It counts the requests of
// each MCP session per backend.
type roundRobin struct {
	backends []string
	next     atomic.Uint64
	mu       sync.Mutex
	out      map[string]bool           // backends out of service
	sessions map[string]map[string]int // session → backend → requests
	failed   []string                  // what failed past a dial, and the GET streams
}

func (rr *roundRobin) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
	}
	var last error
	for range 2 * len(rr.backends) {
		backend := rr.backends[rr.next.Add(1)%uint64(len(rr.backends))]
		rr.mu.Lock()
		out := rr.out[backend]
		rr.mu.Unlock()
		if out {
			continue
		}
		sent := req.Clone(req.Context())
		sent.URL.Host, sent.Host = backend, backend
		// Replayable, as a client's is: a request on a kept-alive
		// connection the replica closed as it stopped is sent again.
		sent.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		sent.Body, _ = sent.GetBody()
		sent.ContentLength = int64(len(body))
		resp, err := http.DefaultTransport.RoundTrip(sent)
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			last = err
			continue
		}
		if err != nil {
			rr.mu.Lock()
			rr.failed = append(rr.failed, fmt.Sprintf("%s %s: %v", req.Method, backend, err))
			rr.mu.Unlock()
		}
		if id := req.Header.Get("Mcp-Session-Id"); err == nil && id != "" {
			rr.mu.Lock()
			if rr.sessions[id] == nil {
				rr.sessions[id] = map[string]int{}
			}
			rr.sessions[id][backend]++
			if req.Method == http.MethodGet {
				rr.failed = append(rr.failed, fmt.Sprintf("GET %s: %d", backend, resp.StatusCode))
			}
			rr.mu.Unlock()
		}
		return resp, err
	}
	return nil, last
}

// Two gateway processes behind a round-robin proxy with no affinity
// serve a 2025-11-25 session and a 2026-07-28 client for many requests,
// each search and call landing on either replica, while one replica is
// restarted midway: no call fails, the session is served by both
// replicas before and after, the request behind each call is learned
// whichever replica saw its search, a new tool reaches both clients as
// notifications/tools/list_changed after the restart, and a cancellation
// sent to one replica cancels the call running on the other.
func TestAnyReplicaServesAnyClient(t *testing.T) {
	ns := newNamespace(t)
	srv := mcptest.New(t, mcptest.Options{Name: "weather"})
	srv.Tool("get_weather", "Get the current weather and the forecast for a city.",
		map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}, nil)
	started, cancelled := make(chan struct{}, 1), make(chan struct{}, 1)
	srv.AddTool(&mcp.Tool{Name: "export_archive", Description: "Export the whole archive; takes hours.", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			started <- struct{}{}
			select {
			case <-ctx.Done():
				cancelled <- struct{}{}
				return nil, ctx.Err()
			case <-time.After(time.Minute):
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "exported"}}}, nil
			}
		})
	tc := testCatalog(ns, "shared", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOn})
	tc.Spec.Learning = v1alpha1.LearningSpec{Enabled: true}
	create(t, tc,
		testTool(ns, "shared", "get_weather", "Get the current weather and the forecast for a city.",
			params(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`), upstream(srv.URL, "get_weather")),
		testTool(ns, "shared", "export_archive", "Export the whole archive as one file; takes hours.", upstream(srv.URL, "export_archive")),
		testTool(ns, "shared", "web_search", "Search the web for recent information."),
		testTool(ns, "shared", "send_email", "Send an email message to a recipient."))
	published(t, ns, "shared", 4)

	bin := testenv.Build(t, "../../cmd/toolcatalog-gateway")
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	addrs := []string{testenv.FreeAddr(t), testenv.FreeAddr(t)}
	replicas := []*replica{startReplica(t, bin, kc, addrs[0]), startReplica(t, bin, kc, addrs[1])}
	rr := &roundRobin{backends: addrs, sessions: map[string]map[string]int{}, out: map[string]bool{}}
	proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.Out.URL.Scheme, r.Out.URL.Host = "http", "backend" },
		Transport: rr, FlushInterval: -1})
	// Closed after the clients (cleanups run last first): it waits for
	// their streams.
	t.Cleanup(proxy.Close)

	// The session's stream of notifications moves to the other replica
	// when its replica stops. (A 2026-07-28 client's subscriptions/listen
	// stream ends there too, and the SDK's client does not open it again,
	// so that client is not asked to follow notifications here.)
	changed := make(chan struct{}, 16)
	open := func(name, token, protocol string) *mcp.ClientSession {
		opts := &mcp.ClientOptions{}
		if protocol == sessionProtocol {
			opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }
		}
		c := mcp.NewClient(&mcp.Implementation{Name: "replicas-" + name, Version: "1"}, opts)
		cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: proxy.URL + "/mcp/" + ns + "/shared",
			HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
		if err != nil {
			t.Fatalf("connecting %s: %v", name, err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	// Two principals: each one's learning rate is its own.
	clients := map[string]*mcp.ClientSession{"session": open("session", aliceToken, sessionProtocol), "latest": open("latest", finToken, "")}
	if clients["session"].ID() == "" || clients["latest"].ID() != "" {
		t.Fatalf("session IDs %q and %q: want one for 2025-11-25 only", clients["session"].ID(), clients["latest"].ID())
	}

	// Each client searches and calls; halfway, replica 0 is restarted.
	const rounds = 40
	var (
		mu       sync.Mutex
		failures []string
		calls    atomic.Int64
	)
	var halfway sync.WaitGroup
	halfway.Add(len(clients))
	restarted := make(chan struct{})
	var wg sync.WaitGroup
	for name, cs := range clients {
		wg.Go(func() {
			fail := func(format string, args ...any) {
				mu.Lock()
				failures = append(failures, name+": "+fmt.Sprintf(format, args...))
				mu.Unlock()
			}
			for i := range rounds {
				if i == rounds/4 {
					halfway.Done()
				}
				if i == 3*rounds/4 {
					<-restarted
				}
				query := fmt.Sprintf("weather forecast for city %d from %s", i, name)
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "tool_search", Arguments: map[string]any{"query": query}})
				if err != nil || res.IsError {
					fail("round %d search: %v %v", i, err, res)
					continue
				}
				res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "tool_call", Arguments: map[string]any{"name": "get_weather", "arguments": map[string]any{"city": "Oslo"}}})
				if err != nil || res.IsError {
					fail("round %d call: %v %v", i, err, res)
					continue
				}
				calls.Add(1)
			}
		})
	}
	halfway.Wait()
	began := time.Now()
	rr.inService(addrs[0], false)
	replicas[0].stop(t)
	stopped := time.Since(began)
	replicas[0] = startReplica(t, bin, kc, addrs[0])
	rr.inService(addrs[0], true)
	t.Logf("replica 0 restarted: stopped %s after SIGTERM, serving again %s after it", stopped.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	close(restarted)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d of %d calls failed: %s; at the proxy: %v", len(failures), 2*rounds, strings.Join(failures, "; "), rr.failed)
	}
	rr.mu.Lock()
	perReplica := rr.sessions[clients["session"].ID()]
	rr.mu.Unlock()
	t.Logf("%d searches and %d calls, 0 failed; the session's requests per replica: %v", 2*rounds, calls.Load(), perReplica)
	for _, a := range addrs {
		if perReplica[a] < 10 {
			t.Fatalf("the session's requests per replica: %v; want both to serve it", perReplica)
		}
	}

	// The first calls' requests were recorded (later ones are past the
	// principal's learning rate), each once and with its own search,
	// though a search and its call were answered by different replicas
	// half the time.
	rc := redisSrv.Client()
	defer rc.Close()
	keys := contract.Keys{Prefix: contract.DefaultPrefix(ns, "shared")}
	for _, name := range []string{"session", "latest"} {
		for i := range 3 {
			member := fmt.Sprintf(`["get_weather","weather forecast for city %d from %s"]`, i, name)
			if n := rc.ZScore(t.Context(), keys.Requests(), member).Val(); n != 1 {
				t.Fatalf("request %s recorded %v times, want 1", member, n)
			}
		}
	}

	// A new tool reaches the session as notifications/tools/list_changed,
	// whichever replica holds its stream now, and both clients list it.
	for len(changed) > 0 {
		<-changed
	}
	// Always included: listed directly, though the catalog discloses
	// the others progressively.
	translate := testTool(ns, "shared", "translate_text", "Translate text between languages.")
	translate.Spec.AlwaysInclude = true
	create(t, translate)
	// A notice of an earlier version may still be on its way: each notice
	// is followed by a listing, until both list the new tool. The client
	// without a stream lists again once its list's ttlMs has passed.
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for seen := map[string][]string{}; ; {
		select {
		case <-changed:
		case <-tick.C:
			if slices.Contains(seen["session"], "translate_text") {
				break // the session's list, cached, is current already
			}
			continue
		case <-deadline:
			t.Fatalf("no notifications/tools/list_changed with the new tool within 30s (listed: %v); the session's streams at the proxy: %v", seen, rr.failed)
		}
		for name, cs := range clients {
			seen[name] = listed(t, cs)
		}
		if slices.Contains(seen["session"], "translate_text") && slices.Contains(seen["latest"], "translate_text") {
			break
		}
	}

	// A call runs on one replica; its cancellation reaches the other.
	cs := clients["session"]
	body := `{"jsonrpc":"2.0","id":"long-1","method":"tools/call","params":{"name":"tool_call","arguments":{"name":"export_archive"}}}`
	callDone := make(chan int, 1)
	go func() {
		code, _ := postSession(t, "http://"+addrs[0], ns, "shared", cs.ID(), body)
		callDone <- code
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the long call did not reach the upstream")
	}
	if code, out := postSession(t, "http://"+addrs[1], ns, "shared", cs.ID(), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"long-1"}}`); code != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: %d %s", code, out)
	}
	select {
	case <-cancelled:
	case <-time.After(30 * time.Second):
		t.Fatal("cancelled at replica 1, the call running at replica 0 was not cancelled")
	}
	<-callDone
	for _, r := range replicas {
		r.stop(t)
	}
}

// postSession posts a JSON-RPC message in a session, as alice, to the
// catalog's endpoint at base, and returns the status and body.
func postSession(t *testing.T, base, ns, catalog, session, body string) (int, string) {
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp/"+ns+"/"+catalog, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", sessionProtocol)
	req.Header.Set("Mcp-Session-Id", session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// A stopping gateway still answers a request sent on a connection kept
// alive from before, as a proxy that picked the replica a moment before
// it was taken out of service sends one, and closes the connection after
// that answer, so the client's next request opens a new one to a replica
// still in service. Closing the idle connection at SIGTERM instead would
// reset the request, and a POST so reset is not sent again.
func TestStoppingGatewayAnswersOnKeptAliveConnections(t *testing.T) {
	shared.Use(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + l.Addr().String()
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	stopped := make(chan error, 1)
	go func() {
		stopped <- Run(ctx, restConfig, Config{Listener: l, StaticTokens: staticTokens, EgressAllow: egressAllow,
			ShutdownDelay: 5 * time.Second, Log: logr.Discard()})
	}()
	status := func() int {
		resp, getErr := http.Get(base + "/readyz")
		if getErr != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	waitFor(t, "the gateway to be ready", func() bool { return status() == http.StatusOK })

	conn, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	post := func() (*http.Response, error) {
		if _, writeStringErr := io.WriteString(conn, "POST /mcp/default/catalog HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"); writeStringErr != nil {
			return nil, writeStringErr
		}
		resp, readResponseErr := http.ReadResponse(br, nil)
		if readResponseErr != nil {
			return nil, readResponseErr
		}
		_, readResponseErr = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp, readResponseErr
	}
	resp, err := post()
	if err != nil {
		t.Fatal(err)
	}
	if resp.Close {
		t.Fatalf("a serving gateway closed the connection after its answer (%s)", resp.Status)
	}

	stop()
	waitFor(t, "the stopping gateway to be unready", func() bool { return status() == http.StatusServiceUnavailable })
	select {
	case stopErr := <-stopped:
		t.Fatalf("the gateway stopped before the shutdown delay had passed: %v", stopErr)
	default:
	}
	resp, err = post()
	if err != nil {
		t.Fatalf("a request on a connection kept alive from before the stop: %v; want an answer", err)
	}
	if !resp.Close {
		t.Fatalf("the stopping gateway answered %s and kept the connection open; want it closed after the answer", resp.Status)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("reading the connection after the answer: %v; want it closed (EOF)", err)
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the gateway did not stop within 30s of the shutdown delay")
	}
}

// A listing is never older than the version Redis serves: a replica whose
// notice of a version has not come (here there is none: the version is
// written without one) lists that version all the same when asked, as a
// client told of the change by another replica asks.
func TestAListIsNeverOlderThanTheVersionServed(t *testing.T) {
	ns := newNamespace(t)
	create(t, testCatalog(ns, "quiet", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOff}), testTool(ns, "quiet", "get_weather", "Weather forecast for a city."))
	published(t, ns, "quiet", 1)
	cs := connect(t, ns, "quiet", aliceToken, "", nil)
	if got := listed(t, cs); !slices.Equal(got, []string{"get_weather"}) {
		t.Fatalf("listed %v; want [get_weather]", got)
	}
	injectQuietly(t, ns, "quiet", contract.Tool{Name: "translate_text", Description: "Translate text between languages.", Parameters: []byte(`{"type":"object"}`)})
	if got := listed(t, cs); !slices.Contains(got, "translate_text") {
		t.Fatalf("listed %v right after a version written without a notice; want the version Redis serves", got)
	}
}
