package evaluation

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
)

// A set's setting is chosen on the other sets only: a setting that wins
// on one set alone is chosen for none (the set it won on is left out
// when choosing for it), though tuning on that set would pick it.
func TestCrossChoosesOnTheOtherSets(t *testing.T) {
	c := &Cross{Sets: []string{"a", "b", "c"}, Recall: [][]float64{
		{0.99, 0.50, 0.50}, // wins on a alone
		{0.70, 0.80, 0.80}, // best on b and c together
		{0.70, 0.75, 0.82}, // best on c alone
	}}
	c.choose()
	if want := []int{1, 2, 1}; !slices.Equal(c.Chosen, want) {
		t.Fatalf("chosen %v, want %v: a's on b and c, b's on a and c, c's on a and b", c.Chosen, want)
	}
	if want := []int{0, 1, 2}; !slices.Equal(c.Tuned, want) {
		t.Fatalf("tuned %v, want %v", c.Tuned, want)
	}
}

// A run over real sets searches every setting on every set, the default
// among them, and reports each set's chosen setting there.
func TestRunCrossOverTwoSets(t *testing.T) {
	ctx := context.Background()
	var sets []*Prepared
	for _, dir := range []string{"testdata/mini", "testdata/metatool"} {
		ds, err := LoadDataset(dir)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Prepare(ctx, dir, ds, BuildOptions{Embedder: embedding.LexicalEmbedder{}, Generator: embedding.TemplateQueryGenerator{}, QueriesPerTool: 3, Concurrency: 2})
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, p)
	}
	grid := []Setting{{SemanticWeight: 0.2, MinLexicalEvidence: 1, Intents: "off"}, DefaultSetting}
	c, err := RunCross(ctx, sets, grid)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Recall) != 2 || len(c.Recall[0]) != 2 || len(c.BM25) != 2 || c.Default != 1 || len(c.Chosen) != 2 {
		t.Fatalf("cross run %+v", c)
	}
	for i, row := range c.Recall {
		for set, r := range row {
			if r <= 0 || r > 1 {
				t.Fatalf("recall@5 of %s on %s: %v", grid[i], c.Sets[set], r)
			}
		}
	}
	// Each set's chosen setting is the better one on the other set.
	for held, chosen := range c.Chosen {
		other := 1 - held
		if c.Recall[chosen][other] < c.Recall[1-chosen][other] {
			t.Fatalf("for %s, chose %s, which is worse on %s", c.Sets[held], grid[chosen], c.Sets[other])
		}
	}
	if _, err := RunCross(ctx, sets, grid[:1]); err == nil {
		t.Fatal("a grid without the default setting ran")
	}
}

// The grid file holds every setting's recall@5 on every set, to choose
// over several runs.
func TestWriteGridListsEverySettingOnEverySet(t *testing.T) {
	c := &Cross{Sets: []string{"a", "b"}, Settings: []Setting{DefaultSetting, {SemanticWeight: 0.3, MinLexicalEvidence: 1, Intents: "off"}},
		Recall: [][]float64{{0.5, 0.25}, {0.125, 1}}}
	var b strings.Builder
	if err := c.WriteGrid(&b); err != nil {
		t.Fatal(err)
	}
	want := "setting\ta\tb\n" + DefaultSetting.String() + "\t0.5000\t0.2500\nw=0.30 e=1.0 intents off\t0.1250\t1.0000\n"
	if b.String() != want {
		t.Fatalf("grid\n%q\nwant\n%q", b.String(), want)
	}
}
