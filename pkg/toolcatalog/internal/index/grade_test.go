package index

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/internal/testing/openaitest"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// grade grades the catalog with its own queries, searching every one, as
// a fresh grader does.
func (c *Catalog) grade(ctx context.Context, sets map[string]QuerySet) (*Grading, error) {
	g, _, err := (&grader{maxSearches: -1}).grade(ctx, c, sets)
	return g, err
}

// querySets embeds each fixture tool's queries and description, the set
// its centroid was built from.
func querySets(t *testing.T, tools []fixtureTool) map[string]QuerySet {
	t.Helper()
	out := map[string]QuerySet{}
	for _, ft := range tools {
		texts := append(append([]string(nil), ft.queries...), ft.description)
		vecs, err := lexicalEmbedder().Embed(context.Background(), texts)
		if err != nil {
			t.Fatal(err)
		}
		out[ft.name] = QuerySet{Queries: texts, Vectors: vecs}
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
	sets["misc_helper"] = QuerySet{Queries: odd.queries, Vectors: sets["misc_helper"].Vectors[:2]}
	g, err := c.grade(context.Background(), map[string]QuerySet{"misc_helper": sets["misc_helper"]})
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
	g, err := c.grade(context.Background(), map[string]QuerySet{"get_weather": {Queries: one.Queries[:1], Vectors: one.Vectors[:1]}})
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
	v1, err := New(doc, raw)
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
	again, _, err := g.grade(ctx, v1.Next(doc, raw), sets1)
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
	v2 := g.graded().Next(doc2, raw2)
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
	grade := func(g *grader, c *Catalog) *Grading {
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
		want := copies.graded().Next(doc, changed)
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
	// The same tools in the same rows: found as v1 found them.
	sharedLookUps := func(a, b *Catalog) bool {
		return reflect.ValueOf(a.tools).Pointer() == reflect.ValueOf(b.tools).Pointer() && reflect.ValueOf(a.Vectors).Pointer() == reflect.ValueOf(b.Vectors).Pointer()
	}
	if !sharedLookUps(v2, v1) {
		t.Fatal("Next made look-ups of its own for the same tools in the same rows")
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
	if sharedLookUps(v3, v2b) {
		t.Fatal("Next kept the look-ups of tools that went")
	}
	same(v3, &doc3, moved)

	// create_issue comes back: it needs a row, and the rows are laid out
	// anew. v3 lets go of its rows and search index then, not after the
	// grade, and is offered no more.
	v4 := g.nextVersion(doc, map[string][]byte{"create_issue": raw["create_issue"]})
	if &v4.matrix[0] == storage {
		t.Fatal("Next wrote over the rows for a tool that had none")
	}
	if v3.matrix != nil || v3.Vectors != nil || v3.index.postings != nil {
		t.Fatal("the catalog Next copied still holds its rows or its search index through the grade")
	}
	if g.graded() != nil {
		t.Fatal("the catalog Next copied is still offered")
	}
	same(v4, doc, map[string][]byte{"create_issue": raw["create_issue"]})
}

func buildCatalog(t *testing.T, doc *contract.Document, raw map[string][]byte) *Catalog {
	t.Helper()
	c, err := New(doc, raw)
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
	unit := func(text string) []float32 { return textVector(text, dims) }
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
	sets := map[string]QuerySet{}
	for i := 0; i < n; i += 20 {
		var set QuerySet
		for j := range 5 {
			q := fmt.Sprintf("request %d for %x", j+1, i*31+j)
			set.Queries = append(set.Queries, q)
			set.Vectors = append(set.Vectors, unit(q))
		}
		sets[fmt.Sprintf("tool_%04d", i)] = set
	}
	c, err := New(version(1), raw)
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
	// cosine's share of 0.6; the fifth tool blended at 0.5; the tenth
	// cosine 0.47.
	bw := &blendWatch{w: 0.6, cosHi: 0.6, cosLo: 0.2, lexHi: 8, evidence: 1, minEvidence: 1, kth: 0.5, marginCos: 0.47}
	const maxIDF = 8
	for _, tc := range []struct {
		name         string
		cosine, bm25 float64
		semanticOnly bool
		want         bool
	}{
		{"far under the fifth", 0.3, 2, false, false},                             // 0.15 + 0.1
		{"within the margin of the fifth", 0.4, 3.2, false, true},                 // 0.3 + 0.16
		{"above the fifth", 0.5, 4, false, true},                                  // 0.45 + 0.2
		{"into the cosine's top ten, which sets its share", 0.48, 0, false, true}, // 0.42 alone
		{"no vector, a weak match", math.Inf(-1), 4, false, false},                // 0.2
		{"a best BM25 lowers every other tool", 0.2, 16, false, true},             // 0.4, others down to 0.2
		{"strong evidence reweighs every tool", 0, 17, false, true},
		{"no match: semantic-only stays", 0.3, 0, true, false},
		{"semantic-only ignores a match under the best", 0.3, 7, true, false},
		{"evidence crosses into the blend", 0.3, 9, true, true},
		{"semantic-only, by its cosine", 0.55, 7, true, true},
		{"semantic-only, just under the fifth", 0.519, 0, true, false},
		{"semantic-only, a tie its name breaks before the fifth", 0.52, 0, true, true},
		{"semantic-only, a tie its name breaks after the fifth", 0.52, 0, true, false},
	} {
		w := *bw
		w.semanticOnly = tc.semanticOnly
		if tc.semanticOnly {
			w.w, w.evidence, w.lexHi = 1, 0.9, 7.2
			w.kth, w.kthName = 0.52, "m_fifth" // the fifth cosine
		}
		name := "z_tool"
		if strings.Contains(tc.name, "breaks before") {
			name = "a_tool"
		}
		if got := w.reaches(name, tc.cosine, tc.bm25, maxIDF); got != tc.want {
			t.Errorf("%s: reaches(%g, %g) = %v, want %v", tc.name, tc.cosine, tc.bm25, got, tc.want)
		}
	}
	if !(&blendWatch{kth: math.Inf(-1)}).reaches("a_tool", 0, 0, maxIDF) {
		t.Error("a query whose search ranked fewer than K tools: any tool may enter")
	}
}

// gradeBothWays grades c with g, from the grading before, and whole, and
// fails unless both grade alike.
func gradeBothWays(t *testing.T, g *grader, c *Catalog, sets map[string]QuerySet) (inc, whole *Grading) {
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

// A grading of a large catalog ranks a due query's semantic arm from the
// rows it kept, not from every row, and ranks it exactly as a scan does:
// through edits that move tools into and out of the queries' best rows,
// tools that go (the rows move) and tools that come.
func TestGraderRanksFromKeptRankings(t *testing.T) {
	ctx := context.Background()
	const n, dims = keptMinRows + 500, 24
	unit := func(text string) []float32 { return textVector(text, dims) }
	name := func(i int) string { return fmt.Sprintf("tool_%05d", i) }
	vectors := map[string][]float32{}
	for i := range n {
		vectors[name(i)] = unit(name(i))
	}
	version := func(v int64) (*contract.Document, map[string][]byte) { return vectorsVersion(t, v, dims, vectors) }
	// Every 25th tool is graded by three queries.
	sets := map[string]QuerySet{}
	var queries [][]float32
	for i := 0; i < n; i += 25 {
		var set QuerySet
		for j := range 3 {
			q := fmt.Sprintf("query %d of %s", j, name(i))
			set.Queries = append(set.Queries, q)
			set.Vectors = append(set.Vectors, unit(q))
		}
		sets[name(i)] = set
		queries = append(queries, set.Vectors...)
	}
	// Every kept query is searched again at every version.
	g := &grader{maxSearches: -1, sample: len(sets)}
	doc, raw := version(1)
	first, _, err := g.grade(ctx, buildCatalog(t, doc, raw), sets)
	if err != nil {
		t.Fatal(err)
	}
	if first.Scanned != first.Searched {
		t.Fatalf("the first grading scanned %d of %d queries, want all", first.Scanned, first.Searched)
	}
	grade := func(step string, c *Catalog, wantScanned int) {
		t.Helper()
		inc, _ := gradeBothWays(t, g, c, sets)
		if inc.Searched != inc.Queries || wantScanned >= 0 && inc.Scanned != wantScanned || wantScanned < 0 && inc.Scanned == 0 {
			t.Fatalf("%s: searched %d and scanned %d of %d queries, want every one searched and %d scanned", step, inc.Searched, inc.Scanned, inc.Queries, wantScanned)
		}
		rankedAsAScan(t, step, g, sets)
	}
	// A tool in many queries' best rows: the first query's, at rank 1,
	// of the first tool in name order, so each run edits the same tools.
	best := func() string {
		for _, tn := range slices.Sorted(maps.Keys(g.tools)) {
			if k := g.tools[tn].kept[0]; k != nil && g.prev.vecNames[k.rows[0].row] != tn {
				return g.prev.vecNames[k.rows[0].row]
			}
		}
		t.Fatal("no query kept its ranking")
		return ""
	}

	// Edits in place: one tool takes a query's vector (it joins that
	// query's best rows), one at the top of a query's rows moves away
	// (it leaves them).
	top := best()
	vectors[name(1)], vectors[top] = queries[7], unit("elsewhere")
	doc, _ = version(2)
	c := g.nextVersion(doc, map[string][]byte{name(1): contract.EncodeVector(queries[7]), top: contract.EncodeVector(vectors[top])})
	grade("edits", c, 0)

	// Tools go, one of them at the top of a query's rows: the rows after
	// them move up in place.
	gone := best()
	delete(vectors, gone)
	delete(vectors, name(3))
	doc, _ = version(3)
	storage := &c.matrix[0]
	c = g.nextVersion(doc, nil)
	if &c.matrix[0] != storage {
		t.Fatal("Next copied every row to drop two")
	}
	grade("tools gone", c, 0)

	// Tools go, one of them at the top of a query's rows, and one comes
	// with a query's vector: the rows are laid out anew.
	gone = best()
	delete(vectors, gone)
	delete(vectors, name(2))
	vectors["tool_new"] = queries[11]
	doc, raw = version(4)
	grade("tools gone and come", g.nextVersion(doc, map[string][]byte{"tool_new": raw["tool_new"]}), 0)

	// Twenty of one query's best rows move away: fewer than a search
	// ranks are left, and its next search scans (the others need not).
	var q string
	var k *keptRanking
	for _, tn := range slices.Sorted(maps.Keys(g.tools)) {
		if gt := g.tools[tn]; gt.kept[0] != nil && !slices.ContainsFunc(gt.kept[0].rows[:20], func(r keptRow) bool { return g.prev.vecNames[r.row] == tn }) {
			q, k = gt.set.Queries[0], gt.kept[0]
			break
		}
	}
	moved := map[string][]byte{}
	for i, r := range k.rows[:20] {
		tn := g.prev.vecNames[r.row]
		vectors[tn] = unit(fmt.Sprintf("away %d", i))
		moved[tn] = contract.EncodeVector(vectors[tn])
	}
	doc, _ = version(5)
	t.Logf("%d tools of %q's best rows moved", len(moved), q)
	grade("a query's best rows gone", g.nextVersion(doc, moved), -1)

	// A graded tool's own vector changes: its queries scan again.
	vectors[name(25)] = unit("moved")
	doc, _ = version(6)
	grade("a graded tool edited", g.nextVersion(doc, map[string][]byte{name(25): contract.EncodeVector(vectors[name(25)])}), len(sets[name(25)].Queries))
}

// Kept rankings follow any sequence of versions: tools edited, gone,
// come, without a vector and given one again, graded tools among them,
// each version ranking as a scan does.
func TestGraderKeptRankingsFollowAnyVersion(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { keptRankingsFollow(t, seed) })
	}
}

func keptRankingsFollow(t *testing.T, seed uint64) {
	ctx := context.Background()
	const n, dims = keptMinRows + 400, 16
	r := rand.New(rand.NewPCG(seed, 11))
	unit := func() []float32 {
		v := gaussian(r, dims, 1)
		var norm float64
		for _, x := range v {
			norm += float64(x) * float64(x)
		}
		for i := range v {
			v[i] /= float32(math.Sqrt(norm))
		}
		return v
	}
	name := func(i int) string { return fmt.Sprintf("tool_%05d", i) }
	vectors := map[string][]float32{} // nil: the tool has no vector
	for i := range n {
		vectors[name(i)] = unit()
	}
	sets := map[string]QuerySet{}
	for i := 0; i < n; i += 40 {
		set := QuerySet{Queries: []string{"a " + name(i), "b " + name(i)}}
		set.Vectors = [][]float32{unit(), unit()}
		sets[name(i)] = set
	}
	version := func(v int64) (*contract.Document, map[string][]byte) { return vectorsVersion(t, v, dims, vectors) }
	g := &grader{maxSearches: -1, sample: len(sets)}
	doc, raw := version(1)
	if _, _, err := g.grade(ctx, buildCatalog(t, doc, raw), sets); err != nil {
		t.Fatal(err)
	}
	for v := int64(2); v < 25; v++ {
		changed := map[string][]byte{}
		names := slices.Sorted(maps.Keys(vectors))
		many, large := false, len(g.prev.vecNames) >= keptMinRows
		for range 1 + r.IntN(4) {
			tn := names[r.IntN(len(names))]
			switch op := r.IntN(5); {
			case op == 0: // a tool goes
				delete(vectors, tn)
			case op == 1: // a tool comes
				tn = fmt.Sprintf("tool_%05d_%d", r.IntN(n), v)
				vectors[tn] = unit()
				changed[tn] = contract.EncodeVector(vectors[tn])
			case op == 2 && sets[tn].Queries == nil: // a tool loses its vector
				vectors[tn] = nil
			case op == 3 && r.IntN(4) == 0: // many tools go, graded ones among them
				many = true
				for _, tn := range names {
					if r.IntN(3) == 0 {
						delete(vectors, tn)
					}
				}
			case op == 3: // a graded tool comes back
				for gn := range sets {
					if _, ok := vectors[gn]; !ok {
						vectors[gn] = unit()
						changed[gn] = contract.EncodeVector(vectors[gn])
						break
					}
				}
			default: // a tool's vector changes, or it gets one again
				vectors[tn] = unit()
				changed[tn] = contract.EncodeVector(vectors[tn])
			}
		}
		doc, _ := version(v)
		step := fmt.Sprintf("version %d", v)
		inc, _ := gradeBothWays(t, g, g.nextVersion(doc, changed), sets)
		rankedAsAScan(t, step, g, sets)
		if large && !many && len(g.prev.vecNames) >= keptMinRows && inc.Scanned == inc.Searched {
			t.Fatalf("%s: every query scanned", step)
		}
	}
}

// The grading's own flow: each version indexed from the last graded
// (Index), some indexed twice when a grading failed between, and some
// older versions graded again (a retried job).
func TestGraderKeptRankingsFollowTheGradingFlow(t *testing.T) {
	for _, touching := range []bool{false, true} {
		t.Run(fmt.Sprintf("touched named %v", touching), func(t *testing.T) { gradingFlow(t, touching) })
	}
}

// gradingFlow is TestGraderKeptRankingsFollowTheGradingFlow, its Index
// told which tools changed since the version graded last when touching,
// as the manager's grading tells it, and half the versions changing
// vectors alone, which Index then takes by looking at those tools only.
func gradingFlow(t *testing.T, touching bool) {
	ctx := context.Background()
	const n, dims = keptMinRows + 300, 16
	r := rand.New(rand.NewPCG(3, 5))
	unit := func() []byte { return contract.EncodeVector(gaussian(r, dims, 1)) }
	name := func(i int) string { return fmt.Sprintf("tool_%05d", i) }
	raw := map[string][]byte{}
	for i := range n {
		raw[name(i)] = unit()
	}
	sets := map[string]QuerySet{}
	for i := 0; i < n; i += 40 {
		set := QuerySet{Queries: []string{"a " + name(i), "b " + name(i)}}
		for range 2 {
			v, _ := contract.DecodeVector(unit())
			set.Vectors = append(set.Vectors, v)
		}
		sets[name(i)] = set
	}
	type version struct {
		doc *contract.Document
		raw map[string][]byte
	}
	var versions []version
	publish := func() {
		tools := map[string][]float32{} // the tools; their vectors are raw's
		for tn := range raw {
			tools[tn] = nil
		}
		doc, _ := vectorsVersion(t, int64(len(versions)+1), dims, tools)
		versions = append(versions, version{doc, maps.Clone(raw)})
	}
	g := &indexGrader{grader: grader{maxSearches: -1, sample: len(sets)}}
	graded, indexed := -1, -1 // the versions graded and indexed last
	took := 0                 // the indexes that looked at the touched tools only
	index := func(at int) {
		v := versions[at]
		var touched []string
		if touching && graded >= 0 {
			touched = []string{}
			last := versions[graded].raw
			for name, vec := range v.raw {
				if !bytes.Equal(vec, last[name]) {
					touched = append(touched, name)
				}
			}
			for name := range last {
				if _, ok := v.raw[name]; !ok {
					touched = append(touched, name)
				}
			}
		}
		graded, indexed = -1, at
		digest := func(name string) uint64 { return contract.VectorDigest(v.raw[name]) }
		read := func(names []string) (map[string]string, error) {
			out := map[string]string{}
			for _, name := range names {
				out[name] = string(v.raw[name])
			}
			return out, nil
		}
		if err := g.Index(v.doc, 500, digest, touched, read); err != nil {
			t.Fatal(err)
		}
		if g.nextAll {
			took++
		}
		// The rows and text indexed are the version's, as an index of
		// it read whole holds them.
		whole, err := newReading(v.doc, 500, true, read)
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range v.doc.Tools {
			got, want := g.indexed.rowIndex(tool.Name), whole.rowIndex(tool.Name)
			if (got < 0) != (want < 0) || got >= 0 && !slices.Equal(g.indexed.rowVector(got), whole.rowVector(want)) {
				t.Fatalf("version %d: %s's row as indexed differs from the version's", at+1, tool.Name)
			}
		}
		if !g.indexed.int8Only || g.indexed.matrix != nil || len(g.indexed.Vectors) != 0 {
			t.Fatal("the grading's index holds float rows")
		}
	}
	grade := func() *Grading {
		t.Helper()
		got, _, err := g.Grade(ctx, sets)
		if err != nil {
			t.Fatal(err)
		}
		graded = indexed
		return got
	}
	publish()
	index(0)
	grade()
	for step := range 30 {
		names := slices.Sorted(maps.Keys(raw))
		kinds := 3
		if touching && step%2 == 0 {
			kinds = 1 // vectors changed, no tool come or gone
		}
		for range 1 + r.IntN(30) {
			tn := names[r.IntN(len(names))]
			switch r.IntN(kinds) + 3 - kinds {
			case 0:
				delete(raw, tn)
			case 1:
				raw[fmt.Sprintf("%s_%d", tn, step)] = unit()
			default:
				raw[tn] = unit()
			}
		}
		publish()
		last := len(versions) - 1
		v := versions[last]
		switch r.IntN(4) {
		case 0: // a grading failed after its index
			index(last - 1)
		case 1: // an older version is graded again first
			index(r.IntN(len(versions)))
			grade()
		}
		index(last)
		inc := grade()
		rankedAsAScan(t, fmt.Sprintf("step %d", step), &g.grader, sets)
		t.Logf("step %d: %d tools, searched %d, scanned %d", step, len(v.doc.Tools), inc.Searched, inc.Scanned)
	}
	if touching && took < 5 {
		t.Fatalf("%d indexes looked at the touched tools only; want those of most versions that changed vectors alone", took)
	}
}

// An Index told which tools changed looks at those alone: a tool whose
// text and vector changed is re-indexed in place, and the version grades
// as a grader that built it whole grades it; a tool that comes, or a
// touched tool that gains a row, has the whole index checked.
func TestIndexOfTheTouchedToolsGradesAsAWholeOne(t *testing.T) {
	ctx := context.Background()
	base := gradedFixture()
	doc, raw := fixtureParts(t, base, contract.SearchDefaults{Method: "hybrid", TopK: 5})
	sets := querySets(t, base)
	g := &indexGrader{}
	index := func(g *indexGrader, doc *contract.Document, raw map[string][]byte, touched []string) {
		t.Helper()
		read := func(names []string) (map[string]string, error) {
			out := map[string]string{}
			for _, n := range names {
				if v, ok := raw[n]; ok {
					out[n] = string(v)
				}
			}
			return out, nil
		}
		if err := g.Index(doc, 1000, func(name string) uint64 { return contract.VectorDigest(raw[name]) }, touched, read); err != nil {
			t.Fatal(err)
		}
	}
	// What was graded, not how many searches it took.
	grade := func(g *indexGrader) *Grading {
		t.Helper()
		got, _, err := g.Grade(ctx, sets)
		if err != nil {
			t.Fatal(err)
		}
		got.Searched, got.Scanned = 0, 0
		return got
	}
	index(g, doc, raw, nil)
	grade(g)

	// send_email now reads as a letter and takes get_weather's vector.
	edited := *doc
	edited.Tools = slices.Clone(doc.Tools)
	for i := range edited.Tools {
		if edited.Tools[i].Name == "send_email" {
			edited.Tools[i].Description = "Post a paper letter to a street address."
		}
	}
	raw2 := maps.Clone(raw)
	raw2["send_email"] = raw["get_weather"]
	before := g.indexed.index
	index(g, &edited, raw2, []string{"send_email"})
	if !g.nextAll || g.indexed.index != before {
		t.Fatal("an Index told of one tool's change did not take the last index in place")
	}
	if d := g.indexed.index.docs[g.indexed.tools["send_email"]]; !d.indexes(edited.Tools[g.indexed.tools["send_email"]]) {
		t.Fatalf("send_email is indexed as %q", d.description)
	}
	fresh := &indexGrader{}
	index(fresh, &edited, raw2, nil)
	if got, whole := grade(g), grade(fresh); !reflect.DeepEqual(got, whole) {
		t.Fatalf("grading after the touched tool was re-indexed:\n%+v\nwhole:\n%+v", got, whole)
	}

	// A tool comes: the tools are not the last version's, and the whole
	// index is checked, touched or not.
	more := edited
	more.Tools = append(slices.Clone(edited.Tools), contract.Tool{Name: "zz_new_tool", Description: "A tool that came.", Parameters: json.RawMessage(`{}`)})
	raw3 := maps.Clone(raw2)
	raw3["zz_new_tool"] = raw["create_issue"]
	index(g, &more, raw3, []string{"zz_new_tool"})
	if g.nextAll {
		t.Fatal("an Index took a new tool for a change of the tools it had")
	}
	fresh = &indexGrader{}
	index(fresh, &more, raw3, nil)
	if got, whole := grade(g), grade(fresh); !reflect.DeepEqual(got, whole) {
		t.Fatalf("grading after a tool came:\n%+v\nwhole:\n%+v", got, whole)
	}
}

// A grading that fails after its catalog was written over the last one's
// rows leaves nothing the next grading builds on: it starts afresh, and
// ranks as a scan of the version does.
func TestGraderStartsAfreshAfterAFailedGrade(t *testing.T) {
	ctx := context.Background()
	base := gradedFixture()
	doc, raw := fixtureParts(t, base, contract.SearchDefaults{Method: "hybrid", TopK: 5})
	sets := querySets(t, base)
	g := &grader{}
	if _, _, err := g.grade(ctx, buildCatalog(t, doc, raw), sets); err != nil {
		t.Fatal(err)
	}
	// The first tool goes and get_weather takes send_email's vector: the
	// rows move up, written over the graded catalog's.
	first := doc.Tools[0].Name
	doc2 := *doc
	doc2.Tools = slices.DeleteFunc(slices.Clone(doc.Tools), func(tl contract.Tool) bool { return tl.Name == first })
	c := g.nextVersion(&doc2, map[string][]byte{"get_weather": raw["send_email"]})
	bad := maps.Clone(sets)
	bad["get_weather"] = QuerySet{Queries: []string{"a", "b"}, Vectors: [][]float32{{1}, {1}}}
	if _, _, err := g.grade(ctx, c, bad); err == nil {
		t.Fatal("a query vector of the wrong length graded")
	}
	if g.graded() != nil {
		t.Fatal("the catalog written over is still offered after a failed grade")
	}
	// The next version is read whole, and grades as a fresh grader does.
	raw2 := maps.Clone(raw)
	delete(raw2, first)
	raw2["get_weather"] = raw["send_email"]
	if g.nextVersion(&doc2, nil) != nil {
		t.Fatal("nextVersion built on a catalog a failed grade left")
	}
	gradeBothWays(t, g, buildCatalog(t, &doc2, raw2), sets)
}

// vectorsVersion is a hybrid catalog's version of a tool per name in
// vectors, with the vectors as raw (a nil vector: the tool has none).
func vectorsVersion(t *testing.T, v int64, dims int, vectors map[string][]float32) (*contract.Document, map[string][]byte) {
	t.Helper()
	doc := &contract.Document{Version: v, Catalog: "test/kept", Embedding: contract.EmbeddingInfo{Model: "m", Dimensions: dims},
		Search: contract.SearchDefaults{Method: "hybrid", TopK: 5}}
	raw := map[string][]byte{}
	for _, tn := range slices.Sorted(maps.Keys(vectors)) {
		tool, err := contract.NormalizeTool(contract.Tool{Name: tn, Description: "Tool " + tn + " does one thing."})
		if err != nil {
			t.Fatal(err)
		}
		doc.Tools = append(doc.Tools, tool)
		if vec := vectors[tn]; vec != nil {
			raw[tn] = contract.EncodeVector(vec)
		}
	}
	if err := doc.Seal(); err != nil {
		t.Fatal(err)
	}
	return doc, raw
}

// rankedAsAScan fails unless every outcome g kept for the catalog it
// graded last is a fresh grader's, which scans every row: the top five,
// the semantic watch score and the blend's scales.
func rankedAsAScan(t *testing.T, step string, g *grader, sets map[string]QuerySet) {
	t.Helper()
	whole := &grader{maxSearches: -1}
	if _, _, err := whole.grade(context.Background(), g.prev, sets); err != nil {
		t.Fatal(err)
	}
	for tn, gt := range g.tools {
		for i, o := range gt.outcomes {
			w := whole.tools[tn].outcomes[i]
			if !slices.Equal(o.top, w.top) || o.semWatch != w.semWatch || !reflect.DeepEqual(o.blend, w.blend) {
				t.Fatalf("%s: query %q ranks %v (watch %v, blend %+v) from its kept rows, %v (watch %v, blend %+v) from every row",
					step, gt.set.Queries[i], o.top, o.semWatch, o.blend, w.top, w.semWatch, w.blend)
			}
		}
	}
}

// textVector is the provider's unit vector of text, as float32.
func textVector(text string, dims int) []float32 {
	f := openaitest.Vector(text, dims)
	v := make([]float32, dims)
	for i := range f {
		v[i] = float32(f[i])
	}
	return v
}

// By default one grade is bounded by work: a small catalog's queries are
// searched in one grade, a large catalog's DefaultMaxSearches at a time.
func TestGraderBoundsAGradeByItsWork(t *testing.T) {
	const dims = 16
	r := rand.New(rand.NewPCG(7, 7))
	unit := func() []float32 {
		v := gaussian(r, dims, 1)
		normalize(v)
		return v
	}
	for _, tc := range []struct{ tools, graded, searched int }{
		{tools: 512, graded: 512, searched: 1024},
		{tools: MaxSearchesTools, graded: 300, searched: DefaultMaxSearches},
	} {
		vectors := map[string][]float32{}
		sets := map[string]QuerySet{}
		for i := range tc.tools {
			name := fmt.Sprintf("tool_%05d", i)
			vectors[name] = unit()
			if i < tc.graded {
				sets[name] = QuerySet{Queries: []string{"a " + name, "b " + name}, Vectors: [][]float32{unit(), unit()}}
			}
		}
		doc, raw := vectorsVersion(t, 1, dims, vectors)
		g, left, err := (&grader{}).grade(context.Background(), buildCatalog(t, doc, raw), sets)
		if err != nil {
			t.Fatal(err)
		}
		if g.Searched != tc.searched || left != 2*tc.graded-tc.searched {
			t.Errorf("%d tools: searched %d, left %d; want %d, %d", tc.tools, g.Searched, left, tc.searched, 2*tc.graded-tc.searched)
		}
	}
}

// A grading's catalog holds its rows as int8 only, and grades as the
// float rows do, within what int8 rounding can move: tools whose queries
// lie near them, at distances where ranks are close, grade to about the
// same self recall, and the same tools are outranked most.
func TestAGradingOfInt8RowsGradesAsTheFloatRows(t *testing.T) {
	const n, dims = 3000, 64
	r := rand.New(rand.NewPCG(21, 22))
	unit := func(v []float32) []float32 {
		normalize(v)
		return v
	}
	vectors := map[string][]float32{}
	sets := map[string]QuerySet{}
	for i := range n {
		name := fmt.Sprintf("tool_%04d", i)
		vectors[name] = unit(gaussian(r, dims, 1))
		if i%15 != 0 {
			continue
		}
		var set QuerySet
		for j := range 4 {
			q := gaussian(r, dims, 0.2)
			for k := range q {
				q[k] += vectors[name][k]
			}
			set.Queries = append(set.Queries, fmt.Sprintf("request %d", i*4+j))
			set.Vectors = append(set.Vectors, unit(q))
		}
		sets[name] = set
	}
	doc, raw := vectorsVersion(t, 1, dims, vectors)
	floats := buildCatalog(t, doc, raw)
	int8s, err := newReading(doc, 1000, true, func(names []string) (map[string]string, error) {
		out := map[string]string{}
		for _, name := range names {
			out[name] = string(raw[name])
		}
		return out, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if int8s.matrix != nil || len(int8s.Vectors) != 0 {
		t.Fatal("the grading's catalog holds float rows")
	}
	want, err := floats.grade(context.Background(), sets)
	if err != nil {
		t.Fatal(err)
	}
	got, err := int8s.grade(context.Background(), sets)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("self recall@5: float rows %.4f, int8 rows %.4f; outranked %d and %d", want.SelfRecallAt5, got.SelfRecallAt5, len(want.Outranked), len(got.Outranked))
	if want.SelfRecallAt5 < 0.3 || want.SelfRecallAt5 > 0.95 {
		t.Fatalf("self recall %.3f: the fixture's ranks are not close enough to say anything", want.SelfRecallAt5)
	}
	if got.Queries != want.Queries || math.Abs(got.SelfRecallAt5-want.SelfRecallAt5) > 0.01 {
		t.Fatalf("int8 rows grade %d queries to %.4f, float rows %d to %.4f", got.Queries, got.SelfRecallAt5, want.Queries, want.SelfRecallAt5)
	}
	top := func(g *Grading) []string {
		var out []string
		for _, o := range g.Outranked[:min(5, len(g.Outranked))] {
			out = append(out, o.Tool)
		}
		return out
	}
	if !slices.Equal(top(got), top(want)) {
		t.Fatalf("int8 rows outrank %v most, float rows %v", top(got), top(want))
	}
}

// A kept ranking fits the bytes KeptBytes promises per graded query.
func TestAKeptRankingFitsItsBudget(t *testing.T) {
	if size := (depth(K) + keptSlack) * 8; size > KeptBytes {
		t.Fatalf("a kept ranking holds %d bytes, more than KeptBytes (%d)", size, KeptBytes)
	}
}
