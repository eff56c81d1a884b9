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
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/internal/retrieval"
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

	ctx := context.Background()
	if *cross != "" {
		return runCross(ctx, *cross, retrieval.BuildOptions{Embedder: emb, Generator: gen, QueriesPerTool: *perTool, Concurrency: *concurrency})
	}
	ds, err := retrieval.LoadDataset(*data)
	if err != nil {
		return err
	}
	start := time.Now()
	cat, err := retrieval.Build(ctx, ds.Tools, retrieval.BuildOptions{Embedder: emb, Generator: gen, QueriesPerTool: *perTool, Concurrency: *concurrency})
	if err != nil {
		return err
	}
	fmt.Printf("dataset %s: %d tools, %d queries; embedder %s; %d queries per tool; catalog built in %s\n",
		*data, len(ds.Tools), len(ds.Queries), emb.Model(), *perTool, time.Since(start).Round(time.Millisecond))
	if *replay > 0 {
		traffic, test := retrieval.Split(ds.Queries)
		learned := retrieval.Replayed(traffic, *replay)
		fmt.Printf("\nreplay: %d traffic queries recorded as usage, %d tools learned requests (at most %d each); %d test queries\n\nbefore learning (test queries):\n",
			len(traffic), len(learned), *replay, len(test))
		if err := report(ctx, cat, test, emb, *intents); err != nil {
			return err
		}
		learnt, err := retrieval.Build(ctx, ds.Tools, retrieval.BuildOptions{Embedder: emb, Generator: gen, QueriesPerTool: *perTool, Concurrency: *concurrency, Learned: learned})
		if err != nil {
			return err
		}
		fmt.Printf("\nafter learning (test queries):\n")
		return report(ctx, learnt, test, emb, *intents)
	}
	return report(ctx, cat, ds.Queries, emb, *intents)
}

// report evaluates every method on the queries and prints the table.
func report(ctx context.Context, cat *toolcatalog.Catalog, queries []retrieval.Query, emb embedding.Embedder, intents string) error {
	var results []*retrieval.Metrics
	for _, m := range toolcatalog.Methods {
		r, err := retrieval.Evaluate(ctx, cat, queries, toolcatalog.Options{Method: m, Embedder: emb, Intents: intents})
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	return retrieval.WriteReport(os.Stdout, results)
}

// runCross prepares every set under dir and reports the cross-set run.
func runCross(ctx context.Context, dir string, o retrieval.BuildOptions) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var sets []*retrieval.Prepared
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if _, statErr := os.Stat(filepath.Join(path, "tools.json")); !e.IsDir() || statErr != nil {
			continue
		}
		ds, loadErr := retrieval.LoadDataset(path)
		if loadErr != nil {
			return fmt.Errorf("%s: %w", path, loadErr)
		}
		start := time.Now()
		p, prepErr := retrieval.Prepare(ctx, e.Name(), ds, o)
		if prepErr != nil {
			return prepErr
		}
		fmt.Printf("%s: %d tools, %d queries, prepared in %s\n", e.Name(), len(ds.Tools), len(ds.Queries), time.Since(start).Round(time.Second))
		sets = append(sets, p)
	}
	if len(sets) < 2 {
		return fmt.Errorf("%s holds %d datasets; leaving one out needs at least 2", dir, len(sets))
	}
	start := time.Now()
	c, err := retrieval.RunCross(ctx, sets, retrieval.Grid())
	if err != nil {
		return err
	}
	fmt.Printf("%d settings searched on %d sets in %s\n\n", len(c.Settings), len(sets), time.Since(start).Round(time.Second))
	return c.Write(os.Stdout)
}
