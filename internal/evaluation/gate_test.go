package evaluation

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
)

// The quality gate: on the shipped sets, with the builtin sentence model
// and query generator, the default method must find at least as many gold
// tools in its top five as either arm alone, rank first the right tool
// at least as often as the semantic arm, and stay above the floors
// recorded when the defaults were chosen (a few points under what it
// reached). The public subsets come with their licences (testdata/*/SOURCE.md).
func TestRetrievalQualityGate(t *testing.T) {
	sets := []struct {
		dir string
		// floor is the lowest acceptable recall@5 of the default method,
		// complete its lowest share of requests with every gold tool in
		// the top five, and semantic the semantic arm's lowest recall@5
		// (requests of several intents: 0.593 on Seal-Tools searched
		// whole).
		floor, complete, semantic float64
	}{
		{"testdata/mini", 0.95, 0.95, 0.90},       // reached 1.000, 1.000, 0.958
		{"testdata/metatool", 0.74, 0.70, 0.68},   // reached 0.777, 0.731, 0.702
		{"testdata/seal-tools", 0.95, 0.88, 0.84}, // reached 0.963, 0.901, 0.878
	}
	for _, set := range sets {
		t.Run(set.dir, func(t *testing.T) {
			t.Parallel()
			def, got := evaluateDefaults(t, set.dir)
			r5 := got[def].Recall[5]
			for _, arm := range []toolcatalog.Method{toolcatalog.BM25, toolcatalog.Semantic} {
				if r5 < got[arm].Recall[5] {
					t.Errorf("default %s recall@5 %.3f is below %s's %.3f", def, r5, arm, got[arm].Recall[5])
				}
			}
			// Paraphrased requests share few words with their tools: the
			// blend must not lose the semantic arm's first places.
			if h1, s1 := got[def].Hit[1], got[toolcatalog.Semantic].Hit[1]; h1 < s1 {
				t.Errorf("default %s hit@1 %.3f is below semantic's %.3f", def, h1, s1)
			}
			if r5 < set.floor {
				t.Errorf("default %s recall@5 %.3f is below the recorded floor %.2f", def, r5, set.floor)
			}
			if c5 := got[def].Complete[5]; c5 < set.complete {
				t.Errorf("default %s complete@5 %.3f is below the recorded floor %.2f", def, c5, set.complete)
			}
			if s5 := got[toolcatalog.Semantic].Recall[5]; s5 < set.semantic {
				t.Errorf("semantic recall@5 %.3f is below the recorded floor %.2f", s5, set.semantic)
			}
		})
	}
}

// heldOut is where the sets no default was chosen on are: ../shared/bench
// beside the checkout (docs/search.md, "How a constant is chosen").
const heldOut = "../../../shared/bench"

// The gate holds on sets no constant was chosen on too: APIBench's
// Hugging Face part and ToolAlpaca (the defaults were chosen on
// Seal-Tools and MetaTool). Their floors are a few points under what the
// defaults reach there; the default does not yet beat BM25 on APIBench
// (0.328 against 0.337), which the log shows.
func TestRetrievalHoldsWhereNotTuned(t *testing.T) {
	sets := []struct {
		name                      string
		floor, complete, semantic float64
	}{
		{"apibench-hf", 0.31, 0.31, 0.15}, // reached 0.328, 0.328, 0.179
		{"toolalpaca", 0.91, 0.89, 0.89},  // reached 0.940, 0.913, 0.921
	}
	for _, set := range sets {
		t.Run(set.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(heldOut, set.name)
			if _, err := os.Stat(filepath.Join(dir, "tools.json")); err != nil {
				t.Fatalf("the held-out set %s is not there (%v): check out the shared benchmark sets beside the repository, as ../shared/bench", set.name, err)
			}
			method, got := evaluateDefaults(t, dir)
			def := got[method]
			if def.Recall[5] < set.floor {
				t.Errorf("default recall@5 %.3f is below the recorded floor %.2f", def.Recall[5], set.floor)
			}
			if def.Complete[5] < set.complete {
				t.Errorf("default complete@5 %.3f is below the recorded floor %.2f", def.Complete[5], set.complete)
			}
			if s5 := got[toolcatalog.Semantic].Recall[5]; s5 < set.semantic {
				t.Errorf("semantic recall@5 %.3f is below the recorded floor %.2f", s5, set.semantic)
			}
		})
	}
}

// evaluateDefaults builds the set in dir with the builtin model and
// query generator as a catalog does by default, and evaluates its
// default method and both arms; it returns the default method too.
func evaluateDefaults(t *testing.T, dir string) (toolcatalog.Method, map[toolcatalog.Method]*Metrics) {
	t.Helper()
	ds, err := LoadDataset(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	emb := embedding.SentenceEmbedder{}
	cat, err := Build(ctx, ds.Tools, BuildOptions{Embedder: emb, Generator: embedding.TemplateQueryGenerator{}, QueriesPerTool: 5, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	queries, err := Precompute(ctx, emb, ds.Queries)
	if err != nil {
		t.Fatal(err)
	}
	def := toolcatalog.Method(cat.Document.Search.Method)
	got := map[toolcatalog.Method]*Metrics{}
	for _, m := range []toolcatalog.Method{toolcatalog.BM25, toolcatalog.Semantic, def} {
		if got[m], err = Evaluate(ctx, cat, ds.Queries, toolcatalog.Options{Method: m, Embedder: queries}); err != nil {
			t.Fatal(err)
		}
		t.Logf("%-8s recall@1 %.3f recall@5 %.3f hit@1 %.3f MRR %.3f complete@5 %.3f", m, got[m].Recall[1], got[m].Recall[5], got[m].Hit[1], got[m].MRR, got[m].Complete[5])
	}
	return def, got
}
