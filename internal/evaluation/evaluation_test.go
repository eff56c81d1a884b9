package evaluation

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
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

// nDCG@10 with gain 1 per gold tool, and complete@k: every gold tool in
// the top k; the metrics of each part of a set beside the whole.
func TestNDCGAndComplete(t *testing.T) {
	log2 := func(n float64) float64 { return math.Log2(n) }
	tests := []struct {
		name     string
		ranked   []string
		gold     []string
		ndcg     float64
		complete [2]bool // @5, @10
	}{
		{"first", []string{"a", "b"}, []string{"a"}, 1, [2]bool{true, true}},
		{"third", []string{"x", "y", "a"}, []string{"a"}, 1 / log2(4), [2]bool{true, true}},
		{"both, swapped order does not matter", []string{"b", "a"}, []string{"a", "b"}, 1, [2]bool{true, true}},
		{"one of two, second", []string{"x", "a"}, []string{"a", "b"}, (1 / log2(3)) / (1 + 1/log2(3)), [2]bool{false, false}},
		{"second gold at six", []string{"a", "x", "y", "z", "w", "b"}, []string{"a", "b"}, (1 + 1/log2(7)) / (1 + 1/log2(3)), [2]bool{false, true}},
		{"beyond ten", []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "a"}, []string{"a"}, 0, [2]bool{false, false}},
		{"listed twice counts once", []string{"a", "a"}, []string{"a", "b"}, 1 / (1 + 1/log2(3)), [2]bool{false, false}},
	}
	for _, tt := range tests {
		if got := NDCG(tt.ranked, tt.gold, 10); math.Abs(got-tt.ndcg) > 1e-12 {
			t.Errorf("%s: nDCG@10 %v, want %v", tt.name, got, tt.ndcg)
		}
		if c5, c10 := Complete(tt.ranked, tt.gold, 5), Complete(tt.ranked, tt.gold, 10); c5 != tt.complete[0] || c10 != tt.complete[1] {
			t.Errorf("%s: complete@5 %v @10 %v", tt.name, c5, c10)
		}
	}

	m, single, multi := newMetrics("bm25", ""), newMetrics("bm25", "single"), newMetrics("bm25", "multi")
	for _, q := range []struct {
		ranked, gold []string
		part         *Metrics
	}{
		{[]string{"a"}, []string{"a"}, single},
		{[]string{"x"}, []string{"a"}, single},
		{[]string{"a", "b"}, []string{"a", "b"}, multi},
	} {
		at := map[int][]string{}
		for _, k := range Ks {
			at[k] = q.ranked
		}
		m.add(at, q.gold, false)
		q.part.add(at, q.gold, false)
	}
	for _, x := range []*Metrics{m, single, multi} {
		x.finish()
	}
	if m.Queries != 3 || single.Queries != 2 || multi.Queries != 1 || single.Complete[5] != 0.5 || multi.Complete[5] != 1 || math.Abs(m.Complete[10]-2.0/3) > 1e-12 {
		t.Errorf("queries %d/%d/%d, complete@5 single %v multi %v, complete@10 all %v", m.Queries, single.Queries, multi.Queries, single.Complete[5], multi.Complete[5], m.Complete[10])
	}
}

// The measures at k are of the search for k tools, not the first k of a
// longer one: a request of several intents shares the places differently.
func TestMeasuresAtKAreOfASearchForK(t *testing.T) {
	m := newMetrics("hybrid", "")
	m.add(map[int][]string{
		1:  {"b"},
		5:  {"a", "b", "x", "y", "z"},
		10: {"a", "x", "y", "z", "w", "v", "b"},
	}, []string{"a", "b"}, false)
	m.finish()
	if m.Recall[1] != 0.5 || m.Recall[5] != 1 || m.Complete[5] != 1 || m.Complete[10] != 1 || m.MRR != 1 {
		t.Errorf("recall@1 %v @5 %v, complete@5 %v @10 %v, MRR %v", m.Recall[1], m.Recall[5], m.Complete[5], m.Complete[10], m.MRR)
	}
	if want := (1 + 1/math.Log2(8)) / (1 + 1/math.Log2(3)); math.Abs(m.NDCG10-want) > 1e-12 {
		t.Errorf("nDCG@10 %v, want %v (of the search for 10)", m.NDCG10, want)
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
		r, err := Evaluate(ctx, cat, ds.Queries, toolcatalog.Options{Method: m, Embedder: emb})
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
		r, err := Evaluate(ctx, cat, ds.Queries, toolcatalog.Options{Method: m, Embedder: emb})
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

// Learning's reach counts a gold tool as found when the search finds it
// or traffic recorded it, and no other.
func TestLearningReachCountsFoundAndRecordedTools(t *testing.T) {
	ctx := context.Background()
	tools := []Tool{
		{Name: "get_weather", Description: "Current weather for a city."},
		{Name: "send_email", Description: "Send an email message."},
		{Name: "run_sql", Description: "Run a SQL query on a database."},
	}
	cat, err := Build(ctx, tools, BuildOptions{Embedder: embedding.LexicalEmbedder{}, Generator: embedding.TemplateQueryGenerator{}, QueriesPerTool: 5})
	if err != nil {
		t.Fatal(err)
	}
	test := []Query{
		{Query: "weather in Paris", Gold: []string{"get_weather"}},            // found
		{Query: "weather in Paris", Gold: []string{"send_email"}},             // found only if recorded
		{Query: "weather in Paris", Gold: []string{"get_weather", "run_sql"}}, // half found
	}
	opts := toolcatalog.Options{Method: toolcatalog.BM25}
	for _, tc := range []struct {
		traffic []Query
		want    float64
	}{
		{nil, (1 + 0 + 0.5) / 3},
		{[]Query{{Query: "mail my boss", Gold: []string{"send_email"}}}, (1 + 1 + 0.5) / 3},
		{[]Query{{Query: "mail and a query", Gold: []string{"send_email", "run_sql"}}}, (1 + 1 + 1) / 3},
	} {
		got, err := LearningReach(ctx, cat, tc.traffic, test, opts)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("traffic %v: reach %v, want %v", tc.traffic, got, tc.want)
		}
	}
}

// A query is unrecorded when none of its tools is recorded: one with a
// recorded tool among others is learning's to lift, not to keep.
func TestUnrecordedAsksOnlyForToolsNoTrafficRecorded(t *testing.T) {
	traffic := []Query{{Query: "mail my boss", Gold: []string{"send_email"}}}
	test := []Query{
		{Query: "mail the team", Gold: []string{"send_email"}},
		{Query: "weather in Paris", Gold: []string{"get_weather"}},
		{Query: "mail the weather", Gold: []string{"get_weather", "send_email"}},
	}
	got := Unrecorded(traffic, test)
	if len(got) != 1 || got[0].Query != "weather in Paris" {
		t.Errorf("unrecorded %v, want only the weather query", got)
	}
}

// The queries least like the traffic come first, and as many as the
// share asks for.
func TestLeastLikeTakesTheQueriesFarthestFromTraffic(t *testing.T) {
	traffic := []Query{{Query: "send an email to the team", Gold: []string{"send_email"}}}
	queries := []Query{
		{Query: "send an email to the team today", Gold: []string{"send_email"}},
		{Query: "weather forecast in Paris", Gold: []string{"get_weather"}},
		{Query: "send the team an email", Gold: []string{"send_email"}},
		{Query: "run a database query", Gold: []string{"run_sql"}},
	}
	got, err := LeastLike(context.Background(), embedding.LexicalEmbedder{}, traffic, queries, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, q := range got {
		names = append(names, q.Query)
	}
	slices.Sort(names)
	if want := []string{"run a database query", "weather forecast in Paris"}; !slices.Equal(names, want) {
		t.Errorf("least like the traffic: %q, want %q", names, want)
	}
	if got, _ := LeastLike(context.Background(), embedding.LexicalEmbedder{}, nil, queries, 0.5); len(got) != 0 {
		t.Errorf("without traffic: %q, want none", got)
	}
}
