package gateway

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/mcptest"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// A catalog that includes its most used tool: a call that succeeded
// counts as a use, and the tool, deferred before, is listed directly
// (clients told by notifications/tools/list_changed) and left out of
// tool_search once three distinct principals used it. A failed call
// counts for nothing, and anonymous calls, however many, count for
// nothing: twenty of them used to decide what every principal was sent.
func TestMostUsedToolsAreListedDirectly(t *testing.T) {
	ns := newNamespace(t)
	srv := mcptest.New(t, mcptest.Options{Name: "weather", Version: "2.0.0"})
	srv.Tool("get_weather", "Get the current weather and the forecast for a city.",
		map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}, nil)
	cat := testCatalog(ns, "used", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOn})
	cat.Spec.Search.AlwaysIncludeTopNUsed = 1
	cat.Spec.Gateway.AllowAnonymous = true
	cat.Spec.Gateway.AllowedPrincipals = append(cat.Spec.Gateway.AllowedPrincipals, DefaultAllowedPrincipals(ns))
	create(t,
		&v1alpha1.ToolSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "weather"}, Spec: v1alpha1.ToolSourceSpec{
			MCP: v1alpha1.MCPServerSpec{URL: srv.URL}, Labels: map[string]string{"catalog": "used"},
		}},
		cat,
		testTool(ns, "used", "send_email", "Send an email message to a recipient.", params(`{"type":"object","properties":{"to":{"type":"string"}}}`)),
	)
	doc := published(t, ns, "used", 2)
	if doc.Search.AlwaysIncludeTopNUsed != 1 {
		t.Fatalf("the head publishes always_include_top_n_used %d, want 1", doc.Search.AlwaysIncludeTopNUsed)
	}
	changed := make(chan struct{}, 10)
	cs := connectWith(t, gatewayURL, ns, "used", aliceToken, "", &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	}, "")
	if names := listed(t, cs); slices.Contains(names, "get_weather") || !slices.Contains(names, "tool_search") {
		t.Fatalf("listed %v before any use: get_weather should be deferred", names)
	}

	// A failed call is no use.
	if _, isErr := callTool(t, cs, "tool_call", map[string]any{"name": "get_weather", "arguments": map[string]any{"city": 7}}); !isErr {
		t.Fatal("a call with bad arguments succeeded")
	}
	rc := redisSrv.Client()
	defer rc.Close()
	keys := contract.Keys{Prefix: contract.DefaultPrefix(ns, "used")}
	if top, err := contract.MostUsed(context.Background(), rc, keys, 5, time.Now()); err != nil || len(top) != 0 {
		t.Fatalf("uses after a failed call: %+v %v", top, err)
	}

	weather := func(cs *mcp.ClientSession) {
		t.Helper()
		if out, isErr := callTool(t, cs, "tool_call", map[string]any{"name": "get_weather", "arguments": map[string]any{"city": "Oslo"}}); isErr {
			t.Fatalf("tool_call: %s", out)
		}
	}
	anonymous := connectWith(t, gatewayURL, ns, "used", "", "", nil, "")
	for range 25 {
		weather(anonymous)
	}
	weather(cs)
	fin := connectWith(t, gatewayURL, ns, "used", finToken, "", nil, "")
	weather(fin)
	day := contract.UsageDayOf(time.Now())
	if uses := rc.ZScore(context.Background(), keys.UsageDay(day), "get_weather").Val(); uses != 2 {
		t.Fatalf("%v uses counted after 25 anonymous calls, alice's and fin's; want 2", uses)
	}
	if top, err := contract.MostUsed(context.Background(), rc, keys, 5, time.Now()); err != nil || len(top) != 0 {
		t.Fatalf("the most used after two principals' calls: %+v %v", top, err)
	}
	planner := serviceAccountToken(t, ns, "planner", DefaultTokenAudience).Status.Token
	weather(connectWith(t, gatewayURL, ns, "used", planner, "", nil, ""))
	if top, err := contract.MostUsed(context.Background(), rc, keys, 5, time.Now()); err != nil || len(top) != 1 || top[0].Tool != "get_weather" || top[0].Score != 3 {
		t.Fatalf("uses after three principals' calls: %+v %v", top, err)
	}
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("no notifications/tools/list_changed within 30s of the tool becoming the most used")
	}
	if names := listed(t, cs); !slices.Contains(names, "get_weather") {
		t.Fatalf("listed %v: the most used tool is not sent directly", names)
	}
	if found := search(t, cs, "what is the weather in Oslo tomorrow"); slices.Contains(found.names(), "get_weather") {
		t.Fatalf("tool_search returned the directly listed get_weather: %+v", found)
	}
}
