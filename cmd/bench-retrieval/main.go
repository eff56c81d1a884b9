// Command bench-retrieval measures tool retrieval on a dataset directory
// holding tools.json ([{name, description, parameters}]) and queries.json
// ([{query, gold: [names]}]). It builds the catalog in-process with the
// operator's query generator and embedder (builtin by default, or an
// OpenAI-compatible endpoint) and prints recall@1/5/10, hit@k, MRR and
// per-query latency percentiles for every search method (bm25, semantic,
// hybrid, rrf).
//
//	bench-retrieval -data ../shared/bench/seal-tools
//
// With -cross, it reads every set under a directory and reports each one
// with the hybrid method's constants chosen on the others (leave one set
// out), beside the shipped defaults:
//
//	bench-retrieval -cross ../shared/bench
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/internal/evaluation"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-retrieval:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		data                           = flag.String("data", "", "dataset directory with tools.json and queries.json (this or -cross is required)")
		cross                          = flag.String("cross", "", "directory of datasets: report each with the hybrid constants chosen on the others")
		perTool                        = flag.Int("queries-per-tool", 5, "synthetic queries generated per tool")
		concurrency                    = flag.Int("concurrency", 3, "query generation requests in flight")
		embURL, embModel, embKeyEnv    = flag.String("embedding-base-url", "", "OpenAI-compatible embeddings base URL; empty uses the builtin model"), flag.String("embedding-model", "", "embedding model"), flag.String("embedding-api-key-env", "OPENAI_API_KEY", "environment variable holding the embeddings API key")
		embDims                        = flag.Int("embedding-dimensions", 0, "requested vector length (0: the model's)")
		replay                         = flag.Int("replay", 0, "replay half of the queries as usage, folding up to N recorded requests per tool into its query set, and report the other half before and after learning (0: off)")
		intents                        = flag.String("intents", toolcatalog.IntentsOn, "on searches each intent of a request that asks for several things; off searches every request whole")
		builtin                        = flag.String("builtin", "sentence", "builtin embedder without -embedding-base-url: sentence (Universal Sentence Encoder lite) or lexical (hashed n-grams)")
		termWeight                     = flag.Float64("term-weight", evaluation.TermWeight, "the share of the candidate model's term half, with -terms held-out")
		gridOut                        = flag.String("grid", "", "with -cross, also write every setting's recall@5 on every set to this file (tab-separated)")
		terms                          = flag.String("terms", "none", "none measures the builtin sentence model; held-out the candidate model: the builtin sentence model beside word weights fitted on the datasets beside the one measured, never on it (docs/search.md)")
		chatURL, chatModel, chatKeyEnv = flag.String("chat-base-url", "", "OpenAI-compatible chat base URL for query generation; empty uses the builtin generator"), flag.String("chat-model", "", "chat model"), flag.String("chat-api-key-env", "OPENAI_API_KEY", "environment variable holding the chat API key")
	)
	flag.Parse()
	if *data == "" && *cross == "" {
		flag.Usage()
		return fmt.Errorf("-data or -cross is required")
	}

	var err error
	var emb embedding.Embedder = embedding.SentenceEmbedder{}
	if *builtin == "lexical" {
		emb = embedding.LexicalEmbedder{}
	}
	if *embURL != "" {
		if emb, err = embedding.NewOpenAIEmbedder(embedding.OpenAIEmbedderConfig{
			OpenAIConfig: embedding.OpenAIConfig{BaseURL: *embURL, APIKey: embedding.Secret(os.Getenv(*embKeyEnv))},
			Model:        *embModel, Dimensions: *embDims,
		}); err != nil {
			return err
		}
	}
	var gen embedding.QueryGenerator = embedding.TemplateQueryGenerator{}
	if *chatURL != "" {
		if gen, err = embedding.NewOpenAIQueryGenerator(embedding.OpenAIQueryGeneratorConfig{
			OpenAIConfig: embedding.OpenAIConfig{BaseURL: *chatURL, APIKey: embedding.Secret(os.Getenv(*chatKeyEnv))},
			Models:       []string{*chatModel},
		}); err != nil {
			return err
		}
	}

	if *terms != "held-out" && *terms != "none" {
		return fmt.Errorf("unknown -terms %q: use none or held-out", *terms)
	}
	// heldOut is the embedder to measure the dataset in dir with: with
	// -terms held-out, the candidate fitted on the datasets beside it.
	heldOut := func(ctx context.Context, dir string) (embedding.Embedder, error) {
		if *terms == "none" {
			return emb, nil
		}
		if _, ok := emb.(embedding.SentenceEmbedder); !ok {
			return nil, fmt.Errorf("-terms held-out measures the builtin sentence model's candidate: drop -embedding-base-url and -builtin")
		}
		return evaluation.HeldOutEmbedder(ctx, filepath.Dir(filepath.Clean(dir)), filepath.Base(filepath.Clean(dir)), *termWeight)
	}

	ctx := context.Background()
	if *cross != "" {
		return runCross(ctx, *cross, evaluation.BuildOptions{Generator: gen, QueriesPerTool: *perTool, Concurrency: *concurrency}, heldOut, *gridOut)
	}
	ds, err := evaluation.LoadDataset(*data)
	if err != nil {
		return err
	}
	if emb, err = heldOut(ctx, *data); err != nil {
		return err
	}
	start := time.Now()
	cat, err := evaluation.Build(ctx, ds.Tools, evaluation.BuildOptions{Embedder: emb, Generator: gen, QueriesPerTool: *perTool, Concurrency: *concurrency})
	if err != nil {
		return err
	}
	fmt.Printf("dataset %s: %d tools, %d queries; embedder %s; %d queries per tool; catalog built in %s\n",
		*data, len(ds.Tools), len(ds.Queries), emb.Model(), *perTool, time.Since(start).Round(time.Millisecond))
	if *replay > 0 {
		return replayUsage(ctx, ds, cat, evaluation.BuildOptions{Embedder: emb, Generator: gen, QueriesPerTool: *perTool, Concurrency: *concurrency}, *replay, *intents)
	}
	return report(ctx, cat, ds.Queries, emb, *intents)
}

// replayUsage records every other query of ds as usage, learns up to
// perTool requests per tool from it, and reports the other queries before
// and after learning: every method, learning's reach, and the queries
// asking only for tools no traffic recorded, which learning must not
// lower.
func replayUsage(ctx context.Context, ds *evaluation.Dataset, before *toolcatalog.Catalog, o evaluation.BuildOptions, perTool int, intents string) error {
	traffic, test := evaluation.Split(ds.Queries)
	o.Learned = evaluation.Replayed(traffic, perTool)
	fmt.Printf("\nreplay: %d traffic queries recorded as usage, %d tools learned requests (at most %d each); %d test queries\n\nbefore learning (test queries):\n",
		len(traffic), len(o.Learned), perTool, len(test))
	if err := report(ctx, before, test, o.Embedder, intents); err != nil {
		return err
	}
	hybrid := toolcatalog.Options{Method: toolcatalog.Hybrid, Embedder: o.Embedder, Intents: intents}
	reach, err := evaluation.LearningReach(ctx, before, traffic, test, hybrid)
	if err != nil {
		return err
	}
	fmt.Printf("\nlearning's reach (hybrid): recall@5 %.3f if every recorded tool were found\n", reach)
	after, err := evaluation.Build(ctx, ds.Tools, o)
	if err != nil {
		return err
	}
	fmt.Printf("\nafter learning (test queries):\n")
	if err = report(ctx, after, test, o.Embedder, intents); err != nil {
		return err
	}
	unrecorded := evaluation.Unrecorded(traffic, test)
	if len(unrecorded) == 0 {
		return nil
	}
	// recall is the hybrid recall@5 of queries before and after learning.
	recall := func(queries []evaluation.Query) (r [2]float64, err error) {
		for i, cat := range []*toolcatalog.Catalog{before, after} {
			var m *evaluation.Metrics
			if m, err = evaluation.Evaluate(ctx, cat, queries, hybrid); err != nil {
				return r, err
			}
			r[i] = m.Recall[5]
		}
		return r, nil
	}
	r, err := recall(unrecorded)
	if err != nil {
		return err
	}
	fmt.Printf("\n%d test queries ask only for tools no traffic recorded: hybrid recall@5 %.3f before learning, %.3f after\n", len(unrecorded), r[0], r[1])
	unlike, err := evaluation.LeastLike(ctx, o.Embedder, traffic, unrecorded, 0.25)
	if err != nil || len(unlike) == 0 {
		return err
	}
	if r, err = recall(unlike); err != nil {
		return err
	}
	fmt.Printf("the quarter of them least like any recorded request (%d): %.3f before, %.3f after\n", len(unlike), r[0], r[1])
	return nil
}

// report evaluates every method on the queries and prints the table.
func report(ctx context.Context, cat *toolcatalog.Catalog, queries []evaluation.Query, emb embedding.Embedder, intents string) error {
	var results []*evaluation.Metrics
	for _, m := range toolcatalog.Methods {
		r, err := evaluation.Evaluate(ctx, cat, queries, toolcatalog.Options{Method: m, Embedder: emb, Intents: intents})
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	return evaluation.WriteReport(os.Stdout, results)
}

// runCross prepares every set under dir and reports the cross-set run.
func runCross(ctx context.Context, dir string, o evaluation.BuildOptions, embedderFor func(context.Context, string) (embedding.Embedder, error), gridOut string) error {
	dirs, err := evaluation.Datasets(dir)
	if err != nil {
		return err
	}
	var sets []*evaluation.Prepared
	for _, path := range dirs {
		ds, loadErr := evaluation.LoadDataset(path)
		if loadErr != nil {
			return fmt.Errorf("%s: %w", path, loadErr)
		}
		start := time.Now()
		if o.Embedder, err = embedderFor(ctx, path); err != nil {
			return err
		}
		name := filepath.Base(path)
		p, prepErr := evaluation.Prepare(ctx, name, ds, o)
		if prepErr != nil {
			return prepErr
		}
		fmt.Printf("%s: %d tools, %d queries, embedder %s, prepared in %s\n", name, len(ds.Tools), len(ds.Queries), o.Embedder.Model(), time.Since(start).Round(time.Second))
		sets = append(sets, p)
	}
	if len(sets) < 2 {
		return fmt.Errorf("%s holds %d datasets; leaving one out needs at least 2", dir, len(sets))
	}
	start := time.Now()
	c, err := evaluation.RunCross(ctx, sets, evaluation.Grid())
	if err != nil {
		return err
	}
	fmt.Printf("%d settings searched on %d sets in %s\n\n", len(c.Settings), len(sets), time.Since(start).Round(time.Second))
	if gridOut != "" {
		var b bytes.Buffer
		if err := c.WriteGrid(&b); err != nil {
			return err
		}
		if err := os.WriteFile(gridOut, b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return c.Write(os.Stdout)
}
