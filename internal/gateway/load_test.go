package gateway

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
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

	type sample struct{ search, call, both time.Duration }
	var (
		mu      sync.Mutex
		samples []sample
		errs    []string
	)
	ctx, cancel := context.WithTimeout(context.Background(), *loadDuration)
	defer cancel()
	var wg sync.WaitGroup
	for i := range *loadClients {
		cs := connect(t, ns, "load", aliceToken, "", nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				start := time.Now()
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "tool_search", Arguments: map[string]any{"query": "weather forecast for a city"}})
				searched := time.Now()
				if err == nil && !res.IsError {
					res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "tool_call", Arguments: map[string]any{"name": "get_weather", "arguments": map[string]any{"city": fmt.Sprintf("city-%d", i)}}})
				}
				done := time.Now()
				mu.Lock()
				switch {
				case err != nil:
					errs = append(errs, err.Error())
				case res.IsError:
					errs = append(errs, fmt.Sprint(res.Content))
				default:
					samples = append(samples, sample{searched.Sub(start), done.Sub(searched), done.Sub(start)})
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	pct := func(pick func(sample) time.Duration, p float64) time.Duration {
		d := make([]time.Duration, len(samples))
		for i, s := range samples {
			d[i] = pick(s)
		}
		slices.Sort(d)
		return d[min(len(d)-1, int(p*float64(len(d))))].Round(10 * time.Microsecond)
	}
	if len(samples) == 0 {
		t.Fatalf("no search+call completed; errors: %v", errs)
	}
	t.Logf("%d clients, %s, %d tools, disclosure on: %d search+call (%.1f/s), %d errors",
		*loadClients, *loadDuration, *loadTools, len(samples), float64(len(samples))/loadDuration.Seconds(), len(errs))
	for _, step := range []struct {
		name string
		pick func(sample) time.Duration
	}{{"tool_search", func(s sample) time.Duration { return s.search }}, {"tool_call", func(s sample) time.Duration { return s.call }}, {"search+call", func(s sample) time.Duration { return s.both }}} {
		t.Logf("%-12s p50 %-9s p90 %-9s p99 %s", step.name, pct(step.pick, 0.5), pct(step.pick, 0.9), pct(step.pick, 0.99))
	}
	if len(errs) > 0 {
		t.Fatalf("%d errors, first: %s", len(errs), errs[0])
	}
	if srv.Calls() != len(samples) {
		t.Fatalf("the upstream answered %d calls, the clients saw %d", srv.Calls(), len(samples))
	}
}
