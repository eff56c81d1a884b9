package toolcatalog

import (
	"context"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

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
	g, err := c.Grade(context.Background(), querySets(t, fixture))
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
	g, err = c.Grade(context.Background(), querySets(t, tools))
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
	g, err := c.Grade(context.Background(), map[string]QuerySet{"misc_helper": sets["misc_helper"]})
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
	g, err := c.Grade(context.Background(), map[string]QuerySet{"get_weather": {Queries: one.Queries[:1], Vectors: one.Vectors[:1]}})
	if err != nil {
		t.Fatal(err)
	}
	if g.Tools != 0 || g.Queries != 0 || g.SelfRecallAt5 != 0 {
		t.Fatalf("grading %+v, want nothing graded", g)
	}
}
