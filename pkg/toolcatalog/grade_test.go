package toolcatalog

import (
	"context"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/internal/gradehook"

	"github.com/toolcatalog/tool-catalog-operator/internal/testing/openaitest"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// grade grades the catalog with its own queries, searching every one, as
// a fresh grader does.
func (c *Catalog) grade(ctx context.Context, sets map[string]gradehook.QuerySet) (*gradehook.Grading, error) {
	g, _, err := (&grader{maxSearches: -1}).grade(ctx, c, sets)
	return g, err
}

// querySets embeds each fixture tool's queries and description, the set
// its centroid was built from.
func querySets(t *testing.T, tools []fixtureTool) map[string]gradehook.QuerySet {
	t.Helper()
	out := map[string]gradehook.QuerySet{}
	for _, ft := range tools {
		texts := append(append([]string(nil), ft.queries...), ft.description)
		vecs, err := lexicalEmbedder().Embed(context.Background(), texts)
		if err != nil {
			t.Fatal(err)
		}
		out[ft.name] = gradehook.QuerySet{Queries: texts, Vectors: vecs}
	}
	return out
}

func TestGradeFindsDistinctToolsAndNamesConfusablePairs(t *testing.T) {
	c := buildFixture(t, fixture, contract.SearchDefaults{Method: "hybrid", TopK: 5})
	g, err := c.grade(context.Background(), querySets(t, fixture))
	if err != nil {
		t.Fatal(err)
	}
	if g.Tools != len(fixture) || g.Queries != 23 {
		t.Fatalf("graded %d tools and %d queries, want %d and 23", g.Tools, g.Queries, len(fixture))
	}
	// Six distinct tools: nearly every query finds its tool among five
	// (the lexical model cannot link "will it rain tomorrow" to the other
	// weather queries), and no two tools are confused.
	if g.SelfRecallAt5 < 0.85 || len(g.Confusable) != 0 {
		t.Fatalf("distinct fixture: self recall %.3f, outranked %+v, confusable %+v", g.SelfRecallAt5, g.Outranked, g.Confusable)
	}

	// A second mail tool that says the same in other words.
	twin := fixtureTool{name: "send_mail", description: "Send a mail message to a recipient by email.", params: `{"type":"object","properties":{"to":{},"body":{}}}`,
		queries: []string{"mail my manager", "send an email message to Ana", "write to the team by email"}}
	tools := append(append([]fixtureTool(nil), fixture...), twin)
	c = buildFixture(t, tools, contract.SearchDefaults{Method: "hybrid", TopK: 5})
	g, err = c.grade(context.Background(), querySets(t, tools))
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Confusable) != 1 || g.Confusable[0].A != "send_email" || g.Confusable[0].B != "send_mail" {
		t.Fatalf("confusable %+v, want send_email and send_mail", g.Confusable)
	}
	if s := g.Confusable[0].Similarity; s < 0.5 || s > 1 {
		t.Errorf("similarity %.3f, want the centroids' cosine", s)
	}
	t.Logf("self recall %.3f, outranked %+v, confusable %+v", g.SelfRecallAt5, g.Outranked, g.Confusable)
}

// A query must not find its tool through itself: each query of a tool
// whose two queries share nothing is outranked, once left out, by the five
// tools that hold one of its words, though searched directly (with the
// query inside the tool's centroid) it finds the tool first.
func TestGradeLeavesEachQueryOut(t *testing.T) {
	odd := fixtureTool{name: "misc_helper", description: "Assorted utility.", params: `{}`,
		queries: []string{"zebra xylophone quartz falcon lantern", "volcano marmalade jigsaw compass trumpet"}}
	tools := append(append([]fixtureTool(nil), fixture...), odd)
	for _, w := range []string{"zebra", "xylophone", "quartz", "falcon", "lantern", "volcano", "marmalade", "jigsaw", "compass", "trumpet"} {
		tools = append(tools, fixtureTool{name: w + "_facts", description: "Facts about the " + w + ".", params: `{}`,
			queries: []string{w + " facts", "tell me about the " + w}})
	}
	c := buildFixture(t, tools, contract.SearchDefaults{Method: "semantic", TopK: 5})
	sets := querySets(t, tools)
	// Only the two odd queries, not the description.
	sets["misc_helper"] = gradehook.QuerySet{Queries: odd.queries, Vectors: sets["misc_helper"].Vectors[:2]}
	g, err := c.grade(context.Background(), map[string]gradehook.QuerySet{"misc_helper": sets["misc_helper"]})
	if err != nil {
		t.Fatal(err)
	}
	if g.Tools != 1 || g.Queries != 2 || len(g.Outranked) != 1 || g.Outranked[0].Tool != "misc_helper" || g.Outranked[0].Missed != 2 {
		t.Fatalf("grading %+v, want misc_helper missed by both its queries", g)
	}
	if by := g.Outranked[0].By; by == "" || by == "misc_helper" {
		t.Errorf("outranked by %q, want one of the facts tools", by)
	}
	for _, q := range odd.queries {
		if got := firstRanked(search(t, c, q, Options{Embedder: lexicalEmbedder()})); got != "misc_helper" {
			t.Fatalf("direct search for %q ranks %s first, want misc_helper", q, got)
		}
	}
}

func TestGradeSkipsToolsWithOneQuery(t *testing.T) {
	c := buildFixture(t, fixture, contract.SearchDefaults{Method: "hybrid", TopK: 5})
	sets := querySets(t, fixture)
	one := sets["get_weather"]
	g, err := c.grade(context.Background(), map[string]gradehook.QuerySet{"get_weather": {Queries: one.Queries[:1], Vectors: one.Vectors[:1]}})
	if err != nil {
		t.Fatal(err)
	}
	if g.Tools != 0 || g.Queries != 0 || g.SelfRecallAt5 != 0 {
		t.Fatalf("grading %+v, want nothing graded", g)
	}
}

// A grader searches again only what a version could change, and comes to
// what grading the version whole comes to.
func TestGraderRegradesWhatAVersionCouldChange(t *testing.T) {
	ctx := context.Background()
	search := contract.SearchDefaults{Method: "hybrid", TopK: 5}
	base := gradedFixture()
	doc, raw := fixtureParts(t, base, search)
	v1, err := New(doc, raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := &grader{sample: 1}
	sets1 := querySets(t, base)
	got, left, err := g.grade(ctx, v1, sets1)
	if err != nil || left != 0 {
		t.Fatalf("first grading: %v, %d left", err, left)
	}
	total := 23 + 20*4
	if got.Searched != got.Queries || got.Queries != total {
		t.Fatalf("the first grading searched %d of %d queries, want all %d", got.Searched, got.Queries, total)
	}

	// Nothing changed: only the sample is searched again.
	again, _, err := g.grade(ctx, v1.Next(doc, raw, nil), sets1)
	if err != nil {
		t.Fatal(err)
	}
	firstTool := slices.Min(slices.Collect(maps.Keys(sets1)))
	if want := len(sets1[firstTool].Queries); again.Searched != want || again.Queries != total || again.SelfRecallAt5 != got.SelfRecallAt5 {
		t.Fatalf("an unchanged version: searched %d, graded %d, recall %.3f; want %d (one tool's), %d, %.3f", again.Searched, again.Queries, again.SelfRecallAt5, want, total, got.SelfRecallAt5)
	}

	// A twin of send_email joins: its own queries are searched, and so
	// are send_email's, which it now outranks; the pair is named as a
	// whole grading names it, with fewer searches.
	twin := fixtureTool{name: "send_mail", description: "Send a mail message to a recipient by email.", params: `{"type":"object","properties":{"to":{},"body":{}}}`,
		queries: []string{"mail my manager", "send an email message to Ana", "write to the team by email"}}
	tools := append(append([]fixtureTool(nil), base...), twin)
	doc2, raw2 := fixtureParts(t, tools, search)
	maps.Copy(raw2, raw) // the other tools' vectors, unchanged
	v2 := g.graded().Next(doc2, raw2, nil)
	sets := querySets(t, tools)
	inc, whole := gradeBothWays(t, g, v2, sets)
	if len(inc.Confusable) != 1 || inc.Confusable[0].A != "send_email" || inc.Confusable[0].B != "send_mail" {
		t.Fatalf("confusable %+v, want send_email and send_mail", inc.Confusable)
	}
	if inc.Searched >= whole.Searched {
		t.Errorf("the incremental grading searched %d queries, the whole %d: want fewer", inc.Searched, whole.Searched)
	}
	t.Logf("searched %d of %d queries", inc.Searched, whole.Searched)
}

// maxSearches bounds one grading; the next goes on where it stopped.
func TestGraderBoundsTheSearchesOfOneGrading(t *testing.T) {
	ctx := context.Background()
	c := buildFixture(t, fixture, contract.SearchDefaults{Method: "hybrid", TopK: 5})
	g := &grader{maxSearches: 10, sample: 1}
	first, left, err := g.grade(ctx, c, querySets(t, fixture))
	if err != nil {
		t.Fatal(err)
	}
	if first.Searched != 10 || first.Queries != 10 || left != 13 {
		t.Fatalf("searched %d, graded %d, %d left; want 10, 10, 13", first.Searched, first.Queries, left)
	}
	for range 4 {
		if left == 0 {
			break
		}
		next, l, err := g.grade(ctx, c, querySets(t, fixture))
		if err != nil {
			t.Fatal(err)
		}
		if next.Searched > 10 {
			t.Fatalf("a grading searched %d queries, over maxSearches", next.Searched)
		}
		first, left = next, l
	}
	if left != 0 || first.Queries != 23 {
		t.Fatalf("after five gradings: %d graded, %d left; want 23 and 0", first.Queries, left)
	}
}

// gradedFixture is the fixture with tools enough that a query's arms rank
// past watchRank.
func gradedFixture() []fixtureTool {
	base := append([]fixtureTool(nil), fixture...)
	for _, w := range []string{"zebra", "xylophone", "quartz", "falcon", "lantern", "volcano", "marmalade", "jigsaw", "compass", "trumpet",
		"glacier", "orchid", "meteor", "saffron", "harbor", "tundra", "pelican", "cobalt", "bamboo", "sapphire"} {
		base = append(base, fixtureTool{name: w + "_facts", description: "Facts about the " + w + " and its history.", params: `{}`,
			queries: []string{w + " facts", "tell me about the " + w, "history of the " + w}})
	}
	return base
}

// grader.nextVersion writes a version's changed vectors over the rows of the
// catalog last graded when the tools with a vector are the same; when
// they are not, it builds the rows afresh. Either way the version is
// graded as one built by Catalog.Next, searching the same queries.
func TestGraderNextWritesOverTheRows(t *testing.T) {
	ctx := context.Background()
	base := gradedFixture()
	doc, raw := fixtureParts(t, base, contract.SearchDefaults{Method: "hybrid", TopK: 5})
	sets := querySets(t, base)
	// g grades over its rows; copies, a grader of the same versions, each
	// built by Catalog.Next.
	g, copies := &grader{}, &grader{}
	if g.nextVersion(doc, raw) != nil {
		t.Fatal("nextVersion before the first grade built a catalog")
	}
	grade := func(g *grader, c *Catalog) *gradehook.Grading {
		t.Helper()
		got, _, err := g.grade(ctx, c, sets)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	v1 := buildCatalog(t, doc, raw)
	grade(g, v1)
	grade(copies, buildCatalog(t, doc, raw))
	same := func(c *Catalog, doc *contract.Document, changed map[string][]byte) {
		t.Helper()
		want := copies.graded().Next(doc, changed, nil)
		if !maps.EqualFunc(c.Vectors, want.Vectors, slices.Equal) {
			t.Fatal("the vectors differ from Catalog.Next's")
		}
		if got, whole := grade(g, c), grade(copies, want); !reflect.DeepEqual(got, whole) {
			t.Fatalf("grading %+v differs from %+v", got, whole)
		}
	}

	// get_weather takes send_email's vector: written over its row.
	changed := map[string][]byte{"get_weather": raw["send_email"]}
	storage := &v1.matrix[0]
	v2 := g.nextVersion(doc, changed)
	if &v2.matrix[0] != storage {
		t.Fatal("Next copied every row for a changed vector")
	}
	if g.graded() != nil {
		t.Fatal("the catalog written over is still offered after Next")
	}
	same(v2, doc, changed)
	if g.graded() != v2 {
		t.Fatal("grade did not keep the catalog it graded")
	}

	// send_email's text changes, no vector does: the text index is
	// re-indexed in place and grades as one built afresh.
	edited := *doc
	edited.Tools = slices.Clone(doc.Tools)
	for i := range edited.Tools {
		if edited.Tools[i].Name == "send_email" {
			edited.Tools[i].Description = "Post a paper letter to a street address."
		}
	}
	index := v2.index
	v2b := g.nextVersion(&edited, nil)
	if v2b.index != index {
		t.Fatal("Next built a new text index for one tool's text")
	}
	same(v2b, &edited, nil)

	// create_issue and the first tool go while send_email's vector
	// changes: the rows kept move up in place.
	first := doc.Tools[0].Name
	doc3 := *doc
	doc3.Tools = slices.DeleteFunc(slices.Clone(doc.Tools), func(tl contract.Tool) bool { return tl.Name == "create_issue" || tl.Name == first })
	moved := map[string][]byte{"send_email": raw["create_issue"]}
	v3 := g.nextVersion(&doc3, moved)
	if &v3.matrix[0] != storage || len(v3.vecNames) != len(doc.Tools)-2 {
		t.Fatalf("Next copied every row to drop two (%d rows)", len(v3.vecNames))
	}
	same(v3, &doc3, moved)

	// create_issue comes back: it needs a row, and the rows are laid out
	// anew.
	v4 := g.nextVersion(doc, map[string][]byte{"create_issue": raw["create_issue"]})
	if &v4.matrix[0] == storage {
		t.Fatal("Next wrote over the rows for a tool that had none")
	}
	same(v4, doc, map[string][]byte{"create_issue": raw["create_issue"]})
}

func buildCatalog(t *testing.T, doc *contract.Document, raw map[string][]byte) *Catalog {
	t.Helper()
	c, err := New(doc, raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A changed tool is searched against the queries it could enter the top
// of, by the score the blend would give it: an edit that brings a rare
// word into a tool matches every query holding the word, few of which it
// reaches. The incremental grading stays the whole one.
func TestGraderRegradesByTheBlendedScore(t *testing.T) {
	ctx := context.Background()
	const n, dims = 2000, 64
	unit := func(text string) []float32 {
		f := openaitest.Vector(text, dims)
		v := make([]float32, dims)
		for i := range f {
			v[i] = float32(f[i])
		}
		return v
	}
	vector := func(text string) []byte { return contract.EncodeVector(unit(text)) }
	descriptions := make([]string, n)
	raw := map[string][]byte{}
	for i := range n {
		descriptions[i] = fmt.Sprintf("Tool %d does one specific thing, number %d, for the users who ask for it.", i, i)
		raw[fmt.Sprintf("tool_%04d", i)] = vector(descriptions[i])
	}
	version := func(v int64) *contract.Document {
		doc := &contract.Document{Version: v, Catalog: "test/blend", Embedding: contract.EmbeddingInfo{Model: "m", Dimensions: dims},
			Search: contract.SearchDefaults{Method: "hybrid", TopK: 5}}
		for i, d := range descriptions {
			tool, err := contract.NormalizeTool(contract.Tool{Name: fmt.Sprintf("tool_%04d", i), Description: d})
			if err != nil {
				t.Fatal(err)
			}
			doc.Tools = append(doc.Tools, tool)
		}
		if err := doc.Seal(); err != nil {
			t.Fatal(err)
		}
		return doc
	}
	// Every fifth query holds the word "1", which one tool holds.
	sets := map[string]gradehook.QuerySet{}
	for i := 0; i < n; i += 20 {
		var set gradehook.QuerySet
		for j := range 5 {
			q := fmt.Sprintf("request %d for %x", j+1, i*31+j)
			set.Queries = append(set.Queries, q)
			set.Vectors = append(set.Vectors, unit(q))
		}
		sets[fmt.Sprintf("tool_%04d", i)] = set
	}
	c, err := New(version(1), raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := &grader{maxSearches: -1}
	if _, _, err := g.grade(ctx, c, sets); err != nil {
		t.Fatal(err)
	}

	for edit := range 3 {
		// The edit brings the word "1" (and 2, 3) into tool_0777.
		descriptions[777] = fmt.Sprintf("Tool 777, edited %d times: it does one specific thing better.", edit+1)
		raw := map[string][]byte{"tool_0777": vector(descriptions[777])}
		next := g.nextVersion(version(int64(edit+2)), raw)
		kept := map[*queryOutcome]bool{}
		var matched []*queryOutcome // kept, and matched by the edit
		for _, gt := range g.tools {
			for _, o := range gt.outcomes {
				kept[o] = true
				if o.blend != nil && next.index.scoreOf(next.tools["tool_0777"], o.terms, DefaultK1, DefaultB) > 0 {
					matched = append(matched, o)
				}
			}
		}
		inc, _ := gradeBothWays(t, g, next, sets)
		left := 0 // matched queries not searched again
		for _, gt := range g.tools {
			for _, o := range gt.outcomes {
				if kept[o] && slices.Contains(matched, o) {
					left++
				}
			}
		}
		t.Logf("edit %d: searched %d of %d queries; %d of the %d the edit matches were kept", edit+1, inc.Searched, inc.Queries, left, len(matched))
		if len(matched) < 50 || left == 0 {
			t.Fatalf("edit %d: the edit matched %d queries and %d were kept; want some matched and some kept", edit+1, len(matched), left)
		}
	}
}

// A changed tool is due when the blend would score it near the fifth
// tool, or when it changes how the blend scores every tool.
func TestBlendWatchReaches(t *testing.T) {
	// Cosines scaled between 0.2 and 0.6, BM25 between 0 and 8; a
	// cosine's share of 0.6; the fifth tool blended at 0.5.
	bw := &blendWatch{w: 0.6, cosHi: 0.6, cosLo: 0.2, lexHi: 8, evidence: 1, minEvidence: 1, kth: 0.5}
	const maxIDF = 8
	for _, tc := range []struct {
		name         string
		cosine, bm25 float64
		semanticOnly bool
		want         bool
	}{
		{"far under the fifth", 0.3, 2, false, false},                 // 0.15 + 0.1
		{"within the margin of the fifth", 0.4, 3.2, false, true},     // 0.3 + 0.16
		{"above the fifth", 0.5, 4, false, true},                      // 0.45 + 0.2
		{"no vector, a weak match", math.Inf(-1), 4, false, false},    // 0.2
		{"a best BM25 lowers every other tool", 0.2, 16, false, true}, // 0.4, others down to 0.2
		{"strong evidence reweighs every tool", 0, 17, false, true},
		{"no match: semantic-only stays", 0.3, 0, true, false},
		{"semantic-only ignores a match under the best", 0.3, 7, true, false},
		{"evidence crosses into the blend", 0.3, 9, true, true},
		{"semantic-only, by its cosine", 0.55, 7, true, true},
	} {
		w := *bw
		w.semanticOnly = tc.semanticOnly
		if tc.semanticOnly {
			w.w, w.evidence, w.lexHi = 1, 0.9, 7.2
			w.kth = 0.8 // the fifth cosine, 0.52, scaled
		}
		if got := w.reaches(tc.cosine, tc.bm25, maxIDF); got != tc.want {
			t.Errorf("%s: reaches(%g, %g) = %v, want %v", tc.name, tc.cosine, tc.bm25, got, tc.want)
		}
	}
	if !(&blendWatch{kth: math.Inf(-1)}).reaches(0, 0, maxIDF) {
		t.Error("a query whose search ranked fewer than K tools: any tool may enter")
	}
}

// gradeBothWays grades c with g, from the grading before, and whole, and
// fails unless both grade alike.
func gradeBothWays(t *testing.T, g *grader, c *Catalog, sets map[string]gradehook.QuerySet) (inc, whole *gradehook.Grading) {
	t.Helper()
	inc, _, err := g.grade(context.Background(), c, sets)
	if err != nil {
		t.Fatal(err)
	}
	if whole, err = c.grade(context.Background(), sets); err != nil {
		t.Fatal(err)
	}
	if inc.Queries != whole.Queries || inc.SelfRecallAt5 != whole.SelfRecallAt5 || !slices.Equal(inc.Confusable, whole.Confusable) || !reflect.DeepEqual(inc.Outranked, whole.Outranked) {
		t.Fatalf("incremental grading %+v differs from the whole %+v", inc, whole)
	}
	return inc, whole
}
