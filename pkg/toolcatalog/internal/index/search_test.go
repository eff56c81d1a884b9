package index

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/internal/linalg"
)

type fixtureTool struct {
	name, description string
	params            string
	queries           []string
	always            bool
	principals        []string
}

var fixture = []fixtureTool{
	{name: "get_weather", description: "Get the current weather conditions and forecast for a city.", params: `{"type":"object","properties":{"city":{"type":"string"}}}`,
		queries: []string{"will it rain tomorrow", "weather forecast for Paris", "is it sunny outside", "temperature in London today"}},
	{name: "send_email", description: "Send an email message to a recipient.", params: `{"type":"object","properties":{"to":{},"subject":{},"body":{}}}`,
		queries: []string{"email my manager", "send a message to Ana", "write to the team by mail"}},
	{name: "create_issue", description: "Open an issue in a GitHub repository.", params: `{"type":"object","properties":{"repo":{},"title":{}}}`,
		queries: []string{"file a bug report", "open a ticket about the crash", "report a defect in the repo"}},
	{name: "run_sql", description: "Run a read-only SQL query against the analytics warehouse.", params: `{"type":"object","properties":{"query":{}}}`,
		queries: []string{"how many orders last week", "query the sales table", "count active users in the database"}, principals: []string{"group:analysts"}},
	{name: "web_search", description: "Search the web for recent information.", params: `{"type":"object","properties":{"query":{}}}`,
		queries: []string{"look up recent news", "search online for reviews"}, always: true},
	{name: "translate_text", description: "Translate text between languages.", params: `{"type":"object","properties":{"text":{},"target":{}}}`,
		queries: []string{"say hello in Spanish", "translate this paragraph to German"}, principals: []string{"*"}},
}

// lexicalEmbedder is the fast, deterministic embedder the fixtures are
// built with.
func lexicalEmbedder() QueryEmbedder { return embedding.LexicalEmbedder{} }

// buildFixture embeds each tool's queries with the builtin model and
// publishes centroids, as the operator does.
func buildFixture(t testing.TB, tools []fixtureTool, search contract.SearchDefaults) *Catalog {
	t.Helper()
	doc, vectors := fixtureParts(t, tools, search)
	c, err := New(doc, vectors)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fixtureParts is a fixture catalog's document and raw vectors.
func fixtureParts(t testing.TB, tools []fixtureTool, search contract.SearchDefaults) (*contract.Document, map[string][]byte) {
	t.Helper()
	doc := &contract.Document{
		Version: 1, Catalog: "ns/fixture", Search: search,
		Embedding:   contract.EmbeddingInfo{Provider: "builtin", Model: embedding.BuiltinLexicalModel, Dimensions: embedding.BuiltinLexicalDimensions},
		Permissions: map[string][]string{},
	}
	vectors := map[string][]byte{}
	for _, ft := range tools {
		tool, err := contract.NormalizeTool(contract.Tool{Name: ft.name, Description: ft.description, Parameters: json.RawMessage(ft.params), AlwaysInclude: ft.always})
		if err != nil {
			t.Fatal(err)
		}
		doc.Tools = append(doc.Tools, tool)
		if ft.principals != nil {
			doc.Permissions[ft.name] = ft.principals
		}
		vecs, err := embedding.LexicalEmbedder{}.Embed(context.Background(), append(ft.queries, ft.description))
		if err != nil {
			t.Fatal(err)
		}
		c, err := embedding.Centroid(vecs)
		if err != nil {
			t.Fatal(err)
		}
		vectors[ft.name] = contract.EncodeVector(c)
	}
	if err := doc.Seal(); err != nil {
		t.Fatal(err)
	}
	return doc, vectors
}

func names(rs []Result) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Tool.Name
	}
	return out
}

func search(t *testing.T, c *Catalog, q string, o Options) *Response {
	t.Helper()
	r, err := c.Search(context.Background(), q, o)
	if err != nil {
		t.Fatalf("Search(%q): %v", q, err)
	}
	return r
}

func firstRanked(r *Response) string {
	for _, res := range r.Results {
		if res.Why == WhyRanked || res.Why == WhyExactName {
			return res.Tool.Name
		}
	}
	return ""
}

func TestSearchTopResultPerMethod(t *testing.T) {
	c := buildFixture(t, fixture, contract.SearchDefaults{Method: "hybrid", TopK: 3})
	emb := lexicalEmbedder()
	tests := []struct {
		query  string
		method Method
		want   string
	}{
		{"send an email to the finance team", BM25, "send_email"},
		{"github repository issue", BM25, "create_issue"},
		{"will it rain in Oslo tomorrow", Semantic, "get_weather"},
		{"file a bug about the crash", Semantic, "create_issue"},
		{"translate this sentence to French", Hybrid, "translate_text"},
		{"how many orders were placed last week", Hybrid, "run_sql"},
		{"translate this sentence to French", RRF, "translate_text"},
		{"send an email to the finance team", RRF, "send_email"},
	}
	for _, tt := range tests {
		t.Run(string(tt.method)+"/"+tt.query, func(t *testing.T) {
			r := search(t, c, tt.query, Options{Method: tt.method, Embedder: emb})
			if r.Method != tt.method || r.Fallback != "" {
				t.Fatalf("method %s (fallback %q), want %s", r.Method, r.Fallback, tt.method)
			}
			if got := firstRanked(r); got != tt.want {
				t.Fatalf("top ranked %s, want %s; results %v", got, tt.want, names(r.Results))
			}
		})
	}
}

func TestSearchResultsExplainThemselves(t *testing.T) {
	c := buildFixture(t, fixture, contract.SearchDefaults{Method: "hybrid", TopK: 4})
	r := search(t, c, "send an email", Options{Embedder: lexicalEmbedder()})
	if r.Method != Hybrid {
		t.Fatalf("method %s, want the catalog default hybrid", r.Method)
	}
	if r.Results[0].Tool.Name != "web_search" || r.Results[0].Why != WhyAlwaysInclude {
		t.Fatalf("first result %s (%s), want the always-included web_search", r.Results[0].Tool.Name, r.Results[0].Why)
	}
	top := r.Results[1]
	if top.Tool.Name != "send_email" || top.Why != WhyRanked || top.Semantic == nil || top.BM25 == nil {
		t.Fatalf("second result %+v, want send_email ranked by both arms", top)
	}
	if top.Semantic.Rank != 1 || top.BM25.Rank != 1 {
		t.Errorf("arm ranks %d/%d, want 1/1", top.Semantic.Rank, top.BM25.Rank)
	}
	// Each arm scales its best to 1; the cosine counts from the lowest one
	// and BM25 from 0 (the catalog has fewer than scaleDepth tools).
	lowest := 1.0
	for _, v := range c.Vectors {
		lowest = min(lowest, float64(embedding.Cosine(mustEmbed(t, "send an email"), v)))
	}
	// "send" and "email" are in the tool's name and description: more
	// than strongLexicalEvidence, so the cosine's share is lowered.
	w := DefaultSemanticWeight * min(1, strongLexicalEvidence/r.LexicalEvidence)
	if r.LexicalEvidence <= strongLexicalEvidence || math.Abs(r.SemanticWeight-w) > 1e-9 {
		t.Errorf("evidence %.2f, weight %.4f; want evidence above %.0f and the weight lowered to %.4f", r.LexicalEvidence, r.SemanticWeight, strongLexicalEvidence, w)
	}
	if top.Score != 1 {
		t.Errorf("blended score %v of the best in both arms, want 1", top.Score)
	}
	if len(r.Results) < 4 {
		t.Fatalf("%d results, want 4 to check the blend below the best", len(r.Results))
	}
	for _, o := range r.Results[2:] {
		var want float64
		if o.Semantic != nil {
			want = w * (o.Semantic.Score - lowest) / (top.Semantic.Score - lowest)
		}
		if o.BM25 != nil {
			want += (1 - w) * o.BM25.Score / top.BM25.Score
		}
		if math.Abs(o.Score-want) > 1e-6 {
			t.Errorf("%s: blended score %v, want %v = %.2f·(cosine − lowest)/(best cosine − lowest) + %.2f·bm25/best bm25", o.Tool.Name, o.Score, want, w, 1-w)
		}
	}
	if r.SemanticOnly || r.LexicalEvidence < DefaultMinLexicalEvidence {
		t.Errorf("lexical evidence %.2f (semantic only %v) for a query naming the tool's words", r.LexicalEvidence, r.SemanticOnly)
	}

	r = search(t, c, "send an email", Options{Method: RRF, Embedder: lexicalEmbedder()})
	top = r.Results[1]
	if want := 2.0 / float64(DefaultRRFK+1); r.Method != RRF || top.Tool.Name != "send_email" || top.Score != want {
		t.Errorf("rrf: %s first with score %v, want send_email with %v (1/61 from each arm)", top.Tool.Name, top.Score, want)
	}
}

func mustEmbed(t *testing.T, q string) []float32 {
	t.Helper()
	v, err := lexicalEmbedder().Embed(context.Background(), []string{q})
	if err != nil {
		t.Fatal(err)
	}
	return v[0]
}

func rankedNames(rs []Result) []string {
	var out []string
	for _, r := range rs {
		if r.Why == WhyRanked {
			out = append(out, r.Tool.Name)
		}
	}
	return out
}

// The blend weight runs from BM25 alone (0) to the cosine alone (1).
func TestHybridBlendWeightSpansTheArms(t *testing.T) {
	c := buildFixture(t, fixture, contract.SearchDefaults{Method: "hybrid", TopK: 6})
	emb := lexicalEmbedder()
	never := 0.0
	for _, q := range []string{"mail about the weather", "an issue for the query", "web results in French"} {
		zero, one := 0.0, 1.0
		bm25 := rankedNames(search(t, c, q, Options{Method: BM25, Embedder: emb}).Results)
		sem := rankedNames(search(t, c, q, Options{Method: Semantic, Embedder: emb}).Results)
		asBM25 := search(t, c, q, Options{Embedder: emb, SemanticWeight: &zero, MinLexicalEvidence: &never})
		asSem := search(t, c, q, Options{Embedder: emb, SemanticWeight: &one, MinLexicalEvidence: &never})
		// BM25 ranks only the tools it matched; the blend then adds the
		// others with score 0, in name order.
		if got := rankedNames(asBM25.Results); !slices.Equal(got[:len(bm25)], bm25) {
			t.Errorf("%q with weight 0: %v, want BM25's %v first", q, got, bm25)
		}
		if asSem.SemanticWeight != 1 {
			t.Fatalf("%q: evidence %.2f lowered the weight to %.2f; pick a query with less", q, asSem.LexicalEvidence, asSem.SemanticWeight)
		}
		if got := rankedNames(asSem.Results); !slices.Equal(got, sem) {
			t.Errorf("%q with weight 1: %v, want semantic's %v", q, got, sem)
		}
	}
}

// A query without distinctive tool words is ranked by the cosine alone;
// one with them is blended. Evidence counts distinctive words, whatever
// the catalog's size.
func TestHybridSemanticOnlyWhenLexicalEvidenceIsWeak(t *testing.T) {
	c := buildFixture(t, fixture, contract.SearchDefaults{Method: "hybrid", TopK: 6})
	emb := lexicalEmbedder()
	paraphrase := "will it be chilly and wet tomorrow" // no tool word
	r := search(t, c, paraphrase, Options{Embedder: emb})
	if !r.SemanticOnly || r.LexicalEvidence != 0 {
		t.Fatalf("paraphrase: semantic only %v, evidence %.2f; want the rule to fire with 0", r.SemanticOnly, r.LexicalEvidence)
	}
	sem := search(t, c, paraphrase, Options{Method: Semantic, Embedder: emb})
	if got, want := rankedNames(r.Results), rankedNames(sem.Results); !slices.Equal(got, want) {
		t.Fatalf("paraphrase ranked %v, want the semantic order %v", got, want)
	}

	// One word that a single tool holds once is about one unit of evidence.
	one := search(t, c, "recipient", Options{Embedder: emb})
	if one.LexicalEvidence < 0.7 || one.LexicalEvidence > 1.3 {
		t.Errorf("one distinctive word: evidence %.2f, want about 1", one.LexicalEvidence)
	}
	several := search(t, c, "send an email message to a recipient", Options{Embedder: emb})
	if several.SemanticOnly || several.LexicalEvidence <= one.LexicalEvidence {
		t.Errorf("several distinctive words: evidence %.2f, semantic only %v; want more than %.2f and a blend", several.LexicalEvidence, several.SemanticOnly, one.LexicalEvidence)
	}
	// The threshold is the catalog's to set.
	high := 100.0
	if r := search(t, c, "send an email message to a recipient", Options{Embedder: emb, MinLexicalEvidence: &high}); !r.SemanticOnly {
		t.Error("a threshold above the evidence did not rank by the cosine alone")
	}
}

// The published blend settings are every consumer's defaults.
func TestHybridUsesThePublishedBlend(t *testing.T) {
	zero, never := 0.0, 0.0
	c := buildFixture(t, fixture, contract.SearchDefaults{Method: "hybrid", TopK: 6, SemanticWeight: &zero, MinLexicalEvidence: &never})
	q := "an issue for the query"
	got := rankedNames(search(t, c, q, Options{Embedder: lexicalEmbedder()}).Results)
	bm25 := rankedNames(search(t, c, q, Options{Method: BM25}).Results)
	if !slices.Equal(got[:len(bm25)], bm25) {
		t.Fatalf("with the published weight 0: %v, want BM25's %v", got, bm25)
	}
}

func TestSearchExactNameRanksFirst(t *testing.T) {
	c := buildFixture(t, fixture, contract.SearchDefaults{Method: "bm25", TopK: 3})
	// Case folds as strings.EqualFold does: the long s (ſ) is s, two
	// bytes in UTF-8 for one.
	for q, want := range map[string]string{"  Create_Issue ": "create_issue", "WEB_\u017fEARCH": "web_search"} {
		r := search(t, c, q, Options{})
		if r.Results[0].Tool.Name != want || r.Results[0].Why != WhyExactName {
			t.Fatalf("%q: results %v, want %s first as exact-name", q, names(r.Results), want)
		}
	}
}

func TestSearchAlwaysIncludeAndThresholdEdges(t *testing.T) {
	c := buildFixture(t, fixture, contract.SearchDefaults{Method: "semantic", TopK: 5, AlwaysInclude: []string{"translate_text"}})
	emb := lexicalEmbedder()

	// topK smaller than the always-included list: all of them, nothing else.
	r := search(t, c, "weather", Options{TopK: 1, Embedder: emb, AlwaysInclude: []string{"send_email"}})
	if got := names(r.Results); len(got) != 3 || got[0] != "translate_text" && got[0] != "web_search" {
		t.Fatalf("results %v, want exactly the three always-included tools", got)
	}
	for _, res := range r.Results {
		if res.Why != WhyAlwaysInclude {
			t.Fatalf("%s returned as %s", res.Tool.Name, res.Why)
		}
	}

	// A threshold above every score leaves only the always-included tools.
	high := 0.9999
	r = search(t, c, "weather forecast", Options{Embedder: emb, Threshold: &high})
	if got := names(r.Results); len(got) != 2 {
		t.Fatalf("results %v, want only the two always-included tools", got)
	}
	// A low one lets the match through.
	low := 0.05
	r = search(t, c, "weather forecast", Options{Embedder: emb, Threshold: &low})
	if r.Results[2].Tool.Name != "get_weather" {
		t.Fatalf("results %v, want get_weather after the always-included tools", names(r.Results))
	}
}

func TestSearchPermissionFiltering(t *testing.T) {
	c := buildFixture(t, fixture, contract.SearchDefaults{Method: "bm25", TopK: 10})
	for _, tt := range []struct {
		tool, principal string
		want            bool
	}{
		{"run_sql", "group:analysts", true},
		{"run_sql", "group:sales", false},
		{"get_weather", "anyone", true},    // no permissions: everyone
		{"translate_text", "anyone", true}, // "*": everyone
		{"no_such_tool", "anyone", false},
	} {
		if got := c.IsAllowed(tt.tool, tt.principal); got != tt.want {
			t.Errorf("IsAllowed(%s, %s) = %v, want %v", tt.tool, tt.principal, got, tt.want)
		}
	}
	query := "query the sales database with SQL"
	if got := firstRanked(search(t, c, query, Options{Principal: "group:analysts"})); got != "run_sql" {
		t.Fatalf("analyst's top result %s, want run_sql", got)
	}
	for _, res := range search(t, c, query, Options{Principal: "group:sales"}).Results {
		if res.Tool.Name == "run_sql" {
			t.Fatal("run_sql shown to a principal it does not allow")
		}
	}
	// Exact names do not bypass permissions either.
	if got := names(search(t, c, "run_sql", Options{Principal: "group:sales"}).Results); len(got) > 0 && got[0] == "run_sql" {
		t.Fatal("exact-name match bypassed permissions")
	}
}

type failingEmbedder struct{ model string }

func (f failingEmbedder) Embed(context.Context, []string) ([][]float32, error) {
	return nil, errors.New("provider down")
}
func (f failingEmbedder) Model() string { return f.model }

// waitingEmbedder embeds as LexicalEmbedder once ready says so, or a
// second has passed, and reports which came first.
type waitingEmbedder struct {
	ready func() bool
	saw   chan bool
}

func (w waitingEmbedder) Model() string { return embedding.BuiltinLexicalModel }

func (w waitingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	deadline := time.Now().Add(time.Second)
	for !w.ready() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	w.saw <- w.ready()
	return embedding.LexicalEmbedder{}.Embed(ctx, texts)
}

// A large catalog ranks by BM25 on another core while the query is
// embedded, and returns what it returns ranking one arm after the other:
// for every method, for a request of several intents, and when the
// embedder fails.
func TestLargeCatalogRanksBM25WhileTheQueryIsEmbedded(t *testing.T) {
	const query = "book a flight to Denver and then send the quarterly report to finance"
	search := func(c *Catalog, o Options) *Response {
		t.Helper()
		r, err := c.Search(context.Background(), query, o)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// BM25's first scoring leaves the length norms of its k1 and b.
	ranked := func(c *Catalog) func() bool { return func() bool { return c.index.norms.Load() != nil } }
	together, apart := benchCatalog(t, concurrentArms+100), benchCatalog(t, concurrentArms+100)
	saw := make(chan bool, 1)
	search(together, Options{Embedder: waitingEmbedder{ranked(together), saw}})
	if !<-saw {
		t.Fatal("the query was embedded before BM25 ranked")
	}
	together0 := concurrentArms
	defer func() { concurrentArms = together0 }()
	concurrentArms = math.MaxInt
	search(apart, Options{Embedder: waitingEmbedder{ranked(apart), saw}})
	if <-saw {
		t.Fatal("one arm after the other, BM25 ranked before the query was embedded")
	}
	for _, o := range []Options{
		{Method: Hybrid}, {Method: Semantic}, {Method: RRF}, {Method: Hybrid, TopK: 40, Intents: IntentsOff},
		{Method: Hybrid, Embedder: failingEmbedder{model: embedding.BuiltinLexicalModel}},
	} {
		if o.Embedder == nil {
			o.Embedder = embedding.LexicalEmbedder{}
		}
		concurrentArms = math.MaxInt
		want := search(apart, o)
		concurrentArms = together0
		if got := search(together, o); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: ranked together\n%s\none after the other\n%s", o.Method, resultsOf(got), resultsOf(want))
		}
	}
}

func TestSearchFallsBackToBM25(t *testing.T) {
	c := buildFixture(t, fixture, contract.SearchDefaults{Method: "hybrid", TopK: 3})
	for name, emb := range map[string]QueryEmbedder{
		"no embedder":    nil,
		"another model":  failingEmbedder{model: "text-embedding-3-small"},
		"embedder fails": failingEmbedder{model: embedding.BuiltinLexicalModel},
	} {
		t.Run(name, func(t *testing.T) {
			r := search(t, c, "send an email", Options{Embedder: emb})
			if r.Method != BM25 || r.Fallback == "" {
				t.Fatalf("method %s fallback %q, want a BM25 fallback with a reason", r.Method, r.Fallback)
			}
			if got := firstRanked(r); got != "send_email" {
				t.Fatalf("top %s, want send_email", got)
			}
			for _, res := range r.Results {
				if res.Semantic != nil {
					t.Fatalf("%s carries a semantic score after fallback", res.Tool.Name)
				}
			}
		})
	}
}

func TestSearchStableOrderForEqualScores(t *testing.T) {
	twins := []fixtureTool{
		{name: "zeta_lookup", description: "Look up a record.", params: `{}`, queries: []string{"look up a record"}},
		{name: "alpha_lookup", description: "Look up a record.", params: `{}`, queries: []string{"look up a record"}},
		{name: "mid_lookup", description: "Look up a record.", params: `{}`, queries: []string{"look up a record"}},
	}
	sealed := buildFixture(t, twins, contract.SearchDefaults{Method: "hybrid", TopK: 3})
	// A document not in name order (not sealed) breaks ties by name too.
	doc, vectors := fixtureParts(t, twins, contract.SearchDefaults{Method: "hybrid", TopK: 3})
	doc.Tools[0], doc.Tools[2] = doc.Tools[2], doc.Tools[0]
	unsorted, err := New(doc, vectors)
	if err != nil {
		t.Fatal(err)
	}
	embedder := lexicalEmbedder()
	for _, c := range []*Catalog{sealed, unsorted} {
		for _, m := range Methods {
			r := search(t, c, "record", Options{Method: m, Embedder: embedder})
			got := names(r.Results)
			// Names differ in BM25 length only through the name words,
			// which are equal in count, and the vectors are equal, so
			// scores tie and names decide.
			if got[0] != "alpha_lookup" || got[1] != "mid_lookup" || got[2] != "zeta_lookup" {
				t.Fatalf("%s, tools first %s: order %v, want alphabetical for equal scores", m, c.Document.Tools[0].Name, got)
			}
		}
	}
}

// BM25 scores are summed in buffers shared between searches and
// catalogs: a search must start from zero whatever searched before it,
// on a larger catalog or at the same time.
func TestBM25ScoresDoNotCarryOver(t *testing.T) {
	small := buildFixture(t, fixture, contract.SearchDefaults{Method: "bm25", TopK: 3})
	var more []fixtureTool
	for i := range 40 {
		ft := fixture[i%len(fixture)]
		ft.name = fmt.Sprintf("%s_%d", ft.name, i)
		ft.principals = nil
		more = append(more, ft)
	}
	large := buildFixture(t, more, contract.SearchDefaults{Method: "bm25", TopK: 3})
	scores := func(r *Response) []float64 {
		var out []float64
		for _, res := range r.Results {
			if res.BM25 != nil {
				out = append(out, res.BM25.Score)
			}
		}
		return out
	}
	const q = "weather forecast email message"
	want := scores(search(t, small, q, Options{Method: BM25}))
	if len(want) < 2 {
		t.Fatalf("the query ranks %d tools; the test needs several", len(want))
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				if _, err := large.Search(context.Background(), "send an email with the weather forecast for the repository query", Options{Method: BM25}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for range 200 {
		if got := scores(search(t, small, q, Options{Method: BM25})); !slices.Equal(got, want) {
			t.Fatalf("BM25 scores %v after other searches, want %v", got, want)
		}
	}
	wg.Wait()
}

func TestSearchRejectsUnknownMethod(t *testing.T) {
	c := buildFixture(t, fixture, contract.SearchDefaults{})
	if _, err := c.Search(context.Background(), "x", Options{Method: "fuzzy"}); err == nil {
		t.Fatal("want an error for an unknown method")
	}
}

func TestSearchPopularTools(t *testing.T) {
	c := buildFixture(t, fixture, contract.SearchDefaults{Method: "bm25", TopK: 3})
	r := search(t, c, "send an email", Options{MostUsed: []string{"run_sql", "create_issue"}, Principal: "group:sales"})
	// run_sql is popular but not allowed; create_issue is.
	got := names(r.Results)
	if len(got) != 3 || got[0] != "web_search" || got[1] != "create_issue" || got[2] != "send_email" {
		t.Fatalf("results %v, want web_search (always), create_issue (popular), send_email (ranked)", got)
	}
}

// countingEmbedder counts the texts it embeds.
type countingEmbedder struct {
	QueryEmbedder
	texts atomic.Int64
}

func (e *countingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.texts.Add(int64(len(texts)))
	return e.QueryEmbedder.Embed(ctx, texts)
}

// A repeated request is not embedded again, and finds what it found the
// first time; the cache keeps only the latest requests.
func TestCachedQueriesAreNotEmbeddedAgain(t *testing.T) {
	c := buildFixture(t, fixture, contract.SearchDefaults{Method: "hybrid", TopK: 3})
	inner := &countingEmbedder{QueryEmbedder: lexicalEmbedder()}
	emb := CacheQueries(inner, 2)
	search := func(q string) []string {
		t.Helper()
		resp, err := c.Search(context.Background(), q, Options{Embedder: emb})
		if err != nil || resp.Method != Hybrid {
			t.Fatalf("Search(%q): %v, method %s", q, err, resp.Method)
		}
		return names(resp.Results)
	}
	first := search("send an email to my manager")
	again := search("send an email to my manager")
	if n := inner.texts.Load(); n != 1 || !slices.Equal(first, again) {
		t.Fatalf("a repeated request: %d texts embedded, results %v then %v; want 1 and the same", n, first, again)
	}
	search("will it rain tomorrow")
	search("open an issue about the login bug")
	search("send an email to my manager") // evicted by the two since
	if n := inner.texts.Load(); n != 4 {
		t.Fatalf("%d texts embedded; want 4 (a cache of 2 forgets the first request)", n)
	}
}

// newReading reads the vectors a chunk at a time, never asking for more
// than the chunk, and builds the catalog New builds from all of them; a
// read that fails fails it.
func TestNewReadingIsNew(t *testing.T) {
	doc, raw := fixtureParts(t, fixture, contract.SearchDefaults{Method: "hybrid", TopK: 3})
	raw = maps.Clone(raw)
	delete(raw, "run_sql")                                          // no vector
	raw["create_issue"] = contract.EncodeVector(make([]float32, 3)) // another length
	// Whatever their size, New's rows are scanned as int8 here too.
	defer func(b int) { quantizeBytes = b }(quantizeBytes)
	quantizeBytes = 0
	want, err := New(doc, raw)
	if err != nil {
		t.Fatal(err)
	}
	reading := func(int8Only bool) *Catalog {
		t.Helper()
		reads := 0
		got, err := newReading(doc, 2, int8Only, func(names []string) (map[string]string, error) {
			reads++
			if len(names) > 2 {
				t.Fatalf("asked for %d vectors at once, more than the chunk", len(names))
			}
			out := map[string]string{}
			for _, n := range names {
				if v, ok := raw[n]; ok {
					out[n] = string(v)
				}
			}
			return out, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if want := (len(doc.Tools) + 1) / 2; reads != want {
			t.Fatalf("%d reads; want %d", reads, want)
		}
		if !slices.Equal(got.vecNames, want.vecNames) || !slices.Equal(got.rawHash, want.rawHash) {
			t.Fatal("newReading's rows differ from New's")
		}
		return got
	}
	floats := reading(false)
	if !maps.EqualFunc(floats.Vectors, want.Vectors, slices.Equal) || !slices.Equal(floats.matrix, want.matrix) || floats.quant == nil {
		t.Fatal("newReading's float rows differ from New's")
	}
	// A grading's catalog, and its next version, hold the rows as int8
	// only: the int8 rows New's search scans first, scoring as they do.
	int8s := reading(true)
	for _, c := range []*Catalog{int8s, int8s.Next(doc, nil)} {
		if c.matrix != nil || len(c.Vectors) != 0 || c.quant == nil || c.quant.Rows() != want.quant.Rows() {
			t.Fatal("a grading's catalog holds float rows, or not every int8 row")
		}
		unit := want.matrix[want.dims : 2*want.dims] // a row's own vector
		got, exp := make([]float32, len(want.vecNames)), make([]float32, len(want.vecNames))
		c.quant.Dots(got, unit, linalg.Best)
		want.quant.Dots(exp, unit, linalg.Best)
		if !slices.Equal(got, exp) {
			t.Fatalf("int8 rows score %v, New's %v", got, exp)
		}
	}
	for _, q := range []string{"email my manager", "weather in Paris"} {
		for _, got := range []*Catalog{floats, int8s} {
			if a, b := search(t, got, q, Options{Embedder: lexicalEmbedder()}), search(t, want, q, Options{Embedder: lexicalEmbedder()}); !slices.Equal(names(a.Results), names(b.Results)) {
				t.Fatalf("%q: newReading's catalog (int8 only: %t) finds %v, New's %v", q, got.int8Only, names(a.Results), names(b.Results))
			}
		}
	}
	failure := errors.New("redis is down")
	if _, err := newReading(doc, 2, true, func([]string) (map[string]string, error) { return nil, failure }); !errors.Is(err, failure) {
		t.Fatalf("a failed read: %v", err)
	}
}

// Given only the vectors that changed, Next keeps the other tools' rows:
// the catalog is the one New builds from every vector, and staleVectors
// names exactly the vectors a version changed, removed tools aside.
func TestNextFromTheChangedVectorsIsNew(t *testing.T) {
	doc, raw := fixtureParts(t, fixture, contract.SearchDefaults{Method: "hybrid", TopK: 3})
	prev, err := New(doc, raw)
	if err != nil {
		t.Fatal(err)
	}
	next := maps.Clone(raw)
	next["get_weather"] = raw["send_email"]
	doc2 := *doc
	doc2.Tools = slices.DeleteFunc(slices.Clone(doc.Tools), func(tl contract.Tool) bool { return tl.Name == "create_issue" })
	delete(next, "create_issue")
	digest := func(name string) uint64 {
		if vec, ok := next[name]; ok {
			return contract.VectorDigest(vec)
		}
		return 0
	}
	if stale := prev.staleVectors(&doc2, digest); !slices.Equal(stale, []string{"get_weather"}) {
		t.Fatalf("staleVectors = %v; want [get_weather]", stale)
	}
	got := prev.Next(&doc2, map[string][]byte{"get_weather": next["get_weather"]})
	want, err := New(&doc2, next)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.EqualFunc(got.Vectors, want.Vectors, slices.Equal) || !slices.Equal(got.matrix, want.matrix) {
		t.Fatal("Next from the changed vectors differs from New from all of them")
	}
	if stale := got.staleVectors(&doc2, digest); len(stale) != 0 {
		t.Fatalf("the next catalog still finds %v stale", stale)
	}
}

// Next takes the rows of unchanged vectors from the catalog before it and
// decodes the others: a changed vector is searched as it now is, one
// that became unusable leaves its tool to BM25, and the rows taken are
// the rows New builds.
func TestNextTakesOnlyUnchangedVectors(t *testing.T) {
	doc, raw := fixtureParts(t, fixture, contract.SearchDefaults{Method: "hybrid", TopK: 3})
	prev, err := New(doc, raw)
	if err != nil {
		t.Fatal(err)
	}
	next := maps.Clone(raw)
	next["get_weather"] = raw["send_email"]                                  // another tool's vector
	next["create_issue"] = contract.EncodeVector(make([]float32, prev.dims)) // no direction
	got := prev.Next(doc, next)
	want, err := New(doc, next)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.EqualFunc(got.Vectors, want.Vectors, slices.Equal) {
		t.Fatal("Next's vectors differ from New's for the same parts")
	}
	if !slices.Equal(got.Vectors["get_weather"], prev.Vectors["send_email"]) {
		t.Fatal("a changed vector kept its old row")
	}
	if _, ok := got.Vectors["create_issue"]; ok {
		t.Fatal("a zero vector was searched")
	}
	if r := search(t, got, "email my manager", Options{Method: Semantic, Embedder: lexicalEmbedder()}); firstRanked(r) != "get_weather" && firstRanked(r) != "send_email" {
		t.Fatalf("semantic search ranks %s first, want a tool with the email vector", firstRanked(r))
	}
}

// An index re-indexed in place is the index built afresh: postings in
// document order, a term no tool holds any more gone, a new term there,
// lengths and the average length alike, and only the edited tools named.
func TestReindexIsANewIndex(t *testing.T) {
	doc, _ := fixtureParts(t, gradedFixture(), contract.SearchDefaults{})
	tools := slices.Clone(doc.Tools)
	ix := newBM25Index(tools, nil, nil)
	sendEmail := slices.IndexFunc(tools, func(tl contract.Tool) bool { return tl.Name == "send_email" })
	only := "" // a term of send_email's parameters no other tool holds
	for term, ps := range ix.postings {
		if len(ps) == 1 && int(ps[0].doc) == sendEmail && !strings.Contains(tools[sendEmail].Name+" "+tools[sendEmail].Description, term) {
			only = term
		}
	}
	if only == "" {
		t.Fatal("send_email's parameters have no term of their own")
	}
	edited := slices.Clone(tools)
	var want []string
	for i := range edited {
		switch {
		case strings.HasPrefix(edited[i].Name, "zebra"):
			edited[i].Description = "Facts about the okapi and its habitat."
		case edited[i].Name == "send_email":
			edited[i].Parameters = json.RawMessage(`{"type":"object","properties":{"recipient":{"type":"string","description":"who gets the okapi"}}}`)
		default:
			continue
		}
		want = append(want, edited[i].Name)
	}
	// A search before the edit caches the length norms of the old text.
	ix.release(ix.scores("email the okapi", DefaultK1, DefaultB))
	changed := ix.reindex(edited)
	fresh := newBM25Index(edited, nil, nil)
	got, gotDocs := ix.scores("email the okapi", DefaultK1, DefaultB)
	wantScores, wantDocs := fresh.scores("email the okapi", DefaultK1, DefaultB)
	if !slices.Equal(got, wantScores) || !slices.Equal(gotDocs, wantDocs) {
		t.Errorf("BM25 scores after reindex %v, afresh %v", got, wantScores)
	}
	ix.release(got, gotDocs)
	fresh.release(wantScores, wantDocs)
	if !slices.Equal(changed, want) {
		t.Errorf("reindex named %v as changed, want %v", changed, want)
	}
	if _, ok := ix.postings[only]; ok {
		t.Errorf("%q, which no tool holds now, is still indexed", only)
	}
	if len(ix.postings["okapi"]) != 2 {
		t.Errorf("the new term is indexed for %v", ix.postings["okapi"])
	}
	if len(ix.postings) != len(fresh.postings) || ix.avgLen != fresh.avgLen || ix.maxIDF != fresh.maxIDF || !slices.Equal(ix.lengths, fresh.lengths) {
		t.Fatalf("%d terms, average length %v, maxIDF %v; afresh %d, %v, %v", len(ix.postings), ix.avgLen, ix.maxIDF, len(fresh.postings), fresh.avgLen, fresh.maxIDF)
	}
	for term, ps := range fresh.postings {
		if !slices.Equal(ix.postings[term], ps) {
			t.Errorf("postings of %q: %v, afresh %v", term, ix.postings[term], ps)
		}
	}
	if ix.reindex(edited) != nil {
		t.Error("an index of the same text named tools as changed")
	}
}

// The index of a next version, built from the last one's postings for
// the tools whose text is the same, is the index built afresh, whatever
// the versions between them added, removed or rewrote; and a tool's score
// read from the postings is the score a search gives it.
func TestLentIndexIsANewIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	words := strings.Fields("send read list mail calendar invoice weather city date file upload delete user report chart")
	text := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(words[r.IntN(len(words))] + " ")
		}
		return b.String()
	}
	params := func() json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{%q:{"type":"string","description":%q}}}`, words[r.IntN(len(words))], text(3)))
	}
	var tools []contract.Tool
	for i := range 300 {
		tools = append(tools, contract.Tool{Name: fmt.Sprintf("tool_%04d", i), Description: text(8), Parameters: params()})
	}
	ix := newBM25Index(tools, nil, nil)
	for version := range 6 {
		var next []contract.Tool
		for _, tl := range tools {
			switch r.IntN(10) {
			case 0: // removed
			case 1:
				tl.Description = text(6)
				next = append(next, tl)
			case 2:
				tl.Parameters = params()
				next = append(next, tl)
			default:
				next = append(next, tl)
			}
		}
		for i := range 20 {
			next = append(next, contract.Tool{Name: fmt.Sprintf("new_%d_%02d", version, i), Description: text(5), Parameters: params()})
		}
		// A catalog's tools come in order of name; a hostile one's may not.
		if version%3 == 2 {
			r.Shuffle(len(next), func(i, j int) { next[i], next[j] = next[j], next[i] })
		} else {
			slices.SortFunc(next, func(a, b contract.Tool) int { return strings.Compare(a.Name, b.Name) })
		}
		at := map[string]int{}
		for i, tl := range tools {
			at[tl.Name] = i
		}
		lent, fresh := newBM25Index(next, ix, at), newBM25Index(next, nil, nil)
		if len(lent.postings) != len(fresh.postings) || lent.avgLen != fresh.avgLen || lent.maxIDF != fresh.maxIDF || !slices.Equal(lent.lengths, fresh.lengths) {
			t.Fatalf("version %d: %d terms, average length %v; afresh %d, %v", version, len(lent.postings), lent.avgLen, len(fresh.postings), fresh.avgLen)
		}
		for term, ps := range fresh.postings {
			if !slices.Equal(lent.postings[term], ps) {
				t.Fatalf("version %d: postings of %q: %v, afresh %v", version, term, lent.postings[term], ps)
			}
		}
		q := text(3)
		score, matched := lent.scores(q, DefaultK1, DefaultB)
		for doc := range next {
			if got := lent.scoreOf(doc, lent.queryTerms(q), DefaultK1, DefaultB); math.Abs(got-score[doc]) > 1e-9 {
				t.Fatalf("version %d: %s scores %v alone, %v in a search", version, next[doc].Name, got, score[doc])
			}
		}
		lent.release(score, matched)
		tools, ix = next, lent
	}
}

// BM25 reads a name's parts apart from its digits, and the values of a
// parameter's enum.
func TestBM25ReadsNamePartsAndEnumValues(t *testing.T) {
	c := buildFixture(t, append(slices.Clone(fixture),
		fixtureTool{name: "sha256Digest", description: "Digest a file.", queries: []string{"digest this file"}},
		fixtureTool{name: "export_report", description: "Export the report.", params: `{"type":"object","properties":{"format":{"type":"string","enum":["csv","xlsx"]}}}`, queries: []string{"export the report"}},
	), contract.SearchDefaults{})
	for q, want := range map[string]string{"SHA-256 of the installer": "sha256Digest", "give me an xlsx": "export_report"} {
		r := search(t, c, q, Options{Method: BM25})
		if len(r.Results) == 0 || firstRanked(r) != want {
			t.Errorf("bm25 %q ranks %v first, want %s", q, names(r.Results), want)
		}
	}
}

// A query vector of unit length is used as it is, not copied (a grading
// holds every tool's query vectors); another is scaled into a copy, its
// own slice left as it was.
func TestUnitQueryCopiesOnlyWhatItScales(t *testing.T) {
	c := &Catalog{dims: 2}
	unit := []float32{0.6, 0.8}
	got, reason := c.unitQuery(unit)
	if reason != "" || &got[0] != &unit[0] {
		t.Fatalf("a unit vector was copied (%q)", reason)
	}
	long := []float32{3, 4}
	got, reason = c.unitQuery(long)
	if reason != "" || &got[0] == &long[0] || long[0] != 3 || math.Abs(float64(got[0])-0.6) > 1e-6 || math.Abs(float64(got[1])-0.8) > 1e-6 {
		t.Fatalf("scaled %v from %v (%q)", got, long, reason)
	}
	if _, reason := c.unitQuery([]float32{0, 0}); reason == "" {
		t.Fatal("a zero vector has a unit")
	}
}

// A tokenizer counts each tool's terms in scratch space it reuses: what a
// tool is given depends on its own text alone, not on the tools tokenized
// before it on the same goroutine, one with more terms than the scratch
// map keeps among them.
func TestTokenizerReusesNoTermsOfAnotherTool(t *testing.T) {
	long := contract.Tool{Name: "long_tool", Description: strings.Repeat("alpha beta ", 10)}
	for i := range maxReusedTerms + 10 {
		long.Description += fmt.Sprintf(" word%dx", i)
	}
	tools := []contract.Tool{
		{Name: "send_email", Description: "Send an email to a colleague."},
		long,
		{Name: "get_weather", Description: "Weather forecast for a city.", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string"}}}`)},
		{Name: "send_email", Description: "Send an email to a colleague."},
	}
	alone := func(tool contract.Tool) map[string]float64 {
		_, terms := newTokenizer().termsOf(tool)
		return termMap(terms)
	}
	tk := newTokenizer()
	for i, tool := range tools {
		doc, terms := tk.termsOf(tool)
		if got, want := termMap(terms), alone(tool); !maps.Equal(got, want) {
			t.Fatalf("tool %d (%s) after others: %v; alone: %v", i, tool.Name, got, want)
		}
		if !doc.indexes(tool) {
			t.Fatalf("tool %d's indexed text is not its own", i)
		}
	}
}

func termMap(terms []termFreq) map[string]float64 {
	m := map[string]float64{}
	for _, tf := range terms {
		m[tf.term] += tf.freq
	}
	return m
}

// A cosine arm whose first tool barely leads its tenth gives the order to
// BM25 in proportion; one with a clear lead keeps its share.
func TestHybridTrustsTheCosineLessWhenItsLeadIsSmall(t *testing.T) {
	never := 0.0
	for _, tc := range []struct {
		name   string
		tools  func(i int) fixtureTool
		query  string
		shrunk bool
	}{
		{"look-alike tools", func(i int) fixtureTool {
			return fixtureTool{name: fmt.Sprintf("forecast_region_%d", i), description: fmt.Sprintf("Get the weather forecast for region %d.", i),
				params: `{"type":"object"}`, queries: []string{"weather forecast for the region", fmt.Sprintf("forecast of region %d", i)}}
		}, "weather forecast for the region", true},
		{"distinct tools", func(i int) fixtureTool {
			return fixtureTool{name: fmt.Sprintf("%s_%s", benchVerbs[i], benchNouns[i]), description: fmt.Sprintf("%s the %s.", benchVerbs[i], benchNouns[i]),
				params: `{"type":"object"}`, queries: []string{fmt.Sprintf("%s my %s", benchVerbs[i], benchNouns[i])}}
		}, "book a flight", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tools []fixtureTool
			for i := range 12 {
				tools = append(tools, tc.tools(i))
			}
			c := buildFixture(t, tools, contract.SearchDefaults{Method: "hybrid", TopK: 5})
			r := search(t, c, tc.query, Options{Embedder: lexicalEmbedder(), MinLexicalEvidence: &never})
			var cosines []float64
			for _, v := range c.Vectors {
				cosines = append(cosines, embedding.Cosine(mustEmbed(t, tc.query), v))
			}
			slices.Sort(cosines)
			slices.Reverse(cosines)
			margin := cosines[0] - cosines[marginRank-1]
			w := DefaultSemanticWeight * min(1, strongLexicalEvidence/r.LexicalEvidence)
			if tc.shrunk {
				w *= margin / confidentMargin
			}
			if tc.shrunk != (margin < confidentMargin) || math.Abs(r.SemanticWeight-w) > 1e-6 {
				t.Fatalf("lead %.4f of the first cosine over the tenth, evidence %.2f: weight %.4f, want %.4f", margin, r.LexicalEvidence, r.SemanticWeight, w)
			}
		})
	}
}
