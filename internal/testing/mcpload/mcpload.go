// Package mcpload drives MCP client sessions of the official Go SDK
// through tool_search then tool_call, the load of an agent on a gateway,
// and sums up the latencies, for the gateway's load benchmarks.
package mcpload

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Work is what each client does: a tool_search of Query, then a tool_call
// of Tool with Arguments(client).
type Work struct {
	Query, Tool string
	Arguments   func(client int) map[string]any
}

// Sample is the latency of one search+call.
type Sample struct{ Search, Call, Both time.Duration }

// Result is what a load measured: the search+calls that completed, and
// the errors of those that did not.
type Result struct {
	Samples []Sample
	Errors  []string
}

// Run has each client go round its sessions, one search+call on each in
// turn, until ctx ends.
func Run(ctx context.Context, clients [][]*mcp.ClientSession, w Work) *Result {
	var (
		mu  sync.Mutex
		res Result
		wg  sync.WaitGroup
	)
	for i, own := range clients {
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				cs := own[n%len(own)]
				begin := time.Now()
				out, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "tool_search", Arguments: map[string]any{"query": w.Query}})
				searched := time.Now()
				if err == nil && !out.IsError {
					out, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "tool_call", Arguments: map[string]any{"name": w.Tool, "arguments": w.Arguments(i)}})
				}
				done := time.Now()
				mu.Lock()
				switch {
				case err != nil:
					res.Errors = append(res.Errors, err.Error())
				case out.IsError:
					res.Errors = append(res.Errors, fmt.Sprint(out.Content))
				default:
					res.Samples = append(res.Samples, Sample{searched.Sub(begin), done.Sub(searched), done.Sub(begin)})
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return &res
}

// Step is one measured step of a search+call.
type Step struct {
	Name string
	Of   func(Sample) time.Duration
}

// Steps are the search, the call and both.
var Steps = []Step{
	{"tool_search", func(s Sample) time.Duration { return s.Search }},
	{"tool_call", func(s Sample) time.Duration { return s.Call }},
	{"search+call", func(s Sample) time.Duration { return s.Both }},
}

// Percentile is the p-th percentile (0 to 1) of a step over the samples;
// there must be at least one.
func (r *Result) Percentile(step Step, p float64) time.Duration {
	d := make([]time.Duration, len(r.Samples))
	for i, s := range r.Samples {
		d[i] = step.Of(s)
	}
	slices.Sort(d)
	return d[min(len(d)-1, int(p*float64(len(d))))]
}
