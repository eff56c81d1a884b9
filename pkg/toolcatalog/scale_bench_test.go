package toolcatalog_test

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/internal/testing/openaitest"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
	openaiquery "github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/openai"
)

// BenchmarkSearchScale searches the catalog make bench-scale publishes, in
// process: tools whose descriptions share most of their words, 256
// dimensions of provider vectors, each query embedded by an
// OpenAI-compatible endpoint on loopback (embed-only is that round trip
// alone).
func BenchmarkSearchScale(b *testing.B) {
	for _, n := range []int{10000, 50000} {
		const dims = 256
		doc := &contract.Document{Version: 1, Catalog: "bench/scale",
			Embedding: contract.EmbeddingInfo{Model: "text-embedding-3-small", Dimensions: dims},
			Search:    contract.SearchDefaults{Method: "hybrid", TopK: 5}}
		raw := map[string][]byte{}
		for i := range n {
			name := fmt.Sprintf("tool_%05d", i)
			t, _ := contract.NormalizeTool(contract.Tool{Name: name, Description: fmt.Sprintf("Tool %s does one specific thing, number %d, for the users who ask for it.", name, i),
				Parameters: []byte(`{"type":"object","properties":{"query":{"type":"string","description":"what to look for"},"limit":{"type":"integer","description":"how many results"}},"required":["query"]}`)})
			doc.Tools = append(doc.Tools, t)
			f := openaitest.Vector(t.Description, dims)
			v := make([]float32, dims)
			for j := range f {
				v[j] = float32(f[j])
			}
			raw[name] = contract.EncodeVector(v)
		}
		if err := doc.Seal(); err != nil {
			b.Fatal(err)
		}
		c, err := toolcatalog.New(doc, raw)
		if err != nil {
			b.Fatal(err)
		}
		p := openaitest.New(b)
		p.OnEmbeddings = func(w http.ResponseWriter, _ *http.Request, _ int, req openaitest.EmbeddingsRequest) {
			openaitest.WriteEmbeddings(w, req, dims, nil)
		}
		emb, err := openaiquery.New(openaiquery.Config{BaseURL: p.BaseURL(), Model: doc.Embedding.Model, Dimensions: dims})
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		b.Run(fmt.Sprintf("tools=%d/embed-only", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				q := fmt.Sprintf("find the tool that does one specific thing, number %d, for me", i*37)
				if _, err := emb.Embed(context.Background(), []string{q}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		for _, m := range toolcatalog.Methods {
			b.Run(fmt.Sprintf("tools=%d/method=%s", n, m), func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					q := fmt.Sprintf("find the tool that does one specific thing, number %d, for me", i*37)
					if _, err := c.Search(context.Background(), q, toolcatalog.Options{Method: m, TopK: 5, Embedder: emb}); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
}
