package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/mcptest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/testenv"
)

// BenchmarkUpstreamResultFlood is the attack of an upstream server that
// answers each call with about 4 MiB of small JSON objects (within the
// bound of bytes), six calls at a time: the gateway's heap above idle at
// its peak, with the bound of values and without it. Run it with
// go test ./internal/gateway -run '^$' -bench UpstreamResultFlood -benchtime 3x.
func BenchmarkUpstreamResultFlood(b *testing.B) {
	items := strings.Repeat(`{"a":1},`, 500_000)
	result := json.RawMessage(`{"content":[{"type":"text","text":"items"}],"structuredContent":{"items":[` + items[:len(items)-1] + `]}}`)
	flood := mcptest.NewCanned(b, map[string]json.RawMessage{"tools/call": result})
	ns := newNamespace(b)
	create(b, testCatalog(ns, "flood", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOff}),
		testTool(ns, "flood", "items", "List every item the server has.", upstream(flood.URL, "items")))
	published(b, ns, "flood", 1)
	for _, values := range []int64{DefaultLimits.UpstreamResultValues, 1 << 40} {
		name := fmt.Sprintf("values=%d", values)
		if values == 1<<40 {
			name = "values=unbounded"
		}
		b.Run(name, func(b *testing.B) {
			_, base := ownGateway(b, Limits{UpstreamResultValues: values, UpstreamResultBytes: 5 << 20, CallsPerSecond: 1e6})
			cs := connectAt(b, base, ns, "flood", aliceToken, "", nil)
			peak := 0.0
			for b.Loop() {
				stop := testenv.HeapPeak()
				var wg sync.WaitGroup
				for range 6 {
					wg.Go(func() {
						_, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "items", Arguments: map[string]any{}})
					})
				}
				wg.Wait()
				peak = max(peak, stop())
			}
			b.ReportMetric(peak, "peak-heap-MiB")
		})
	}
}
