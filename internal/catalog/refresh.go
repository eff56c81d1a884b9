package catalog

import (
	"context"
	"errors"
	"slices"
	"sync"
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
	// Generated, when set, keeps the queries generated for tools whose
	// embedding has not succeeded yet, so a later pass embeds them
	// without asking for them again.
	Generated *Generated
}

// Generated holds query sets that were paid for but not yet embedded, by
// tool name. It is safe for concurrent use.
type Generated struct {
	mu   sync.Mutex
	sets map[string]generatedSet
}

type generatedSet struct {
	specHash string
	existing []string
	queries  []string
}

// recall returns the queries generated earlier for the same request.
func (g *Generated) recall(e contract.Tool, count int, existing []string) ([]string, bool) {
	if g == nil {
		return nil, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	s, ok := g.sets[e.Name]
	if !ok || s.specHash != e.SpecHash || len(s.queries) != count || !slices.Equal(s.existing, existing) {
		return nil, false
	}
	return s.queries, true
}

func (g *Generated) keep(e contract.Tool, existing, queries []string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sets == nil {
		g.sets = map[string]generatedSet{}
	}
	g.sets[e.Name] = generatedSet{specHash: e.SpecHash, existing: existing, queries: queries}
}

func (g *Generated) forget(name string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.sets, name)
}

// Budget bounds the provider work of one pass, so that a pass publishes
// what it did within a bounded time whatever the catalog's size. Query
// generation streams through Concurrency requests; no new request starts
// once Time has elapsed (after a first wave, so every pass makes
// progress), and tools are embedded in batches as their queries arrive.
// What a pass does not reach is left for the next pass, which follows at
// once: a crash or a timeout loses at most one pass's work, and queries
// already generated are always embedded and published.
type Budget struct {
	// Time is how long a pass starts new work; unbounded when zero.
	Time time.Duration
	// Batch is how many query texts are embedded together;
	// DefaultEmbedBatch when zero.
	Batch int
	// Clock measures the time spent; time.Now when nil.
	Clock func() time.Time
}

// DefaultPassBudget is how long a pass starts new work by default: a
// catalog being built publishes a version about this often.
const DefaultPassBudget = 20 * time.Second

// DefaultEmbedBatch is how many query texts a pass embeds together (a
// provider client splits them further into its own request size).
const DefaultEmbedBatch = 256

// Result is a tool embedded by a pass: its new vector and metadata.
type Result struct {
	Vector   []byte
	Metadata contract.Metadata
}

// Refreshed is what generation and embedding produced: results for the
// tools that succeeded, failures for the others, and the tools with work
// the pass did not get to.
type Refreshed struct {
	Results  map[string]Result
	Failures []Failure
	// Unreached are the tools with planned work that the pass left for the
	// next one: its budget ran out, or its context ended (TimedOut).
	Unreached []string
	// TimedOut says the pass's context ended while tools were refreshed.
	TimedOut bool
	// Elapsed is how long the refresh took.
	Elapsed time.Duration
}

// Done counts the tools the pass refreshed or failed.
func (r Refreshed) Done() int { return len(r.Results) + len(r.Failures) }

// Refresh generates the queries the plans ask for and embeds every planned
// tool's query set (one centroid per tool) within the budget. One tool's
// failure does not fail the others: it is reported and the tool keeps what
// it had. A tool cut off by the end of ctx is unreached, not failed.
func Refresh(ctx context.Context, p Providers, plans []ToolPlan, now time.Time, budget Budget) Refreshed {
	clock := budget.Clock
	if clock == nil {
		clock = time.Now
	}
	start := clock()
	spent := func() bool { return ctx.Err() != nil || (budget.Time > 0 && clock().Sub(start) >= budget.Time) }
	batch := budget.Batch
	if batch <= 0 {
		batch = DefaultEmbedBatch
	}
	out := Refreshed{Results: map[string]Result{}}
	var toGenerate []ToolPlan
	var toEmbed []querySet
	for _, pl := range plans {
		switch {
		case pl.Action == ActionRegenerate && pl.Generate > 0:
			toGenerate = append(toGenerate, pl)
		case pl.Action != ActionNone:
			toEmbed = append(toEmbed, querySet{tool: pl.Tool, queries: pl.Queries, learned: pl.Learned})
		}
	}

	var pending []querySet
	texts := 0
	flush := func() {
		embed(ctx, p.Embedder, pending, now, &out)
		for _, s := range pending {
			if _, ok := out.Results[s.tool.Entry.Name]; ok {
				p.Generated.forget(s.tool.Entry.Name)
			}
		}
		pending, texts = nil, 0
	}
	// Batches hold at most batch texts (a set larger than that goes
	// alone), so a provider client splitting them into its own request
	// size sends full requests.
	add := func(s querySet) {
		if len(pending) > 0 && texts+len(s.queries)+len(s.learned) > batch {
			flush()
		}
		pending = append(pending, s)
		texts += len(s.queries) + len(s.learned)
	}
	// Generated sets are embedded as they arrive, budget or not: their
	// queries were paid for.
	for g := range generate(ctx, p, toGenerate, spent) {
		switch {
		case g.unreached:
			out.Unreached = append(out.Unreached, g.set.tool.Entry.Name)
		case g.failure != nil:
			out.Failures = append(out.Failures, *g.failure)
		default:
			add(g.set)
		}
	}
	for i, s := range toEmbed {
		// Budget checks fall between batches; the first batch of a pass
		// that did nothing else always runs.
		if (len(pending) == 0 || texts+len(s.queries) > batch) && (i > 0 || out.Done() > 0) && spent() {
			for _, rest := range toEmbed[i:] {
				out.Unreached = append(out.Unreached, rest.tool.Entry.Name)
			}
			break
		}
		add(s)
	}
	if len(pending) > 0 {
		flush()
	}
	out.TimedOut = ctx.Err() != nil
	out.Elapsed = clock().Sub(start)
	return out
}

// cutOff reports whether a tool's error came from the end of the pass's
// context rather than from the tool or its provider.
func cutOff(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

// querySet is a tool and the full query set to embed for it: its
// queries (examples and synthetic) and the requests learned for it.
type querySet struct {
	tool    *Tool
	queries []string
	learned []string
}

// generated is one tool's generation: its full query set, a failure, or
// unreached when the budget or the context ran out before it started (or
// the context ended while it ran).
type generated struct {
	set       querySet
	failure   *Failure
	unreached bool
}

// generate asks for the queries the plans need with bounded concurrency
// and streams each tool's outcome as it completes. After the first wave,
// no request starts once spent reports the budget used up.
func generate(ctx context.Context, p Providers, plans []ToolPlan, spent func() bool) <-chan generated {
	out := make(chan generated, len(plans))
	concurrency := p.Concurrency
	if concurrency <= 0 {
		concurrency = embedding.DefaultConcurrency
	}
	go func() {
		defer close(out)
		var wg sync.WaitGroup
		slots := make(chan struct{}, concurrency)
		for i, pl := range plans {
			slots <- struct{}{}
			set := querySet{tool: pl.Tool, queries: pl.Queries, learned: pl.Learned}
			if ctx.Err() != nil || (i >= concurrency && spent()) {
				<-slots
				for _, rest := range plans[i:] {
					out <- generated{set: querySet{tool: rest.Tool}, unreached: true}
				}
				break
			}
			if qs, ok := p.Generated.recall(pl.Tool.Entry, pl.Generate, pl.Queries); ok {
				<-slots
				set.queries = append(slices.Clone(set.queries), qs...)
				out <- generated{set: set}
				continue
			}
			wg.Add(1)
			go func() {
				defer func() { <-slots; wg.Done() }()
				e := pl.Tool.Entry
				qs, err := p.Generator.GenerateQueries(ctx, embedding.QueryRequest{
					Tool:  embedding.ToolSpec{Name: e.Name, Description: e.Description, Parameters: e.Parameters},
					Count: pl.Generate, Existing: pl.Queries,
				})
				if err == nil {
					p.Generated.keep(e, pl.Queries, qs)
				}
				switch {
				case err != nil && cutOff(ctx, err):
					out <- generated{set: set, unreached: true}
				case err != nil:
					out <- generated{set: set, failure: &Failure{Object: pl.Tool.Object, Tool: e.Name,
						Reason: v1alpha1.ReasonQueryGenerationFailed, Message: err.Error(), Kind: embedding.KindOf(err)}}
				default:
					set.queries = append(slices.Clone(set.queries), qs...)
					out <- generated{set: set}
				}
			}()
		}
		wg.Wait()
	}()
	return out
}

// embed embeds every set in one batched call; when that fails, each tool
// is embedded on its own so one bad tool does not fail the others.
func embed(ctx context.Context, e embedding.Embedder, sets []querySet, now time.Time, out *Refreshed) {
	if len(sets) == 0 {
		return
	}
	queries := make([][]string, len(sets))
	for i, s := range sets {
		queries[i] = append(slices.Clip(s.queries), s.learned...)
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
		if failure != nil && cutOff(ctx, failure) {
			out.Unreached = append(out.Unreached, s.tool.Entry.Name)
			continue
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
				Dimensions: len(centroids[i]), SyntheticQueries: s.queries, LearnedQueries: s.learned, EmbeddedAt: now,
			},
		}
	}
}

// isolatable reports whether embedding tools one by one may get further
// than embedding them together.
func isolatable(err error) bool {
	switch embedding.KindOf(err) {
	case embedding.KindAuth, embedding.KindDimensionMismatch, embedding.KindDenied:
		return false
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}
