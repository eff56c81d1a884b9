package gateway

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/mcpload"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/mcptest"
)

// The load test's size: small in `make test`, larger with
// `make bench-gateway`.
var (
	loadClients  = flag.Int("gateway.clients", 4, "concurrent MCP clients of the load test")
	loadDuration = flag.Duration("gateway.duration", 2*time.Second, "how long the load test runs")
	loadTools    = flag.Int("gateway.tools", 50, "tools in the load test's catalog")
)

// TestLoad runs concurrent clients doing tool_search then tool_call
// (proxied to an upstream MCP server) for a fixed time, and reports
// throughput and latency. It asserts only that nothing failed: speed is a
// benchmark's figure, not a test's.
func TestLoad(t *testing.T) {
	ns := newNamespace(t)
	srv := mcptest.New(t, mcptest.Options{Name: "weather"})
	srv.Tool("get_weather", "Get the current weather and the forecast for a city.",
		map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}, nil)
	objs := []client.Object{
		testCatalog(ns, "load", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOn}),
		testTool(ns, "load", "get_weather", "Get the current weather and the forecast for a city.",
			params(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`), upstream(srv.URL, "get_weather")),
	}
	subjects := []string{"invoice", "ticket", "repository", "calendar", "contact", "order", "shipment", "report", "playlist", "recipe"}
	verbs := []string{"Create", "Delete", "List", "Update", "Archive"}
	for i := range *loadTools - 1 {
		s, v := subjects[i%len(subjects)], verbs[(i/len(subjects))%len(verbs)]
		objs = append(objs, testTool(ns, "load", fmt.Sprintf("%s_%s_%d", strings.ToLower(v), s, i), fmt.Sprintf("%s a %s in workspace %d.", v, s, i)))
	}
	create(t, objs...)
	published(t, ns, "load", *loadTools)

	clients := make([][]*mcp.ClientSession, *loadClients)
	for i := range clients {
		clients[i] = []*mcp.ClientSession{connect(t, ns, "load", aliceToken, "", nil)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *loadDuration)
	defer cancel()
	load := mcpload.Run(ctx, clients, mcpload.Work{Query: "weather forecast for a city", Tool: "get_weather",
		Arguments: func(i int) map[string]any { return map[string]any{"city": fmt.Sprintf("city-%d", i)} }})
	if len(load.Samples) == 0 {
		t.Fatalf("no search+call completed; errors: %v", load.Errors)
	}
	t.Logf("%d clients, %s, %d tools, disclosure on: %d search+call (%.1f/s), %d errors",
		*loadClients, *loadDuration, *loadTools, len(load.Samples), float64(len(load.Samples))/loadDuration.Seconds(), len(load.Errors))
	for _, step := range mcpload.Steps {
		t.Logf("%-12s p50 %-9s p90 %-9s p99 %s", step.Name, load.Percentile(step, 0.5).Round(10*time.Microsecond),
			load.Percentile(step, 0.9).Round(10*time.Microsecond), load.Percentile(step, 0.99).Round(10*time.Microsecond))
	}
	if len(load.Errors) > 0 {
		t.Fatalf("%d errors, first: %s", len(load.Errors), load.Errors[0])
	}
	if srv.Calls() != len(load.Samples) {
		t.Fatalf("the upstream answered %d calls, the clients saw %d", srv.Calls(), len(load.Samples))
	}
}
