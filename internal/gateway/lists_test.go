package gateway

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
)

// Lists follow MCP 2026-07-28: sorted by name, private to the principal
// they were made for, and kept by a client for ttlMs unless
// notifications/tools/list_changed comes first. A client that listens
// sees a new tool at once; one that does not keeps its list, as ttlMs
// allows it to.
func TestListsSayHowTheyMayBeKept(t *testing.T) {
	ns := newNamespace(t)
	standardCatalog(t, ns, "kept", v1alpha1.DisclosureOff)
	_, base := ownGateway(t, Limits{SearchesPerSecond: 1e6, CallsPerSecond: 1e6}, func(o *Options) { o.ListTTL = 0 })
	changed := make(chan struct{}, 10)
	listening := connectAt(t, base, ns, "kept", aliceToken, "", &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	quiet := connectAt(t, base, ns, "kept", aliceToken, "", nil)

	res, err := listening.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.CacheScope != "private" || res.TTLMs != int(DefaultListTTL.Milliseconds()) {
		t.Fatalf("tools/list: cacheScope %q, ttlMs %d; want private, %d", res.CacheScope, res.TTLMs, DefaultListTTL.Milliseconds())
	}
	names := listed(t, listening)
	if len(names) < 2 || !slices.IsSorted(names) {
		t.Fatalf("listed %v; want the tools sorted by name", names)
	}
	before := listed(t, quiet)
	if !slices.Equal(before, names) {
		t.Fatalf("two sessions of one principal list %v and %v", before, names)
	}

	create(t, testTool(ns, "kept", "translate_text", "Translate text between languages."))
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("no notifications/tools/list_changed within 30s of the new tool")
	}
	if got := listed(t, listening); !slices.Contains(got, "translate_text") || !slices.IsSorted(got) {
		t.Fatalf("after list_changed, the listening client lists %v", got)
	}
	// Within ttlMs, the client that did not listen keeps what it was sent:
	// the list it relies on is the one before the change.
	if got := listed(t, quiet); !slices.Equal(got, before) {
		t.Fatalf("within ttlMs, the client that did not listen lists %v; want its kept %v", got, before)
	}
	if fresh := listed(t, connectAt(t, base, ns, "kept", aliceToken, "", nil)); !slices.Contains(fresh, "translate_text") {
		t.Fatalf("a new client lists %v", fresh)
	}
}

// The gateway leaves the SDK's check of MCP 2026-07-28's standard headers
// on: a request whose Mcp-Name header names another tool than its body is
// refused before anything runs, while the same request with the right
// header is answered.
func TestHeaderThatDisagreesWithTheBodyIsRefused(t *testing.T) {
	ns := newNamespace(t)
	standardCatalog(t, ns, "headers", v1alpha1.DisclosureOff)
	var forge atomic.Bool
	client := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:   gatewayURL + "/mcp/" + ns + "/headers",
		HTTPClient: &http.Client{Transport: bearer{aliceToken, forgeName{&forge, http.DefaultTransport}}}, MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	name := listed(t, cs)[0]
	if _, callErr := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{}}); callErr != nil {
		t.Fatalf("a call whose headers agree with its body: %v", callErr)
	}
	forge.Store(true)
	_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), "header mismatch") {
		t.Fatalf("a call whose Mcp-Name names another tool: %v; want it refused for the mismatch", err)
	}
}

// forgeName sets the Mcp-Name header of tools/call requests to another
// tool's name while on is set.
type forgeName struct {
	on   *atomic.Bool
	base http.RoundTripper
}

func (f forgeName) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.on.Load() && r.Header.Get("Mcp-Method") == "tools/call" {
		r = r.Clone(r.Context())
		r.Header.Set("Mcp-Name", "some_other_tool")
	}
	return f.base.RoundTrip(r)
}
