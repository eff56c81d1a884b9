package builtin_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/builtin"
)

// oneIntentRequests are requests of about eight words that ask for one
// thing, as most searches do.
var oneIntentRequests = []string{
	"will it rain in Lisbon tomorrow afternoon please",
	"send the quarterly sales report to the finance team",
	"book a flight from Oslo to Denver tomorrow",
	"cancel my last order from the online shop",
	"how much is my stock portfolio worth today",
	"track the shipment from Berlin to Madrid please",
	"scale the api deployment to five replicas now",
	"translate this contract into German by next Friday",
}

// BenchmarkDefaultSearch measures a search as a consumer runs it with the
// builtin model: the request embedded, then the catalog's default method
// (hybrid) over 10,000 tools of the builtin model's vectors. Besides the
// mean it reports the median (p50-ms), which the latency target is of.
// Run it with -cpu 1 for one core: with more, the BM25 arm is ranked
// while the request is embedded.
func BenchmarkDefaultSearch(b *testing.B) {
	cat := builtinCatalog(b, 10000)
	b.Run("tools=10000/words=8", func(b *testing.B) {
		took := make([]time.Duration, 0, 1024)
		i := 0
		for b.Loop() {
			start := time.Now()
			resp, err := cat.Search(context.Background(), oneIntentRequests[i%len(oneIntentRequests)], toolcatalog.Options{Embedder: builtin.Embedder{}})
			if err != nil {
				b.Fatal(err)
			}
			if resp.Method != toolcatalog.Hybrid || resp.Fallback != "" {
				b.Fatalf("searched with %s (%s), want the default hybrid", resp.Method, resp.Fallback)
			}
			took = append(took, time.Since(start))
			i++
		}
		slices.Sort(took)
		b.ReportMetric(float64(took[len(took)/2].Nanoseconds())/1e6, "p50-ms")
	})
}

// builtinCatalog is a catalog of n tools whose descriptions the builtin
// model embedded, searched by default with hybrid.
func builtinCatalog(b *testing.B, n int) *toolcatalog.Catalog {
	b.Helper()
	verbs := []string{"get", "create", "delete", "update", "list", "search", "send", "book", "convert", "analyze",
		"schedule", "cancel", "export", "import", "summarize", "translate", "track", "scale", "approve", "archive"}
	nouns := []string{"weather", "email", "issue", "invoice", "flight", "order", "user", "report", "image", "song",
		"event", "ticket", "payment", "document", "deployment", "package", "contract", "stock", "recipe", "playlist",
		"account", "message", "shipment", "dataset", "review"}
	scopes := []string{"for a team", "by its id", "in a region", "for a customer", "in bulk", "from an archive",
		"for a project", "with a filter", "for today", "across accounts", "in a sandbox", "for an admin",
		"from a partner", "with a template", "for a city", "in a folder", "by a date range", "for a vendor",
		"with a tag", "for a store"}
	doc := &contract.Document{
		Version: 1, Catalog: "bench/builtin",
		Embedding: contract.EmbeddingInfo{Provider: "builtin", Model: builtin.Model, Dimensions: builtin.Dimensions},
		Search:    contract.SearchDefaults{Method: string(toolcatalog.Hybrid), TopK: 10},
	}
	texts := make([]string, n)
	for i := range n {
		v, o, s := verbs[i%len(verbs)], nouns[i/len(verbs)%len(nouns)], scopes[i/(len(verbs)*len(nouns))%len(scopes)]
		name := fmt.Sprintf("%s_%s_%d", v, o, i)
		texts[i] = fmt.Sprintf("%s the %s %s.", v, o, s)
		t, err := contract.NormalizeTool(contract.Tool{Name: name, Description: texts[i],
			Parameters: []byte(`{"type":"object","properties":{"id":{"type":"string","description":"The identifier."}}}`)})
		if err != nil {
			b.Fatal(err)
		}
		doc.Tools = append(doc.Tools, t)
	}
	vecs, err := builtin.Embedder{}.Embed(context.Background(), texts)
	if err != nil {
		b.Fatal(err)
	}
	vectors := make(map[string][]byte, n)
	for i, t := range doc.Tools {
		vectors[t.Name] = contract.EncodeVector(vecs[i])
	}
	slices.SortFunc(doc.Tools, func(a, c contract.Tool) int { return cmp.Compare(a.Name, c.Name) })
	if err = doc.Seal(); err != nil {
		b.Fatal(err)
	}
	cat, err := toolcatalog.New(doc, vectors)
	if err != nil {
		b.Fatal(err)
	}
	return cat
}
