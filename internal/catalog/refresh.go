package catalog

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// Providers generate queries and embed them for one catalog.
type Providers struct {
	Generator embedding.QueryGenerator
	Embedder  embedding.Embedder
	// Concurrency bounds the generator requests in flight.
	Concurrency int
}

// Result is a tool embedded by a pass: its new vector and metadata.
type Result struct {
	Vector   []byte
	Metadata contract.Metadata
}

// Refreshed is what generation and embedding produced: results for the
// tools that succeeded, failures for the others.
type Refreshed struct {
	Results  map[string]Result
	Failures []Failure
}

// Refresh generates the queries the plans ask for and embeds every planned
// tool's query set: one centroid per tool. One tool's failure does not
// fail the others: it is reported and the tool keeps what it had.
func Refresh(ctx context.Context, p Providers, plans []ToolPlan, now time.Time) Refreshed {
	out := Refreshed{Results: map[string]Result{}}
	sets := generate(ctx, p, plans, &out)
	embed(ctx, p.Embedder, sets, now, &out)
	return out
}

// querySet is a tool and the full query set to embed for it.
type querySet struct {
	tool    Tool
	queries []string
}

// generate asks for the queries the plans need, with bounded concurrency,
// and returns the full query set of each tool to embed, in plan order.
func generate(ctx context.Context, p Providers, plans []ToolPlan, out *Refreshed) []querySet {
	var sets []querySet
	var reqs []embedding.QueryRequest
	var pending []int // index in sets of each request
	for _, pl := range plans {
		if pl.Action == ActionNone {
			continue
		}
		sets = append(sets, querySet{tool: pl.Tool, queries: pl.Queries})
		if pl.Action == ActionRegenerate && pl.Generate > 0 {
			e := pl.Tool.Entry
			reqs = append(reqs, embedding.QueryRequest{
				Tool:  embedding.ToolSpec{Name: e.Name, Description: e.Description, Parameters: e.Parameters},
				Count: pl.Generate, Existing: pl.Queries,
			})
			pending = append(pending, len(sets)-1)
		}
	}
	failed := map[int]bool{}
	for i, res := range embedding.GenerateAll(ctx, p.Generator, reqs, p.Concurrency) {
		set := &sets[pending[i]]
		if res.Err != nil {
			out.Failures = append(out.Failures, Failure{Object: set.tool.Object, Tool: set.tool.Entry.Name,
				Reason: v1alpha1.ReasonQueryGenerationFailed, Message: res.Err.Error(), Kind: embedding.KindOf(res.Err)})
			failed[pending[i]] = true
			continue
		}
		set.queries = append(slices.Clone(set.queries), res.Queries...)
	}
	kept := sets[:0]
	for i, s := range sets {
		if !failed[i] {
			kept = append(kept, s)
		}
	}
	return kept
}

// embed embeds every set in one batched call; when that fails, each tool
// is embedded on its own so one bad tool does not fail the others.
func embed(ctx context.Context, e embedding.Embedder, sets []querySet, now time.Time, out *Refreshed) {
	if len(sets) == 0 {
		return
	}
	queries := make([][]string, len(sets))
	for i, s := range sets {
		queries[i] = s.queries
	}
	centroids, errs, err := embedding.QueryCentroids(ctx, e, queries)
	if err != nil && len(sets) > 1 && isolatable(err) {
		centroids, errs = make([][]float32, len(sets)), make([]error, len(sets))
		for i := range sets {
			one, oneErrs, oneErr := embedding.QueryCentroids(ctx, e, queries[i:i+1])
			if errs[i] = oneErr; oneErr == nil {
				centroids[i], errs[i] = one[0], oneErrs[0]
			}
		}
		err = nil
	}
	for i, s := range sets {
		failure := err
		if failure == nil {
			failure = errs[i]
		}
		if err := failure; err != nil {
			out.Failures = append(out.Failures, Failure{Object: s.tool.Object, Tool: s.tool.Entry.Name,
				Reason: v1alpha1.ReasonEmbeddingError, Message: err.Error(), Kind: embedding.KindOf(err)})
			continue
		}
		out.Results[s.tool.Entry.Name] = Result{
			Vector: contract.EncodeVector(centroids[i]),
			Metadata: contract.Metadata{
				SpecHash: s.tool.Entry.SpecHash, Description: s.tool.Entry.Description, Model: e.Model(),
				Dimensions: len(centroids[i]), SyntheticQueries: s.queries, EmbeddedAt: now,
			},
		}
	}
}

// isolatable reports whether embedding tools one by one may get further
// than embedding them together.
func isolatable(err error) bool {
	switch embedding.KindOf(err) {
	case embedding.KindAuth, embedding.KindDimensionMismatch:
		return false
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}
