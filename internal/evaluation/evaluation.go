// Package evaluation measures how well a catalog finds the right tools: it
// builds a catalog in-process from a dataset of tools with the project's
// real query generator and embedder, runs the dataset's queries through
// each search method and reports recall, hit rate, MRR and latency.
package evaluation

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
)

// Tool is one entry of tools.json.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Query is one entry of queries.json.
type Query struct {
	Query string   `json:"query"`
	Gold  []string `json:"gold"`
	// Split names the part of the set the query belongs to (MetaTool's
	// "single" and "multi"); empty when the set has none.
	Split string `json:"split,omitempty"`
}

// Dataset is a retrieval dataset.
type Dataset struct {
	Tools   []Tool
	Queries []Query
}

// LoadDataset reads dir/tools.json and dir/queries.json. Queries whose gold
// tools are not all in tools.json are an error: they could never be found.
func LoadDataset(dir string) (*Dataset, error) {
	d := &Dataset{}
	for file, dst := range map[string]any{"tools.json": &d.Tools, "queries.json": &d.Queries} {
		raw, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
	}
	names := map[string]bool{}
	for _, t := range d.Tools {
		if names[t.Name] {
			return nil, fmt.Errorf("tools.json: tool %q appears twice", t.Name)
		}
		names[t.Name] = true
	}
	for i, q := range d.Queries {
		if len(q.Gold) == 0 {
			return nil, fmt.Errorf("queries.json: query %d has no gold tools", i)
		}
		for _, g := range q.Gold {
			if !names[g] {
				return nil, fmt.Errorf("queries.json: query %d names unknown tool %q", i, g)
			}
		}
	}
	return d, nil
}

// BuildOptions say how to build the catalog.
type BuildOptions struct {
	Embedder       embedding.Embedder
	Generator      embedding.QueryGenerator
	QueriesPerTool int
	Concurrency    int
	// Learned are recorded requests per tool, embedded with its queries
	// as a learning catalog does.
	Learned map[string][]string
}

// Build turns the dataset's tools into a searchable catalog the way the
// operator does: generate queries per tool, embed them in batches, publish
// each tool's centroid.
func Build(ctx context.Context, tools []Tool, o BuildOptions) (*toolcatalog.Catalog, error) {
	doc := &contract.Document{
		Version: 1, Catalog: "bench/retrieval",
		Embedding: contract.EmbeddingInfo{Model: o.Embedder.Model()},
		Search:    contract.SearchDefaults{Method: string(toolcatalog.Hybrid), TopK: 10},
	}
	reqs := make([]embedding.QueryRequest, len(tools))
	for i, t := range tools {
		entry, err := contract.NormalizeTool(contract.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
		if err != nil {
			return nil, err
		}
		doc.Tools = append(doc.Tools, entry)
		reqs[i] = embedding.QueryRequest{Tool: embedding.ToolSpec{Name: t.Name, Description: t.Description, Parameters: t.Parameters},
			Count: catalog.ExpectedQueries(o.QueriesPerTool, nil)}
	}
	sets := make([][]string, len(tools))
	for i, r := range embedding.GenerateAll(ctx, o.Generator, reqs, o.Concurrency) {
		if r.Err != nil {
			return nil, fmt.Errorf("generating queries for %s: %w", tools[i].Name, r.Err)
		}
		sets[i] = append(r.Queries, o.Learned[tools[i].Name]...)
	}
	centroids, errs, err := embedding.QueryCentroids(ctx, o.Embedder, sets)
	if err != nil {
		return nil, err
	}
	vectors := map[string][]byte{}
	for i, c := range centroids {
		if errs[i] != nil {
			return nil, fmt.Errorf("embedding %s: %w", tools[i].Name, errs[i])
		}
		vectors[tools[i].Name] = contract.EncodeVector(c)
		doc.Embedding.Dimensions = len(c)
	}
	if err := doc.Seal(); err != nil {
		return nil, err
	}
	return toolcatalog.New(doc, vectors)
}

// Ks are the cut-offs reported.
var Ks = []int{1, 5, 10}

// Metrics are one method's results over a query set.
type Metrics struct {
	Method  toolcatalog.Method
	Queries int
	// Recall[k] is the mean share of gold tools in the top k; Hit[k] the
	// share of queries with at least one gold tool in the top k.
	Recall, Hit map[int]float64
	// MRR is the mean reciprocal rank of the first gold tool (0 beyond 10).
	MRR float64
	// NDCG10 is the mean nDCG@10, each gold tool of gain 1; Complete[k]
	// the share of queries with every gold tool in the top k (5 and 10).
	NDCG10   float64
	Complete map[int]float64
	// Split is the part of the set these are of, empty for all of it;
	// Splits are the metrics of each part, when the set has parts.
	Split  string
	Splits []*Metrics
	// Latency percentiles of one search, query embedding included.
	P50, P90, P99 time.Duration
	// Fallbacks counts searches that fell back to BM25.
	Fallbacks int
}

// Evaluate runs every query through one search setting (opts.Method,
// with opts.Embedder for the semantic arm). The measures at each k of Ks
// are of a search for k tools, as a client asking for k sees them (a
// request of several intents shares the k places among them); MRR and
// nDCG are of the search for the most. The latency is that search's, the
// query embedded.
func Evaluate(ctx context.Context, c *toolcatalog.Catalog, queries []Query, opts toolcatalog.Options) (*Metrics, error) {
	method := opts.Method
	m := newMetrics(method, "")
	splits := map[string]*Metrics{}
	if opts.Embedder != nil {
		// The searches for fewer tools embed nothing again.
		opts.Embedder = toolcatalog.CacheQueries(opts.Embedder, 64)
	}
	latencies := make([]time.Duration, 0, len(queries))
	for _, q := range queries {
		at := map[int][]string{}
		var fallback bool
		for i := len(Ks) - 1; i >= 0; i-- {
			opts.TopK = Ks[i]
			start := time.Now()
			resp, err := c.Search(ctx, q.Query, opts)
			if err != nil {
				return nil, err
			}
			if i == len(Ks)-1 {
				latencies = append(latencies, time.Since(start))
				fallback = resp.Fallback != ""
			}
			for _, r := range resp.Results {
				at[Ks[i]] = append(at[Ks[i]], r.Tool.Name)
			}
		}
		m.add(at, q.Gold, fallback)
		if q.Split != "" {
			if splits[q.Split] == nil {
				splits[q.Split] = newMetrics(method, q.Split)
			}
			splits[q.Split].add(at, q.Gold, fallback)
		}
	}
	m.finish()
	for _, name := range slices.Sorted(maps.Keys(splits)) {
		splits[name].finish()
		m.Splits = append(m.Splits, splits[name])
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	m.P50, m.P90, m.P99 = percentile(latencies, 50), percentile(latencies, 90), percentile(latencies, 99)
	return m, nil
}

func newMetrics(method toolcatalog.Method, split string) *Metrics {
	return &Metrics{Method: method, Split: split, Recall: map[int]float64{}, Hit: map[int]float64{}, Complete: map[int]float64{}}
}

// add scores one query's ranked tools, at[k] those of a search for k
// tools (k in Ks); fallback says its search fell back to BM25.
func (m *Metrics) add(at map[int][]string, gold []string, fallback bool) {
	if fallback {
		m.Fallbacks++
	}
	for _, k := range Ks {
		recall, hit, _ := Score(at[k], gold)
		m.Recall[k] += recall[k]
		m.Hit[k] += hit[k]
	}
	for _, k := range CompleteKs {
		if Complete(at[k], gold, k) {
			m.Complete[k]++
		}
	}
	ranked := at[Ks[len(Ks)-1]]
	_, _, rr := Score(ranked, gold)
	m.MRR += rr
	m.NDCG10 += NDCG(ranked, gold, 10)
	m.Queries++
}

// finish turns the sums into means.
func (m *Metrics) finish() {
	n := float64(max(m.Queries, 1))
	for _, k := range Ks {
		m.Recall[k] /= n
		m.Hit[k] /= n
	}
	for _, k := range CompleteKs {
		m.Complete[k] /= n
	}
	m.MRR /= n
	m.NDCG10 /= n
}

// CompleteKs are the cut-offs of Complete reported.
var CompleteKs = []int{5, 10}

// NDCG is the normalised discounted cumulative gain of ranked at k, each
// gold tool of gain 1: the measure ToolRet and other tool-retrieval
// benchmarks report.
func NDCG(ranked, gold []string, k int) float64 {
	isGold := map[string]bool{}
	for _, g := range gold {
		isGold[g] = true
	}
	relevant := len(isGold)
	var dcg, ideal float64
	for i, name := range ranked[:min(k, len(ranked))] {
		if isGold[name] {
			dcg += 1 / math.Log2(float64(i+2))
			delete(isGold, name) // a tool listed twice counts once
		}
	}
	for i := range min(k, relevant) {
		ideal += 1 / math.Log2(float64(i+2))
	}
	if ideal == 0 {
		return 0
	}
	return dcg / ideal
}

// Complete reports whether every gold tool is in the top k of ranked.
func Complete(ranked, gold []string, k int) bool {
	top := ranked[:min(k, len(ranked))]
	for _, g := range gold {
		if !slices.Contains(top, g) {
			return false
		}
	}
	return len(gold) > 0
}

// Score rates one ranked list against the gold tools: recall and hit at
// each of Ks, and the reciprocal rank of the first gold tool.
func Score(ranked, gold []string) (recall, hit map[int]float64, rr float64) {
	recall, hit = map[int]float64{}, map[int]float64{}
	isGold := map[string]bool{}
	for _, g := range gold {
		isGold[g] = true
	}
	found := 0
	for i, name := range ranked {
		if isGold[name] {
			found++
			if rr == 0 {
				rr = 1 / float64(i+1)
			}
		}
		for _, k := range Ks {
			if i+1 == k {
				recall[k] = float64(found) / float64(len(isGold))
				if found > 0 {
					hit[k] = 1
				}
			}
		}
	}
	// Lists shorter than k keep their final counts.
	for _, k := range Ks {
		if len(ranked) < k {
			recall[k] = float64(found) / float64(len(isGold))
			if found > 0 {
				hit[k] = 1
			}
		}
	}
	return recall, hit, rr
}

func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	return sorted[min(max(i-1, 0), len(sorted)-1)]
}

// Split divides queries into traffic (every other one, starting with the
// first) and test.
func Split(queries []Query) (traffic, test []Query) {
	for i, q := range queries {
		if i%2 == 0 {
			traffic = append(traffic, q)
		} else {
			test = append(test, q)
		}
	}
	return traffic, test
}

// Replayed is what a catalog learns from replayed traffic: each query
// recorded once for each of its gold tools, folded as the operator does
// (at most perTool requests per tool; minCount 1, since a public set
// rarely repeats a request).
func Replayed(traffic []Query, perTool int) map[string][]string {
	var recorded []contract.Recorded
	for _, q := range traffic {
		for _, g := range q.Gold {
			recorded = append(recorded, contract.Recorded{Tool: g, Request: q.Query, Count: 1})
		}
	}
	return catalog.Learn(recorded, nil, catalog.LearnOptions{PerTool: perTool, MinCount: 1})
}

// LearningReach is the recall@5 of the test queries if learning from
// traffic found every tool it recorded: each query's gold tools found in
// its top five as searched with opts, or recorded for some traffic query
// (Replayed learns a request for each of those), at most five. Learning
// moves only the recorded tools' vectors, so it cannot lift a query much
// past this; a set whose test queries mostly ask for tools no traffic
// asked for has little to learn.
func LearningReach(ctx context.Context, c *toolcatalog.Catalog, traffic, test []Query, opts toolcatalog.Options) (float64, error) {
	if len(test) == 0 {
		return 0, nil
	}
	recorded := recordedTools(traffic)
	opts.TopK = 5
	var sum float64
	for _, q := range test {
		resp, err := c.Search(ctx, q.Query, opts)
		if err != nil {
			return 0, err
		}
		found := map[string]bool{}
		for _, r := range resp.Results {
			found[r.Tool.Name] = true
		}
		gold := map[string]bool{}
		reached := 0
		for _, g := range q.Gold {
			if gold[g] {
				continue
			}
			gold[g] = true
			if found[g] || recorded[g] {
				reached++
			}
		}
		sum += float64(min(reached, 5)) / float64(len(gold))
	}
	return sum / float64(len(test)), nil
}

// Unrecorded are the test queries that ask only for tools no traffic query
// asked for: learning changes none of their tools, so it must not lower
// them.
func Unrecorded(traffic, test []Query) []Query {
	recorded := recordedTools(traffic)
	var out []Query
	for _, q := range test {
		if !slices.ContainsFunc(q.Gold, func(g string) bool { return recorded[g] }) {
			out = append(out, q)
		}
	}
	return out
}

// recordedTools are the tools some traffic query asked for.
func recordedTools(traffic []Query) map[string]bool {
	recorded := map[string]bool{}
	for _, q := range traffic {
		for _, g := range q.Gold {
			recorded[g] = true
		}
	}
	return recorded
}

// LeastLike is the share (0 to 1) of queries least like any traffic
// query: ranked by the cosine of each to its nearest traffic query, with
// emb, the lowest first. Learning moves tools toward what traffic asked;
// these ask least like it, so it must not lower them.
func LeastLike(ctx context.Context, emb embedding.Embedder, traffic, queries []Query, share float64) ([]Query, error) {
	n := int(float64(len(queries)) * share)
	if n == 0 || len(traffic) == 0 {
		return nil, nil
	}
	texts := make([]string, 0, len(traffic)+len(queries))
	for _, q := range traffic {
		texts = append(texts, q.Query)
	}
	for _, q := range queries {
		texts = append(texts, q.Query)
	}
	vecs, err := emb.Embed(ctx, texts)
	if err != nil {
		return nil, err
	}
	recorded, asked := vecs[:len(traffic)], vecs[len(traffic):]
	nearest := make([]float64, len(queries))
	for i, v := range asked {
		nearest[i] = math.Inf(-1)
		for _, r := range recorded {
			nearest[i] = max(nearest[i], embedding.Cosine(v, r))
		}
	}
	order := make([]int, len(queries))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return nearest[order[a]] < nearest[order[b]] })
	out := make([]Query, n)
	for k, i := range order[:n] {
		out[k] = queries[i]
	}
	return out, nil
}
