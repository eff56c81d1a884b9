package evaluation

// Cross-set choice: every tunable search constant is chosen on some sets
// and reported on the one left out, so a gain is counted only where it was
// not tuned (docs/search.md, "How a constant is chosen").

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/text"
)

// Setting is one choice of the hybrid method's tunable constants.
type Setting struct {
	SemanticWeight, MinLexicalEvidence float64
	Intents                            string
	// MinIntentEvidence is toolcatalog.Options.MinIntentEvidence: 0
	// uses every request's intents.
	MinIntentEvidence float64
}

// DefaultSetting is what a catalog gets without spec.search settings.
var DefaultSetting = Setting{SemanticWeight: toolcatalog.DefaultSemanticWeight, MinLexicalEvidence: toolcatalog.DefaultMinLexicalEvidence, Intents: toolcatalog.IntentsOn,
	MinIntentEvidence: toolcatalog.DefaultMinIntentEvidence}

func (s Setting) String() string {
	out := fmt.Sprintf("w=%.2f e=%.1f intents %s", s.SemanticWeight, s.MinLexicalEvidence, s.Intents)
	if s.Intents == toolcatalog.IntentsOn {
		out += fmt.Sprintf(" ≥%.1f", s.MinIntentEvidence)
	}
	return out
}

// Options are the search options of the setting, with the hybrid method.
func (s Setting) Options(emb toolcatalog.QueryEmbedder) toolcatalog.Options {
	w, e, ie := s.SemanticWeight, s.MinLexicalEvidence, s.MinIntentEvidence
	return toolcatalog.Options{Method: toolcatalog.Hybrid, Embedder: emb, SemanticWeight: &w, MinLexicalEvidence: &e, Intents: s.Intents, MinIntentEvidence: &ie}
}

// IntentThresholds are the values of MinIntentEvidence the grid tries
// with the default blend.
var IntentThresholds = []float64{0, 1, 1.5, 2.5, 3}

// Grid is the settings a cross-set run chooses among; DefaultSetting is
// one of them.
func Grid() []Setting {
	var grid []Setting
	for _, intents := range []string{toolcatalog.IntentsOn, toolcatalog.IntentsOff} {
		for _, e := range []float64{0.5, 1, 1.5, 2, 3} {
			for _, w := range []float64{0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9} {
				grid = append(grid, Setting{SemanticWeight: w, MinLexicalEvidence: e, Intents: intents, MinIntentEvidence: DefaultSetting.MinIntentEvidence})
			}
		}
	}
	for _, th := range IntentThresholds {
		s := DefaultSetting
		s.MinIntentEvidence = th
		grid = append(grid, s)
	}
	return grid
}

// Prepared is a set ready to be searched with many settings: its catalog
// built once, its queries and their intents embedded once.
type Prepared struct {
	Name     string
	Catalog  *toolcatalog.Catalog
	Queries  []Query
	Embedder toolcatalog.QueryEmbedder
}

// Prepare builds the set's catalog and embeds its queries.
func Prepare(ctx context.Context, name string, ds *Dataset, o BuildOptions) (*Prepared, error) {
	cat, err := Build(ctx, ds.Tools, o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	emb, err := Precompute(ctx, o.Embedder, ds.Queries)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &Prepared{Name: name, Catalog: cat, Queries: ds.Queries, Embedder: emb}, nil
}

// Recall5 is the mean recall@5 of the queries searched for five tools
// with opts.
func (p *Prepared) Recall5(ctx context.Context, opts toolcatalog.Options) (float64, error) {
	opts.TopK = 5
	var sum float64
	for _, q := range p.Queries {
		resp, err := p.Catalog.Search(ctx, q.Query, opts)
		if err != nil {
			return 0, err
		}
		ranked := make([]string, len(resp.Results))
		for i, r := range resp.Results {
			ranked[i] = r.Tool.Name
		}
		recall, _, _ := Score(ranked, q.Gold)
		sum += recall[5]
	}
	return sum / float64(len(p.Queries)), nil
}

// Cross is a cross-set run: every setting's recall@5 on every set, and
// for each set the setting chosen on the others.
type Cross struct {
	Sets     []string
	Settings []Setting
	// Recall is recall@5 by setting, then set; BM25 and Semantic the
	// arms' by set, with the default's intents.
	Recall         [][]float64
	BM25, Semantic []float64
	// Chosen is, by set, the index of the setting with the best mean
	// recall@5 over the other sets; Tuned the best on the set itself,
	// which is what reporting a constant where it was chosen shows.
	Chosen, Tuned []int
	// Default is DefaultSetting's index.
	Default int
}

// RunCross searches every set with every setting of grid.
func RunCross(ctx context.Context, sets []*Prepared, grid []Setting) (*Cross, error) {
	c := &Cross{Settings: grid, Default: slices.Index(grid, DefaultSetting)}
	if c.Default < 0 {
		return nil, fmt.Errorf("the grid lacks the default setting %s", DefaultSetting)
	}
	for _, p := range sets {
		c.Sets = append(c.Sets, p.Name)
		for _, arm := range []struct {
			method toolcatalog.Method
			out    *[]float64
		}{{toolcatalog.BM25, &c.BM25}, {toolcatalog.Semantic, &c.Semantic}} {
			r, err := p.Recall5(ctx, toolcatalog.Options{Method: arm.method, Embedder: p.Embedder, Intents: DefaultSetting.Intents})
			if err != nil {
				return nil, err
			}
			*arm.out = append(*arm.out, r)
		}
	}
	c.Recall = make([][]float64, len(grid))
	for i, s := range grid {
		for _, p := range sets {
			r, err := p.Recall5(ctx, s.Options(p.Embedder))
			if err != nil {
				return nil, err
			}
			c.Recall[i] = append(c.Recall[i], r)
		}
	}
	c.choose()
	return c, nil
}

// choose sets Chosen and Tuned from Recall.
func (c *Cross) choose() {
	c.Chosen, c.Tuned = nil, nil
	for held := range c.Sets {
		c.Chosen = append(c.Chosen, c.best(func(set int) bool { return set != held }))
		c.Tuned = append(c.Tuned, c.best(func(set int) bool { return set == held }))
	}
}

// best is the setting of the best mean recall@5 over the sets use
// admits; the earliest in the grid of equals.
func (c *Cross) best(use func(set int) bool) int {
	best, bestMean := 0, -1.0
	for i, row := range c.Recall {
		var sum float64
		var n int
		for set, r := range row {
			if use(set) {
				sum += r
				n++
			}
		}
		if mean := sum / float64(max(n, 1)); mean > bestMean+1e-12 {
			best, bestMean = i, mean
		}
	}
	return best
}

// WriteGrid prints every setting's recall@5 on every set, one line each,
// tab-separated: to choose constants over several runs (as the candidate
// model's term weight, whose every value needs catalogs of its own).
func (c *Cross) WriteGrid(w io.Writer) error {
	if _, err := fmt.Fprintf(w, "setting\t%s\n", strings.Join(c.Sets, "\t")); err != nil {
		return err
	}
	for i, s := range c.Settings {
		row := []string{s.String()}
		for _, r := range c.Recall[i] {
			row = append(row, fmt.Sprintf("%.4f", r))
		}
		if _, err := fmt.Fprintln(w, strings.Join(row, "\t")); err != nil {
			return err
		}
	}
	return nil
}

// Write prints the run: per set, the arms, the default, the setting chosen
// on the other sets and its recall@5 there, and the setting tuned on the
// set itself.
func (c *Cross) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "recall@5, builtin model; default hybrid: %s; chosen: best mean over the other sets of %d settings\n", DefaultSetting, len(c.Settings))
	whole := DefaultSetting
	whole.Intents = toolcatalog.IntentsOff
	off := slices.Index(c.Settings, whole)
	intentsOff := func(set int) string {
		if off < 0 {
			return "-"
		}
		return fmt.Sprintf("%.3f", c.Recall[off][set])
	}
	fmt.Fprintln(tw, "set\tbm25\tsemantic\tdefault\tdefault, intents off\tchosen on the others\tits recall@5 here\ttuned here (not a result)\t")
	for set, name := range c.Sets {
		chosen, tuned := c.Chosen[set], c.Tuned[set]
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.3f\t%s\t%s\t%.3f\t%.3f (%s)\t\n", name, c.BM25[set], c.Semantic[set], c.Recall[c.Default][set], intentsOff(set),
			c.Settings[chosen], c.Recall[chosen][set], c.Recall[tuned][set], c.Settings[tuned])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Intents used only when at least two each name tool words.
	fmt.Fprintf(w, "\nthe default blend, intents used only when two each reach a lexical evidence of (0: always):\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "set\tintents off\t≥%.1f (default)", DefaultSetting.MinIntentEvidence)
	for _, th := range IntentThresholds {
		fmt.Fprintf(tw, "\t≥%.1f", th)
	}
	fmt.Fprintln(tw, "\t")
	for set, name := range c.Sets {
		fmt.Fprintf(tw, "%s\t%s\t%.3f", name, intentsOff(set), c.Recall[c.Default][set])
		for _, th := range IntentThresholds {
			s := DefaultSetting
			s.MinIntentEvidence = th
			if i := slices.Index(c.Settings, s); i >= 0 {
				fmt.Fprintf(tw, "\t%.3f", c.Recall[i][set])
			} else {
				fmt.Fprint(tw, "\t-")
			}
		}
		fmt.Fprintln(tw, "\t")
	}
	return tw.Flush()
}

// Precompute embeds the queries and their intents in one batch, and
// answers for them (and only them) as the embedder would: an evaluation
// of many settings pays for each embedding once.
func Precompute(ctx context.Context, emb embedding.Embedder, queries []Query) (toolcatalog.QueryEmbedder, error) {
	var texts []string
	for _, q := range queries {
		texts = append(texts, q.Query)
		texts = append(texts, text.Intents(q.Query)...)
	}
	vecs, err := emb.Embed(ctx, texts)
	if err != nil {
		return nil, err
	}
	p := precomputed{model: emb.Model(), vectors: make(map[string][]float32, len(texts))}
	for i, t := range texts {
		p.vectors[t] = vecs[i]
	}
	return p, nil
}

// precomputed answers a known set of texts.
type precomputed struct {
	model   string
	vectors map[string][]float32
}

func (p precomputed) Model() string { return p.model }

func (p precomputed) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v, ok := p.vectors[t]
		if !ok {
			return nil, fmt.Errorf("query %q was not embedded beforehand", t)
		}
		out[i] = v
	}
	return out, nil
}
