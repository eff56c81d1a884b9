package retrieval

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
)

func TestScore(t *testing.T) {
	tests := []struct {
		name       string
		ranked     []string
		gold       []string
		recall1    float64
		recall5    float64
		hit1, hit5 float64
		rr         float64
	}{
		{"first", []string{"a", "b", "c"}, []string{"a"}, 1, 1, 1, 1, 1},
		{"third", []string{"x", "y", "a", "z"}, []string{"a"}, 0, 1, 0, 1, 1.0 / 3},
		{"missing", []string{"x", "y"}, []string{"a"}, 0, 0, 0, 0, 0},
		{"two gold, one found first", []string{"a", "x", "y", "z", "w", "b"}, []string{"a", "b"}, 0.5, 0.5, 1, 1, 1},
		{"two gold, both in five", []string{"x", "b", "a"}, []string{"a", "b"}, 0, 1, 0, 1, 0.5},
	}
	for _, tt := range tests {
		recall, hit, rr := Score(tt.ranked, tt.gold)
		if recall[1] != tt.recall1 || recall[5] != tt.recall5 || hit[1] != tt.hit1 || hit[5] != tt.hit5 || rr != tt.rr {
			t.Errorf("%s: recall@1 %v @5 %v hit@1 %v @5 %v rr %v", tt.name, recall[1], recall[5], hit[1], hit[5], rr)
		}
	}
}

func TestLoadDatasetRejectsUnknownGold(t *testing.T) {
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, "tools.json"), []byte(`[{"name":"a","description":"A."}]`), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "queries.json"), []byte(`[{"query":"q","gold":["b"]}]`), 0o644)
	if _, err := LoadDataset(dir); err == nil || !strings.Contains(err.Error(), `unknown tool "b"`) {
		t.Fatalf("want an unknown-tool error, got %v", err)
	}
}

func TestMiniDatasetEndToEnd(t *testing.T) {
	ds, err := LoadDataset("testdata/mini")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	emb := embedding.LexicalEmbedder{}
	cat, err := Build(ctx, ds.Tools, BuildOptions{Embedder: emb, Generator: embedding.TemplateQueryGenerator{}, QueriesPerTool: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(cat.Tools()) != 20 || len(cat.Vectors) != 20 {
		t.Fatalf("catalog has %d tools and %d vectors, want 20 of each", len(cat.Tools()), len(cat.Vectors))
	}
	var all []*Metrics
	for _, m := range []toolcatalog.Method{toolcatalog.BM25, toolcatalog.Semantic, toolcatalog.Hybrid} {
		r, err := Evaluate(ctx, cat, ds.Queries, m, emb)
		if err != nil {
			t.Fatal(err)
		}
		if r.Fallbacks != 0 {
			t.Errorf("%s fell back %d times", m, r.Fallbacks)
		}
		// A floor well under what the methods reach, so a regression in
		// indexing, embedding or fusion shows.
		if r.Hit[10] < 0.4 || r.MRR <= 0 || r.P50 <= 0 {
			t.Errorf("%s: hit@10 %.3f MRR %.3f p50 %v", m, r.Hit[10], r.MRR, r.P50)
		}
		all = append(all, r)
	}
	var out bytes.Buffer
	if err := WriteReport(&out, all); err != nil {
		t.Fatal(err)
	}
	t.Logf("mini dataset:\n%s", out.String())
	for _, s := range []string{"method", "recall@10", "bm25", "semantic", "hybrid"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("report lacks %q", s)
		}
	}
}

// The builtin sentence encoder must find paraphrased requests that share
// no words with the tool (the mini dataset is written that way), and
// hybrid search must find them first as often as semantic search does.
func TestMiniDatasetWithTheBuiltinSentenceModel(t *testing.T) {
	ds, err := LoadDataset("testdata/mini")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	emb := embedding.SentenceEmbedder{}
	cat, err := Build(ctx, ds.Tools, BuildOptions{Embedder: emb, Generator: embedding.TemplateQueryGenerator{}, QueriesPerTool: 5})
	if err != nil {
		t.Fatal(err)
	}
	top1 := map[toolcatalog.Method]float64{}
	for _, m := range []toolcatalog.Method{toolcatalog.Semantic, toolcatalog.Hybrid} {
		r, err := Evaluate(ctx, cat, ds.Queries, m, emb)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: hit@1 %.3f hit@5 %.3f MRR %.3f", m, r.Hit[1], r.Hit[5], r.MRR)
		if r.Hit[5] < 0.9 || r.MRR < 0.75 {
			t.Errorf("%s with the sentence model: hit@5 %.3f MRR %.3f, want ≥ 0.9 and ≥ 0.75", m, r.Hit[5], r.MRR)
		}
		top1[m] = r.Hit[1]
	}
	if top1[toolcatalog.Hybrid] < top1[toolcatalog.Semantic] {
		t.Errorf("hybrid finds the right tool first for %.3f of the paraphrases, semantic for %.3f", top1[toolcatalog.Hybrid], top1[toolcatalog.Semantic])
	}
}
