package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolcatalog/tool-catalog-operator/internal/published/versions"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/manager"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/redistest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/suite"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/testenv"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// The suite runs a real kube-apiserver and etcd, a real redis-server, the
// real manager publishing catalogs, and the gateway (Run, as the binary
// runs it) on a loopback port. Clients are the MCP Go SDK's.
var (
	restConfig *rest.Config
	// metricsToken is a token of a service account that may get /metrics.
	metricsToken string
	// kubeconfig lets a gateway process reach the test API server.
	kubeconfig []byte
	kube       client.Client
	redisSrv   *redistest.Server
	// gatewayURL is the gateway's base URL, metricsURL its metrics'.
	gatewayURL, metricsURL string
	// staticTokens is the path of the suite's static tokens file.
	staticTokens string
)

// egressAllow is the suite's egress policy: test servers listen on
// 127.0.0.1, and 127.0.0.2 stands for what it denies (a metadata service,
// an internal host).
var egressAllow = []string{"127.0.0.1/32"}

// podNetworks are the suite's Pod networks, of the manager and the
// gateway alike.
var podNetworks []string

// Static tokens of the suite: alice is staff, fin is in finance.
const (
	aliceToken = "alice-7d1f0c"
	finToken   = "fin-2b9e44"
)

// shared is the API server, Redis, manager and gateway the tests share:
// the first test that needs them (newNamespace, or a call on the gateway)
// starts them, so the package's pure tests run without a cluster.
var shared = suite.New(startSuite)

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

func startSuite(onStop func(func() error)) error {
	env, cfg, err := testenv.Start(filepath.Join("..", ".."), "")
	if err != nil {
		return err
	}
	onStop(env.Stop)
	restConfig, kubeconfig = cfg, env.KubeConfig
	if redisSrv, err = redistest.Start(""); err != nil {
		return err
	}
	onStop(redisSrv.Stop)
	if kube, err = client.New(cfg, client.Options{Scheme: manager.Scheme()}); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	onStop(func() error { cancel(); return nil })
	// The suite's Pods are at this machine's address, where a serverRef
	// test's server listens: the Pod networks hold it alone.
	if addr, addrErr := testenv.PodAddress(); addrErr == nil {
		podNetworks = []string{netip.PrefixFrom(addr, 32).String()}
	}
	go func() {
		if runErr := manager.Run(ctx, cfg, manager.Config{MetricsAddr: "0", ProbeAddr: "0", LeaderElectionID: "gateway-test", SkipNameValidation: true, EgressAllow: egressAllow, PodNetworks: podNetworks}); runErr != nil {
			fmt.Fprintln(os.Stderr, "manager:", runErr)
		}
	}()
	dir, err := os.MkdirTemp("", "gateway-test")
	if err != nil {
		return err
	}
	onStop(func() error { return os.RemoveAll(dir) })
	staticTokens = filepath.Join(dir, "tokens.csv")
	if writeFileErr := os.WriteFile(staticTokens, []byte(aliceToken+",alice,1,\"staff\"\n"+finToken+",fin,2,\"finance,staff\"\n"), 0o600); writeFileErr != nil {
		return writeFileErr
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	gatewayURL = "http://" + l.Addr().String()
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	metricsURL = "http://" + ml.Addr().String()
	stopped := make(chan error, 1)
	go func() {
		stopped <- Run(ctx, cfg, Config{Listener: l, MetricsListener: ml, StaticTokens: staticTokens, EgressAllow: egressAllow, PodNetworks: podNetworks, CallTimeout: 5 * time.Second,
			// TestMostUsedToolsAreListedDirectly waits for usage to move.
			UsageInterval: 100 * time.Millisecond,
			// Tests that wait for a list to change ask again without
			// listening for list_changed: clients may not keep lists.
			// TestListsSayHowTheyMayBeKept checks the default.
			ListTTL: -1,
			// The load test sends hundreds of calls a second as alice;
			// TestLimits checks the rates on a gateway of its own.
			Limits: Limits{SearchesPerSecond: 1e6, CallsPerSecond: 1e6}, Version: "test", Log: logr.Discard()})
	}()
	onStop(func() error {
		cancel()
		select {
		case stopErr := <-stopped:
			if stopErr != nil {
				return fmt.Errorf("gateway: %w", stopErr)
			}
			return nil
		case <-time.After(20 * time.Second):
			return errors.New("the gateway did not stop within 20s of its context ending")
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, getErr := http.Get(gatewayURL + "/readyz")
		if getErr == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			return errors.New("the gateway did not become ready within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if metricsToken, err = testenv.MetricsReaderToken(ctx, cfg, "gateway-metrics-reader", true); err != nil {
		return fmt.Errorf("a token to read /metrics: %w", err)
	}
	return nil
}

func newNamespace(t testing.TB) string {
	t.Helper()
	shared.Use(t)
	return testenv.Namespace(t, kube, "gw-")
}

// testSecret is a Secret of one key that opted in to being used by
// catalogs and sources.
func testSecret(ns, name, key, value string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{v1alpha1.LabelSecret: v1alpha1.LabelSecretValue}},
		StringData: map[string]string{key: value}}
}

// testCatalog is a catalog of the tools labelled for it, published with
// the builtin providers to the suite's Redis, open to the group staff
// (alice and fin).
func testCatalog(ns, name string, d v1alpha1.DisclosureSpec) *v1alpha1.ToolCatalog {
	return &v1alpha1.ToolCatalog{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.ToolCatalogSpec{
			Selector:   metav1.LabelSelector{MatchLabels: map[string]string{"catalog": name}},
			Redis:      v1alpha1.RedisSpec{Addresses: []string{redisSrv.Addr}},
			Search:     v1alpha1.SearchSpec{AlwaysInclude: []string{"web_search"}},
			Disclosure: d,
			Gateway:    v1alpha1.GatewaySpec{AllowedPrincipals: []string{"group:staff"}},
		},
	}
}

type toolOpt func(*v1alpha1.ToolDefinition)

func allowed(principals ...string) toolOpt {
	return func(td *v1alpha1.ToolDefinition) {
		td.Spec.Permissions = &v1alpha1.ToolPermissions{AllowedPrincipals: principals}
	}
}

func params(schema string) toolOpt {
	return func(td *v1alpha1.ToolDefinition) { td.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(schema)} }
}

func upstream(url, tool string) toolOpt {
	return func(td *v1alpha1.ToolDefinition) {
		td.Spec.Source = &v1alpha1.ToolSourceReference{MCPURL: url, Tool: tool}
	}
}

func testTool(ns, catalog, name, description string, opts ...toolOpt) *v1alpha1.ToolDefinition {
	td := &v1alpha1.ToolDefinition{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: catalog + "-" + strings.ReplaceAll(name, "_", "-"), Labels: map[string]string{"catalog": catalog}},
		Spec:       v1alpha1.ToolDefinitionSpec{Name: name, Description: description},
	}
	for _, o := range opts {
		o(td)
	}
	return td
}

// standardTools are five tools: a core web_search, run_sql for finance,
// and three for everyone.
func standardTools(ns, catalog string) []client.Object {
	return []client.Object{
		testTool(ns, catalog, "web_search", "Search the web for recent information.", params(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)),
		testTool(ns, catalog, "get_weather", "Get the current weather and forecast for a city.", params(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)),
		testTool(ns, catalog, "send_email", "Send an email message to a recipient.", params(`{"type":"object","properties":{"to":{"type":"string"},"body":{"type":"string"}},"required":["to"]}`)),
		testTool(ns, catalog, "create_issue", "Open an issue in a GitHub repository.", params(`{"type":"object","properties":{"repo":{"type":"string"},"title":{"type":"string"}}}`)),
		testTool(ns, catalog, "run_sql", "Run a read-only SQL query against the finance warehouse.", params(`{"type":"object","properties":{"query":{"type":"string"}}}`), allowed("group:finance")),
	}
}

// standardCatalog creates a catalog of the standard tools with a
// disclosure mode and waits until it is published.
func standardCatalog(t *testing.T, ns, name string, mode v1alpha1.DisclosureMode) {
	t.Helper()
	create(t, testCatalog(ns, name, v1alpha1.DisclosureSpec{Mode: mode}))
	create(t, standardTools(ns, name)...)
	published(t, ns, name, 5)
}

// sourceFor is a ToolSource that imports the tools of the MCP server at
// url for the catalog of that name.
func sourceFor(ns, name, url, catalog string) *v1alpha1.ToolSource {
	return &v1alpha1.ToolSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.ToolSourceSpec{
		MCP: v1alpha1.MCPServerSpec{URL: url}, Labels: map[string]string{"catalog": catalog},
	}}
}

func create(t testing.TB, objs ...client.Object) {
	t.Helper()
	shared.Use(t)
	for _, o := range objs {
		if err := kube.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// published waits until a catalog's version in Redis holds n tools.
func published(t testing.TB, ns, name string, n int) *contract.Document {
	t.Helper()
	shared.Use(t)
	rc := redisSrv.Client()
	defer rc.Close()
	var last string
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		snap, err := contract.Read(context.Background(), rc, contract.Keys{Prefix: contract.DefaultPrefix(ns, name)})
		if err == nil {
			if d, err := snap.Document(); err == nil && d != nil {
				if len(d.Tools) == n {
					return d
				}
				last = fmt.Sprintf("version %d with %d tools", d.Version, len(d.Tools))
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("catalog %s/%s: no version with %d tools within 60s (last: %s)", ns, name, n, last)
	return nil
}

// inject publishes a catalog's next version with one more tool, straight
// into Redis, as anyone who can write there could, and announces it;
// edits, when given, change the version before it is written.
func inject(t *testing.T, ns, catalog string, tool contract.Tool, edits ...func(*contract.Document)) {
	t.Helper()
	if err := tryInject(ns, catalog, tool, edits...); err != nil {
		t.Fatal(err)
	}
}

// tryInject is inject that returns its error: a write the manager got in
// before is contract.ErrConflict.
func tryInject(ns, catalog string, tool contract.Tool, edits ...func(*contract.Document)) error {
	return write(ns, catalog, tool, true, edits...)
}

// injectQuietly is inject with no notice: a replica learns of the version
// only by reading Redis.
func injectQuietly(t *testing.T, ns, catalog string, tool contract.Tool) {
	t.Helper()
	if err := write(ns, catalog, tool, false); err != nil {
		t.Fatal(err)
	}
}

// write writes a catalog's next version with tool, announced when notify.
func write(ns, catalog string, tool contract.Tool, notify bool, edits ...func(*contract.Document)) error {
	ctx := context.Background()
	rc := redisSrv.Client()
	defer rc.Close()
	keys := contract.Keys{Prefix: contract.DefaultPrefix(ns, catalog)}
	snap, err := contract.Read(ctx, rc, keys)
	if err != nil {
		return err
	}
	prev, err := snap.Document()
	if err != nil || prev == nil {
		return fmt.Errorf("reading %s/%s: %v", ns, catalog, err)
	}
	if tool, err = contract.NormalizeTool(tool); err != nil {
		return err
	}
	next := *prev
	next.Version++
	// A tool of the same name is replaced: a document lists each name
	// once.
	next.Tools = append(slices.DeleteFunc(slices.Clone(prev.Tools), func(t contract.Tool) bool { return t.Name == tool.Name }), tool)
	for _, edit := range edits {
		edit(&next)
	}
	if err := next.Seal(); err != nil {
		return err
	}
	if err := versions.Write(ctx, rc, keys, versions.Update{ExpectVersion: prev.Version, Document: &next, Previous: prev, Retain: 5}); err != nil || !notify {
		return err
	}
	// Announced as the catalog's own, whatever the head says.
	n := contract.NoticeOf(&next)
	n.Catalog = ns + "/" + catalog
	notice, _ := json.Marshal(n)
	return versions.Notify(ctx, rc, contract.DefaultChannel, notice)
}

// waitFor polls cond until it holds, failing the test after 60s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, what, 60*time.Second, cond)
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.base.RoundTrip(r)
}

// connect opens an MCP session with the gateway's endpoint of a catalog.
func connect(t *testing.T, ns, catalog, token, query string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	shared.Use(t)
	return connectAt(t, gatewayURL, ns, catalog, token, query, opts)
}

// connectAt connects to the endpoint of a catalog at the gateway of base
// with the SDK's latest protocol (2026-07-28: no session).
func connectAt(t testing.TB, base, ns, catalog, token, query string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return connectWith(t, base, ns, catalog, token, query, opts, "")
}

// sessionProtocol is the latest protocol with sessions.
const sessionProtocol = "2025-11-25"

// connectSession opens an MCP session (protocol 2025-11-25) with the
// endpoint of a catalog at the gateway of base.
func connectSession(t *testing.T, base, ns, catalog, token string) *mcp.ClientSession {
	t.Helper()
	cs := connectWith(t, base, ns, catalog, token, "", nil, sessionProtocol)
	if cs.ID() == "" {
		t.Fatal("the gateway gave the session no ID")
	}
	return cs
}

// connectWith connects with a protocol version, the SDK's latest when
// empty.
func connectWith(t testing.TB, base, ns, catalog, token, query string, opts *mcp.ClientOptions, protocol string) *mcp.ClientSession {
	t.Helper()
	endpoint := fmt.Sprintf("%s/mcp/%s/%s%s", base, ns, catalog, query)
	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, opts)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: protocol})
	if err != nil {
		t.Fatalf("connecting to %s: %v", endpoint, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// initialize posts an MCP initialize request to the suite's gateway and
// returns the status, headers and body.
func initialize(t *testing.T, path, auth string) (int, http.Header, string) {
	t.Helper()
	shared.Use(t)
	req, _ := http.NewRequest(http.MethodPost, gatewayURL+path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(body)
}

func listed(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// callTool calls a tool and returns its text and whether it is an error.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("calling %s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

// searchResult is tool_search's answer.
type searchResult struct {
	Tools []struct {
		Name, Toolset, Description string
	} `json:"tools"`
	TotalAvailable int    `json:"total_available"`
	Message        string `json:"message"`
}

func search(t *testing.T, cs *mcp.ClientSession, query string) searchResult {
	t.Helper()
	out, isErr := callTool(t, cs, "tool_search", map[string]any{"query": query})
	var r searchResult
	if isErr || json.Unmarshal([]byte(out), &r) != nil {
		t.Fatalf("tool_search %q: %s", query, out)
	}
	return r
}

func (r searchResult) names() []string {
	var out []string
	for _, tool := range r.Tools {
		out = append(out, tool.Name)
	}
	return out
}

// metric returns the gateway's /metrics lines that start with prefix.
func metric(t *testing.T, prefix string) []string {
	t.Helper()
	shared.Use(t)
	req, _ := http.NewRequest(http.MethodGet, metricsURL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+metricsToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, body)
	}
	var out []string
	for line := range strings.Lines(string(body)) {
		if strings.HasPrefix(line, prefix) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	slices.Sort(out)
	return out
}
