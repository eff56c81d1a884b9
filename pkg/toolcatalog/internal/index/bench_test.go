package index

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/internal/published/versions"

	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/text"
)

var (
	benchVerbs = []string{"get", "create", "delete", "update", "list", "search", "send", "book", "convert", "analyze",
		"schedule", "cancel", "export", "import", "summarize", "translate", "track", "scale", "approve", "archive"}
	benchNouns = []string{"weather", "email", "issue", "invoice", "flight", "order", "user", "report", "image", "song",
		"event", "ticket", "payment", "document", "deployment", "package", "contract", "stock", "recipe", "playlist",
		"account", "message", "shipment", "dataset", "review"}
	benchQueries = []string{"will it rain tomorrow in Paris", "send the quarterly report to finance", "book a flight to Denver",
		"cancel my last order", "how much is my stock worth", "track the shipment from Berlin", "scale the api deployment"}
)

// benchCatalog builds a catalog of n distinct synthetic tools with builtin
// vectors.
func benchCatalog(b testing.TB, n int) *Catalog { return benchCatalogWide(b, n, 1) }

// benchCatalogWide is benchCatalog with each vector repeated times
// times: the vectors are as many times longer and rank the same.
func benchCatalogWide(b testing.TB, n, times int) *Catalog {
	b.Helper()
	doc := &contract.Document{Version: 1, Catalog: "bench/search",
		Embedding: contract.EmbeddingInfo{Model: embedding.BuiltinLexicalModel, Dimensions: times * embedding.BuiltinLexicalDimensions},
		Search:    contract.SearchDefaults{Method: "hybrid", TopK: 5}}
	texts := make([]string, n)
	for i := range n {
		verb, noun := benchVerbs[i%len(benchVerbs)], benchNouns[(i/len(benchVerbs))%len(benchNouns)]
		name := fmt.Sprintf("%s_%s_%d", verb, noun, i)
		texts[i] = fmt.Sprintf("%s the %s in system %d, with options for region %d", verb, noun, i%97, i%13)
		t, _ := contract.NormalizeTool(contract.Tool{Name: name, Description: texts[i], Parameters: []byte(`{"type":"object","properties":{"id":{},"region":{}}}`)})
		doc.Tools = append(doc.Tools, t)
	}
	vecs, err := embedding.LexicalEmbedder{}.Embed(context.Background(), texts)
	if err != nil {
		b.Fatal(err)
	}
	raw := map[string][]byte{}
	for i, v := range vecs {
		raw[doc.Tools[i].Name] = contract.EncodeVector(repeated(v, times))
	}
	if sealErr := doc.Seal(); sealErr != nil {
		b.Fatal(sealErr)
	}
	c, err := New(doc, raw)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// embeddedQueries answers the benchmark queries with vectors embedded
// beforehand, so a search's time excludes embedding its query.
type embeddedQueries map[string][]float32

// embedBeforehand embeds texts with the fixture model for embeddedQueries.
func embedBeforehand(b *testing.B, texts []string) embeddedQueries {
	return embedBeforehandWide(b, texts, 1)
}

// embedBeforehandWide is embedBeforehand for benchCatalogWide.
func embedBeforehandWide(b *testing.B, texts []string, times int) embeddedQueries {
	vecs, err := embedding.LexicalEmbedder{}.Embed(context.Background(), texts)
	if err != nil {
		b.Fatal(err)
	}
	queries := embeddedQueries{}
	for i, t := range texts {
		queries[t] = repeated(vecs[i], times)
	}
	return queries
}

// repeated is v repeated times times, at unit length when v is.
func repeated(v []float32, times int) []float32 {
	if times == 1 {
		return v
	}
	out := make([]float32, 0, times*len(v))
	scale := float32(1 / math.Sqrt(float64(times)))
	for range times {
		for _, x := range v {
			out = append(out, x*scale)
		}
	}
	return out
}

func (e embeddedQueries) Model() string { return embedding.BuiltinLexicalModel }

func (e embeddedQueries) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = e[t]
	}
	return out, nil
}

func BenchmarkSearch(b *testing.B) {
	for _, size := range []struct{ tools, times int }{{1000, 1}, {10000, 1}, {50000, 1}, {10000, 2}} {
		n := size.tools
		queries := embedBeforehandWide(b, benchQueries, size.times)
		c := benchCatalogWide(b, n, size.times)
		name := fmt.Sprintf("tools=%d", n)
		if size.times > 1 {
			// As long as the candidate model's vectors (docs/search.md).
			name += fmt.Sprintf("/dims=%d", c.dims)
		}
		runtime.GC() // the build's garbage is not collected during the searches
		for _, m := range Methods {
			b.Run(fmt.Sprintf("%s/method=%s", name, m), func(b *testing.B) {
				opts := Options{Method: m, TopK: 10, Embedder: queries}
				if m == Hybrid {
					// The benchmark's queries hold few distinctive
					// words; blend them all instead of ranking some by
					// the cosine alone.
					opts.MinLexicalEvidence = new(0.0)
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if _, err := c.Search(context.Background(), benchQueries[i%len(benchQueries)], opts); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
}

func BenchmarkLoadIndex10k(b *testing.B) {
	c := benchCatalog(b, 10000)
	raw := map[string][]byte{}
	for name, v := range c.Vectors {
		raw[name] = contract.EncodeVector(v)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := New(c.Document, raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNextIndex10k indexes the next version of a 10,000-tool
// catalog in which one description changed (compare BenchmarkLoadIndex10k).
func BenchmarkNextIndex10k(b *testing.B) {
	c := benchCatalog(b, 10000)
	raw := map[string][]byte{}
	for name, v := range c.Vectors {
		raw[name] = contract.EncodeVector(v)
	}
	doc := *c.Document
	doc.Tools = slices.Clone(doc.Tools)
	doc.Tools[42].Description = "a description edited since"
	b.ReportAllocs()
	for b.Loop() {
		c.Next(&doc, raw)
	}
}

// BenchmarkLoadFromRedis loads a published catalog of 10,000 and of
// 50,000 tools with 256-dimension vectors and five synthetic queries per
// tool.
func BenchmarkLoadFromRedis(b *testing.B) {
	ctx := context.Background()
	c := server.Get(b).Client()
	defer c.Close()
	for _, n := range []int{10000, 50000} {
		k := Keys("bench", fmt.Sprintf("load-%d", n))
		src := benchCatalog(b, n)
		doc := *src.Document
		doc.Embedding.Dimensions = 256
		if err := doc.Seal(); err != nil {
			b.Fatal(err)
		}
		vectors, meta := map[string][]byte{}, map[string][]byte{}
		vec := make([]float32, 256)
		for i, t := range doc.Tools {
			vec[i%256] = 1
			vectors[t.Name] = contract.EncodeVector(vec)
			vec[i%256] = 0
			m := &contract.Metadata{SpecHash: t.SpecHash, Description: t.Description, Model: doc.Embedding.Model, Dimensions: 256,
				SyntheticQueries: []string{"first request for " + t.Name, "second request", "third request", "fourth request", "fifth request"}}
			meta[t.Name], _ = m.Marshal()
		}
		c.Del(ctx, k.Head(), k.Tools(), k.Version())
		if err := versions.Write(ctx, c, k, versions.Update{Document: &doc, Rewrite: true, Vectors: vectors, Metadata: meta, Retain: 1}); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Load(ctx, c, k); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSearchHugeQuery is a client sending a 3 MiB query: only
// MaxQueryBytes of it are read, so time and bytes per search stay those
// of an ordinary request (compare BenchmarkSearch at 1,000 tools).
func BenchmarkSearchHugeQuery(b *testing.B) {
	c := benchCatalog(b, 1000)
	query := strings.Repeat("find the weather forecast and send an email about it ", 3<<20/54)
	for _, m := range []Method{BM25, Hybrid} {
		b.Run("method="+string(m), func(b *testing.B) {
			opts := Options{Method: m, TopK: 10, Embedder: embedding.LexicalEmbedder{}}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Search(context.Background(), query, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGrade10k grades 200 tools of a 10,000-tool catalog whole, three
// queries each: the first grading of a large catalog (a version's grading
// searches a few dozen of them again).
func BenchmarkGrade10k(b *testing.B) {
	c := benchCatalog(b, 10000)
	sets := map[string]QuerySet{}
	for i := 0; i < 10000; i += 50 {
		t := c.Document.Tools[i]
		qs := []string{"please " + t.Description, t.Name + " now", "I want to " + strings.ReplaceAll(t.Name, "_", " ")}
		vecs, err := embedding.LexicalEmbedder{}.Embed(context.Background(), qs)
		if err != nil {
			b.Fatal(err)
		}
		sets[t.Name] = QuerySet{Queries: qs, Vectors: vecs}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := (&grader{maxSearches: -1}).grade(context.Background(), c, sets); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSearchIntents searches requests of two and three intents in a
// 10,000-tool catalog, the texts embedded beforehand; ns/intent is the
// time per intent, to set beside BenchmarkSearch's one-intent queries.
func BenchmarkSearchIntents(b *testing.B) {
	requests := []string{
		"Find the weather forecast for Paris. Then send an email to the team about it.",
		"Open an issue about the crash, and then translate the report to German. Also search the web for recent news.",
	}
	var texts []string
	for _, r := range requests {
		texts = append(texts, r)
		texts = append(texts, text.Intents(r)...)
	}
	queries := embedBeforehand(b, texts)
	c := benchCatalog(b, 10000)
	runtime.GC()
	for _, m := range Methods {
		for _, r := range requests {
			n := len(text.Intents(r))
			b.Run(fmt.Sprintf("method=%s/intents=%d", m, n), func(b *testing.B) {
				opts := Options{Method: m, TopK: 10, Embedder: queries, MinLexicalEvidence: new(0.0)}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := c.Search(context.Background(), r, opts); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/intent")
			})
		}
	}
}
