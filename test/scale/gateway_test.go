package scale

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/mcpload"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/mcptest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/testenv"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// The gateway shape: one gateway process serving many catalogs, each
// with its own tools (one of them, get_weather, proxied to an upstream MCP
// server), to clients spread over them. Each client is its own principal,
// connects to each of its catalogs (with the protocol of
// -scale.gateway-protocol) and goes round them doing tool_search then
// tool_call. Two more clients hold sessions (protocol 2025-11-25, so
// list_changed reaches them) on the catalog whose tool is edited.
var (
	gwCatalogsFlag   = flag.Int("scale.gateway-catalogs", 4, "catalogs one gateway serves in the gateway shape")
	gwToolsFlag      = flag.Int("scale.gateway-tools", 10, "tools of each catalog of the gateway shape")
	gwNamespacesFlag = flag.Int("scale.gateway-namespaces", 2, "namespaces the gateway shape spreads its catalogs over")
	gwClientsFlag    = flag.Int("scale.gateway-clients", 4, "concurrent MCP clients of the gateway shape, spread over its catalogs")
	gwDurationFlag   = flag.Duration("scale.gateway-duration", 3*time.Second, "how long the gateway shape's clients search and call")
	gwProtocolFlag   = flag.String("scale.gateway-protocol", sessionProtocol, "MCP protocol of the gateway shape's clients: 2025-11-25 for a session per client and catalog, or empty for the SDK's latest (2026-07-28, no session)")
)

// sessionProtocol is the latest protocol with sessions, which carry
// notifications/tools/list_changed to the client that holds one.
const sessionProtocol = "2025-11-25"

// TestGatewayManyCatalogs measures the gateway shape: throughput and
// latency of search+call, the gateway's CPU and peak resident set, and how
// soon a new version of one catalog reaches its sessions
// (notifications/tools/list_changed) while the others are under load.
func TestGatewayManyCatalogs(t *testing.T) {
	catalogs, tools, clients := *gwCatalogsFlag, *gwToolsFlag, *gwClientsFlag
	if catalogs < 1 || tools < 2 || clients < 1 || *gwNamespacesFlag < 1 {
		t.Fatalf("-scale.gateway-catalogs=%d -scale.gateway-tools=%d -scale.gateway-clients=%d -scale.gateway-namespaces=%d: want at least one catalog, two tools, one client and one namespace",
			catalogs, tools, clients, *gwNamespacesFlag)
	}
	tab := &table{}
	col := fmt.Sprintf("%d catalogs × %d tools, %d clients", catalogs, tools, clients)
	upstream := mcptest.New(t, mcptest.Options{Name: "weather"})
	upstream.Tool("get_weather", "Get the current weather and the forecast for a city.", map[string]any{
		"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}, nil)

	namespaces := make([]string, *gwNamespacesFlag)
	for i := range namespaces {
		namespaces[i] = namespace(t, fmt.Sprintf("g%d", i))
	}
	mgr := startManager(t, buildManager(t))
	keys := make([]client.ObjectKey, catalogs)
	for c := range keys {
		keys[c] = client.ObjectKey{Namespace: namespaces[c%len(namespaces)], Name: catalogName(c)}
		if err := kube.Create(t.Context(), gatewayCatalog(keys[c])); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	createAll(t, catalogs*tools, func(k int) client.Object {
		key, i := keys[k%catalogs], k/catalogs
		if i == 0 {
			return gatewayTool(key, "get_weather", "Get the current weather and the forecast for a city.", weatherParameters, upstream.URL)
		}
		name := fmt.Sprintf("tool-%05d", i)
		return gatewayTool(key, strings.ReplaceAll(name, "-", "_"), distinct.description(key.Name+"-"+name, k), toolParameters, "")
	})
	testenv.WaitEvery(t, "every catalog published with all its tools", 30*time.Minute, time.Second, func() bool {
		return countCatalogs(t, namespaces, func(tc *v1alpha1.ToolCatalog) bool {
			return tc.Status.Version > 0 && tc.Status.Counts != nil && tc.Status.Counts.Embedded == int32(tools)
		}) == catalogs
	})
	publishedIn := time.Since(start)
	t.Logf("%d catalogs published in %v", catalogs, publishedIn.Round(time.Second))
	// The gateway's figures are its own: the manager, which shares the
	// cores, has graded every catalog and is idle.
	testenv.WaitEvery(t, "every catalog graded and the manager idle", 30*time.Minute, time.Second, func() bool {
		return countCatalogs(t, namespaces, func(tc *v1alpha1.ToolCatalog) bool {
			return tc.Status.Quality != nil && tc.Status.Quality.Version >= tc.Status.Version
		}) == catalogs && mgr.idle(t)
	})

	gw := startGateway(t, clients)
	idleRSS, _ := gw.rss()
	gw.watchPeak(t, fmt.Sprintf("%sgateway-%d.peak.heap.pprof", *heapFlag, catalogs))

	// Each client's sessions: catalog c belongs to client c mod clients,
	// and a client with no catalog of its own shares one.
	sessions := make([][]*mcp.ClientSession, clients)
	for c := range max(catalogs, clients) {
		i := c % clients
		sessions[i] = append(sessions[i], gw.connect(t, i, keys[c%catalogs], *gwProtocolFlag, nil))
	}
	tab.set("clients' protocol / connections / catalogs each client goes round", col, fmt.Sprintf("%s / %d / %d–%d",
		cmp.Or(*gwProtocolFlag, "latest"), max(catalogs, clients), len(sessions[clients-1]), len(sessions[0])))
	// The watchers of catalog 0: two principals' sessions, told when
	// its tools change.
	type notice struct {
		watcher int
		at      time.Time
	}
	notices := make(chan notice, 64)
	watchers := min(2, clients)
	for w := range watchers {
		gw.connect(t, w, keys[0], sessionProtocol, func(context.Context, *mcp.ToolListChangedRequest) {
			notices <- notice{w, time.Now()}
		})
	}

	// The clients stand for agents on machines of their own; here they
	// share the machine's cores with the gateway they measure, and with
	// Redis and the upstream. The SDK's client allocates a 32 KiB buffer
	// for each message it reads: collected four times less often, the
	// load takes less of the cores from what it measures. The gateway
	// runs as shipped; its own CPU per search+call is reported apart.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	ctx, cancel := context.WithTimeout(t.Context(), *gwDurationFlag)
	defer cancel()
	cpu0, self0, began := gw.cpu(t), processCPU(t, os.Getpid()), time.Now()
	stopProfile := gw.profile(t, fmt.Sprintf("%sgateway-%d.pprof", *profileFlag, catalogs))
	loaded := make(chan *mcpload.Result, 1)
	go func() {
		loaded <- mcpload.Run(ctx, sessions, mcpload.Work{Query: "weather forecast for a city", Tool: "get_weather",
			Arguments: func(i int) map[string]any { return map[string]any{"city": fmt.Sprintf("city-%d", i)} }})
	}()

	// While the clients work, edits of catalog 0's get_weather: each a
	// new version, which every watcher must be told of. They come one
	// every editSpacing, as a person's or a GitOps sync's do: edits that
	// follow each other at once are a burst, whose versions the manager
	// spaces on purpose (controllers/toolcatalog/pace.go).
	var reach, toNotice, fromNotice []time.Duration
	announced := noticeTimesOn(t, contract.DefaultChannel, keys[0].String())
	key := client.ObjectKey{Namespace: keys[0].Namespace, Name: gatewayToolName(keys[0], "get_weather")}
	spacing := time.NewTicker(editSpacing)
	defer spacing.Stop()
	for e := range *editsFlag {
		if e > 0 {
			<-spacing.C
		}
		for len(notices) > 0 {
			<-notices
		}
		td := &v1alpha1.ToolDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"description": fmt.Sprintf("Get the current weather and the forecast for a city (revision %d).", e+1)}})
		edited := time.Now()
		if err := kube.Patch(t.Context(), td, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
		told := map[int]bool{}
		timeout := time.After(time.Minute)
		for len(told) < watchers {
			select {
			case n := <-notices:
				told[n.watcher] = true
				if len(told) == watchers {
					reach = append(reach, n.at.Sub(edited))
					if at, ok := announced.firstSince(edited); ok {
						toNotice, fromNotice = append(toNotice, at.Sub(edited)), append(fromNotice, n.at.Sub(at))
					}
				}
			case <-timeout:
				t.Fatalf("edit %d: %d of %d watchers of %s were told of the new version within a minute", e+1, len(told), watchers, keys[0])
			}
		}
	}
	load := <-loaded
	elapsed := time.Since(began)
	cpu, self := gw.cpu(t)-cpu0, processCPU(t, os.Getpid())-self0
	stopProfile()
	gw.heapProfile(t, fmt.Sprintf("%sgateway-%d.heap.pprof", *heapFlag, catalogs))
	if len(load.Samples) == 0 {
		t.Fatalf("no search+call completed; errors: %v", load.Errors)
	}
	tab.set("ToolDefinitions / bulk apply → every catalog published", col, fmt.Sprintf("%d / %v", catalogs*tools, publishedIn.Round(time.Second)))
	tab.set("search+call: done / per second / errors", col, fmt.Sprintf("%d / %.0f / %d", len(load.Samples), float64(len(load.Samples))/elapsed.Seconds(), len(load.Errors)))
	for _, step := range mcpload.Steps {
		p50, p99 := load.Percentile(step, 0.5), load.Percentile(step, 0.99)
		tab.set(step.Name+": p50 / p90 / p99 (p99 ÷ p50)", col, fmt.Sprintf("%v / %v / %v (%.1f)",
			p50.Round(10*time.Microsecond), load.Percentile(step, 0.9).Round(10*time.Microsecond), p99.Round(10*time.Microsecond), float64(p99)/float64(p50)))
	}
	tab.set("gateway CPU: share of a core / per search+call", col, fmt.Sprintf("%.0f%% / %v", 100*float64(cpu)/float64(elapsed), (cpu/time.Duration(len(load.Samples))).Round(time.Microsecond)))
	tab.set("clients and upstream (the bench's process): share of a core", col, fmt.Sprintf("%.0f%%", 100*float64(self)/float64(elapsed)))
	peak, anon, _ := gw.memory(t)
	tab.set("gateway RSS: before the clients / peak / anonymous now", col, fmt.Sprintf("%s / %s / %s", mib(idleRSS), mib(peak), mib(anon)))
	tab.set("one catalog's edit → list_changed at its sessions (median / worst)", col, fmt.Sprintf("%v / %v",
		medianDuration(reach).Round(time.Millisecond), slices.Max(reach).Round(time.Millisecond)))
	if len(toNotice) > 0 {
		tab.set("of which edit → notice / notice → list_changed (median; worst)", col, fmt.Sprintf("%v / %v; %v / %v",
			medianDuration(toNotice).Round(time.Millisecond), medianDuration(fromNotice).Round(time.Millisecond),
			slices.Max(toNotice).Round(time.Millisecond), slices.Max(fromNotice).Round(time.Millisecond)))
	}
	t.Logf("\n%s", tab)
	fmt.Printf("\n%s\n", tab)
	if len(load.Errors) > 0 {
		t.Fatalf("%d errors, first: %s", len(load.Errors), load.Errors[0])
	}
	if upstream.Calls() != len(load.Samples) {
		t.Fatalf("the upstream answered %d calls, the clients saw %d", upstream.Calls(), len(load.Samples))
	}
}

// editSpacing is the time between two edits of the gateway shape: longer
// than a version and the quiet spell after it that ends a burst.
const editSpacing = 2 * time.Second

// weatherParameters is get_weather's parameters schema.
const weatherParameters = `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`

// gatewayCatalog is a catalog of the gateway shape: builtin models,
// disclosure on with get_weather listed whole (so a new version of it
// changes the list), open to the group of the clients.
func gatewayCatalog(key client.ObjectKey) *v1alpha1.ToolCatalog {
	return &v1alpha1.ToolCatalog{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Spec: v1alpha1.ToolCatalogSpec{
			Selector:   metav1.LabelSelector{MatchLabels: map[string]string{label: key.Name}},
			Redis:      v1alpha1.RedisSpec{Addresses: []string{redisSrv.Addr}},
			Search:     v1alpha1.SearchSpec{AlwaysInclude: []string{"get_weather"}},
			Disclosure: v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOn},
			Gateway:    v1alpha1.GatewaySpec{AllowedPrincipals: []string{"group:agents"}},
		},
	}
}

func gatewayToolName(key client.ObjectKey, tool string) string {
	return key.Name + "-" + strings.ReplaceAll(tool, "_", "-")
}

// gatewayTool is a tool of a gateway-shape catalog, proxied to upstream
// when it is not empty.
func gatewayTool(key client.ObjectKey, name, description, parameters, upstream string) *v1alpha1.ToolDefinition {
	td := &v1alpha1.ToolDefinition{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: gatewayToolName(key, name), Labels: map[string]string{label: key.Name}},
		Spec:       v1alpha1.ToolDefinitionSpec{Name: name, Description: description, Parameters: &apiextensionsv1.JSON{Raw: []byte(parameters)}},
	}
	if upstream != "" {
		td.Spec.Source = &v1alpha1.ToolSourceReference{MCPURL: upstream, Tool: name}
	}
	return td
}

// gatewayProcess is the gateway binary serving on loopback.
type gatewayProcess struct {
	*process
	url string
	// transports are the clients' connection pools, one per client: the
	// clients stand for agents in processes of their own, and do not
	// queue for the two idle connections of a pool they would share.
	transports map[int]http.RoundTripper
}

// startGateway runs the gateway with a static token per client (principal
// agent-i, in the group agents), rates no client reaches, and the loopback
// upstream allowed, and waits until it is ready.
func startGateway(t *testing.T, clients int) *gatewayProcess {
	dir := t.TempDir()
	var tokens strings.Builder
	for i := range clients {
		fmt.Fprintf(&tokens, "%s,agent-%d,%d,\"agents\"\n", agentToken(i), i, 1000+i)
	}
	tokensFile := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokensFile, []byte(tokens.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testenv.FreeAddr(t)
	args := []string{"--bind-address=" + addr, "--metrics-bind-address=0", "--static-tokens=" + tokensFile, "--egress-allow=127.0.0.1/32",
		"--searches-per-second=1000000", "--calls-per-second=1000000", "--shutdown-delay=0s", "--zap-log-level=error"}
	bin := testenv.Build(t, "../../cmd/toolcatalog-gateway")
	gw := &gatewayProcess{process: startProcess(t, bin, args, []string{"KUBECONFIG=" + kubeconfigFile(t)}, nil), url: "http://" + addr, transports: map[int]http.RoundTripper{}}
	waitFor(t, "the gateway to be ready", time.Minute, func() bool {
		resp, err := http.Get(gw.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return gw
}

func agentToken(i int) string { return fmt.Sprintf("agent-token-%04d", i) }

// connect connects client i to a catalog with a protocol (the SDK's
// latest when empty), told of list changes through changed when it is not
// nil.
func (gw *gatewayProcess) connect(t *testing.T, i int, key client.ObjectKey, protocol string, changed func(context.Context, *mcp.ToolListChangedRequest)) *mcp.ClientSession {
	endpoint := fmt.Sprintf("%s/mcp/%s/%s", gw.url, key.Namespace, key.Name)
	c := mcp.NewClient(&mcp.Implementation{Name: fmt.Sprintf("agent-%d", i), Version: "1"}, &mcp.ClientOptions{ToolListChangedHandler: changed})
	if gw.transports[i] == nil {
		gw.transports[i] = bearerToken{agentToken(i), http.DefaultTransport.(*http.Transport).Clone()}
	}
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: gw.transports[i]}},
		&mcp.ClientSessionOptions{ProtocolVersion: protocol})
	if err != nil {
		t.Fatalf("connecting to %s: %v", endpoint, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// bearerToken adds a bearer token to each request.
type bearerToken struct {
	token string
	base  http.RoundTripper
}

func (b bearerToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}
