package index

import (
	"cmp"

	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/toolcatalog/tool-catalog-operator/pkg/clip"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/internal/linalg"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/text"
)

// Method is a search method.
type Method string

// Search methods.
const (
	Semantic Method = "semantic"
	BM25     Method = "bm25"
	// Hybrid blends the two arms' scores (see Options.SemanticWeight).
	Hybrid Method = "hybrid"
	// RRF fuses the two arms' rankings by reciprocal rank fusion.
	RRF Method = "rrf"
)

// Methods lists the search methods.
var Methods = []Method{BM25, Semantic, Hybrid, RRF}

// QueryEmbedder embeds search queries. It must be the catalog's own model:
// vectors of different models are never compared.
type QueryEmbedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	Model() string
}

// Options tune one search; zero values take the catalog's published
// defaults.
type Options struct {
	// Method is semantic, bm25, hybrid or rrf.
	Method Method
	// TopK is how many tools to return, always-included ones counted.
	TopK int
	// Threshold drops semantic matches with a lower cosine similarity.
	Threshold *float64
	// AlwaysInclude adds tool names to the catalog's always-included ones.
	AlwaysInclude []string
	// MostUsed names most used tools to include after the always-included
	// ones (see Follower.MostUsed); their results' Why is "popular".
	MostUsed []string
	// Principal and Groups, when set, hide tools the principal may not
	// use (see IsAllowed).
	Principal string
	Groups    []string
	// Embedder embeds the query for semantic and hybrid search; without
	// one (or when it fails) the search falls back to BM25.
	Embedder QueryEmbedder
	// SemanticWeight is hybrid search's share of the cosine in the blend
	// (0 to 1); the normalised BM25 score has the rest. For a query whose
	// lexical evidence exceeds 3 the share shrinks in proportion: a query
	// naming many distinctive tool words is trusted more to BM25.
	SemanticWeight *float64
	// MinLexicalEvidence is the lexical evidence (see
	// Response.LexicalEvidence) below which hybrid search ranks by the
	// cosine alone.
	MinLexicalEvidence *float64
	// K1 and B are the BM25 parameters; RRFK is the reciprocal rank
	// fusion constant of the rrf method.
	K1, B float64
	RRFK  int
	// hide is tools a search leaves out, as if the principal could not
	// use them (the bridge's core tools, which the model already has).
	hide map[string]bool
	// Intents is IntentsOn to search each intent of a request that asks
	// for several things (see text.Intents) or IntentsOff to search the
	// request as one; empty takes the catalog's setting, on by default.
	Intents string
	// MinIntentEvidence is the lexical evidence at least two intents of
	// a request must each have for their rankings to place tools: a
	// request whose sentences do not each name tool words asks for one
	// thing in several sentences, and is ranked whole. 0 uses every
	// request's intents; nil is DefaultMinIntentEvidence.
	MinIntentEvidence *float64
}

// DefaultMinIntentEvidence is Options.MinIntentEvidence's default, chosen
// across sets, each reported with the value chosen on the others
// (docs/search.md, "How a constant is chosen").
const DefaultMinIntentEvidence = 2.0

// Intents settings.
const (
	IntentsOn  = "on"
	IntentsOff = "off"
)

// Arm is one ranking's view of a tool.
type Arm struct {
	Score float64
	Rank  int // 1-based
}

// MaxQueryBytes bounds a query: Search reads no further (a request of a
// few sentences is a few hundred bytes).
const MaxQueryBytes = 2048

// Why a tool is in the results.
const (
	WhyExactName     = "exact-name"
	WhyAlwaysInclude = "always-include"
	WhyPopular       = "popular"
	WhyIntent        = "intent"
	WhyRanked        = "ranked"
)

// Result is one returned tool with the scores that placed it.
type Result struct {
	Tool contract.Tool
	// Why is exact-name, always-include, popular, intent (the best
	// tool of one intent of several; see Intent) or ranked (by the whole
	// request).
	Why string
	// Intent is the intent whose ranking placed the tool, when Why is
	// intent; its arms are that ranking's.
	Intent string
	// Score is the ranking score of the effective method (cosine, BM25
	// or fused), 0 when the tool is not ranked by it.
	Score float64
	// Semantic and BM25 are the arms' scores and ranks, nil when the arm
	// did not rank the tool.
	Semantic *Arm
	BM25     *Arm
}

// Response is a search's outcome.
type Response struct {
	Results []Result
	// Method is the method actually used.
	Method Method
	// Fallback says why semantic ranking was not used, when it was asked
	// for but could not be.
	Fallback string
	// Blend is how hybrid search ranked the whole request.
	Blend
	// Intents are the request's intents when it asked for several things,
	// each with how it was ranked; nil for a one-intent request.
	Intents []Intent
}

// Blend is how hybrid search ranked one text.
type Blend struct {
	// LexicalEvidence is the text's best BM25 score over the catalog's
	// largest possible idf: about the number of distinctive tool words the
	// text holds. It is comparable across catalogs of any size.
	LexicalEvidence float64
	// SemanticOnly says hybrid search ranked by the cosine alone, because
	// LexicalEvidence was under MinLexicalEvidence.
	SemanticOnly bool
	// SemanticWeight is the cosine's share in this text's blend (the
	// setting, lowered for strong lexical evidence); MinLexicalEvidence the
	// threshold of the semantic-only rule.
	SemanticWeight, MinLexicalEvidence float64
}

// Intent is one of several things a request asks for, searched on its own.
type Intent struct {
	// Text is the intent as the request words it.
	Text string
	Blend
}

// Search ranks the catalog's tools for a query. An exact tool name ranks
// first; always-included tools come next, then popular ones, then the
// ranking, up to TopK tools in all. A request that asks for several things
// (see text.Intents) is searched whole and for each intent: each intent's
// best tools come before the whole request's ranking, an equal share of
// the places left for each (see intentPicks). Always-included tools are returned even when
// they alone exceed TopK. Ties are broken by name, so equal scores order
// the same way every time. Only the first MaxQueryBytes of query are read.
func (c *Catalog) Search(ctx context.Context, query string, opts Options) (*Response, error) {
	// A request is a sentence or a paragraph; whatever follows is cut
	// before it is tokenized or embedded, so its size bounds the work.
	query = clip.Cut(query, MaxQueryBytes)
	opts = c.withDefaults(opts)
	if !slices.Contains(Methods, opts.Method) {
		return nil, fmt.Errorf("unknown search method %q: use semantic, bm25, hybrid or rrf", opts.Method)
	}
	if opts.Intents != IntentsOn && opts.Intents != IntentsOff {
		return nil, fmt.Errorf("unknown intents setting %q: use on or off", opts.Intents)
	}
	allowed := c.visibleTo(opts.Principal, opts.Groups)
	if hide := opts.hide; len(hide) > 0 {
		visible := allowed
		allowed = func(name string) bool { return !hide[name] && visible(name) }
	}

	resp := &Response{Method: opts.Method}
	texts := []string{query}
	if opts.Intents == IntentsOn {
		for _, in := range text.Intents(query) {
			texts = append(texts, in)
			resp.Intents = append(resp.Intents, Intent{Text: in})
		}
	}
	var units [][]float32
	var lexicals func(i int) []ranked
	if opts.Method != BM25 {
		if len(c.vecNames) >= concurrentArms {
			// The BM25 rankings need no vector: a large catalog makes
			// them on another core while the query is embedded.
			lexicals = c.bm25Rankings(texts, opts, allowed)
		}
		var reason string
		units, reason = c.embedQueries(ctx, texts, opts)
		if reason != "" {
			resp.Method, resp.Fallback = BM25, reason
		}
	}
	rankings := make([]searched, len(texts))
	for i, t := range texts {
		var unit []float32
		if units != nil {
			unit = units[i]
		}
		blend := &resp.Blend
		if i > 0 {
			blend = &resp.Intents[i-1].Blend
		}
		var made func() []ranked
		if lexicals != nil {
			made = func() []ranked { return lexicals(i) }
		}
		order, semantic, lexical := c.rank(t, unit, opts, allowed, resp.Method, blend, nil, made)
		rankings[i] = searched{order: order, semantic: armsOf(semantic.top), bm25: armsOf(lexical), final: armsOf(order), evidence: blend.LexicalEvidence}
	}

	seen := map[string]bool{}
	add := func(name, why string, by int) {
		t, ok := c.Tool(name)
		if !ok || seen[name] || !allowed(name) {
			return
		}
		seen[name] = true
		r := Result{Tool: t, Why: why, Semantic: rankings[by].semantic[name], BM25: rankings[by].bm25[name]}
		if by > 0 {
			r.Intent = texts[by]
		}
		if a := rankings[by].final[name]; a != nil {
			r.Score = a.Score
		}
		resp.Results = append(resp.Results, r)
	}
	q := strings.TrimSpace(query)
	for _, i := range c.byRunes[utf8.RuneCountInString(q)] {
		if t := c.Document.Tools[i]; strings.EqualFold(t.Name, q) {
			add(t.Name, WhyExactName, 0)
		}
	}
	for _, n := range c.always {
		add(n, WhyAlwaysInclude, 0)
	}
	for _, n := range opts.AlwaysInclude {
		add(n, WhyAlwaysInclude, 0)
	}
	for _, n := range opts.MostUsed {
		if len(resp.Results) >= opts.TopK {
			break
		}
		add(n, WhyPopular, 0)
	}
	if len(rankings) > 1 && *opts.MinIntentEvidence > 0 && !confidentIntents(rankings[1:], *opts.MinIntentEvidence) {
		// One thing asked in several sentences: ranked whole.
		rankings, resp.Intents = rankings[:1], nil
	}
	if len(rankings) > 1 {
		free := opts.TopK - len(resp.Results)
		for _, p := range intentPicks(rankings, free, func(n string) bool { return !seen[n] && allowed(n) }) {
			add(p.name, WhyIntent, p.by)
		}
	}
	for _, r := range rankings[0].order {
		if len(resp.Results) >= opts.TopK {
			break
		}
		add(r.name, WhyRanked, 0)
	}
	return resp, nil
}

// confidentIntents reports whether at least two intents each name tool
// words, a lexical evidence of at least min.
func confidentIntents(intents []searched, min float64) bool {
	n := 0
	for _, r := range intents {
		if r.evidence >= min {
			n++
		}
	}
	return n >= 2
}

// intentPick is a tool an intent placed: by is its ranking's index.
type intentPick struct {
	name string
	by   int
}

// intentPicks gives each intent (rankings[1:]) its share of the free
// places, rounded up: in turns, each intent's best tool not yet picked
// and still open, ranked in the request's context (see inContext).
// Within a turn the whole request's ranking (rankings[0]) orders the
// picks, so an intent whose best tool the request as a whole ranks high
// comes first, and a sentence that only sets the scene ("I am planning a
// trip.") comes after those that ask.
func intentPicks(rankings []searched, free int, open func(name string) bool) []intentPick {
	intents, whole := rankings[1:], rankings[0].final
	share := max(1, (free+len(intents)-1)/len(intents))
	orders := make([][]ranked, len(intents))
	for i, r := range intents {
		orders[i] = inContext(r, rankings[0])
	}
	next := make([]int, len(intents))
	taken := map[string]bool{}
	var out []intentPick
	for turn := 0; turn < share && len(out) < free; turn++ {
		type pick struct {
			intentPick
			at int // the rank the whole request gives it
		}
		var picks []pick
		for i, order := range orders {
			for ; next[i] < len(order); next[i]++ {
				n := order[next[i]].name
				if taken[n] || !open(n) {
					continue
				}
				at := math.MaxInt
				if a := whole[n]; a != nil {
					at = a.Rank
				}
				picks = append(picks, pick{intentPick{n, i + 1}, at})
				taken[n] = true
				next[i]++
				break
			}
		}
		// Stable: picks the whole request did not rank keep intent order.
		sort.SliceStable(picks, func(a, b int) bool { return picks[a].at < picks[b].at })
		for _, p := range picks[:min(len(picks), free-len(out))] {
			out = append(out, p.intentPick)
		}
	}
	return out
}

// searched is one text's ranking, with each arm's view of its tools.
type searched struct {
	order                 []ranked
	semantic, bm25, final map[string]*Arm
	evidence              float64 // the text's lexical evidence
}

// inContext orders an intent's tools by their score for the intent plus
// their score for the whole request, each scaled as the blend scales an
// arm (see scaler), so alike for every method. An intent that names few
// telling words leans on the request for what it leaves out ("Can you
// provide me with that information?", "Also, book a hotel there"): the
// request's share falls from contextWeight at no lexical evidence to none
// at strongLexicalEvidence, where an intent says what it wants.
func inContext(intent, request searched) []ranked {
	w := contextWeight * max(0, 1-intent.evidence/strongLexicalEvidence)
	own, whole := scaler(intent.order), scaler(request.order)
	out := make([]ranked, len(intent.order))
	for i, r := range intent.order {
		out[i] = ranked{name: r.name, score: own(r.score)}
		if a := request.final[r.name]; a != nil {
			out[i].score += w * whole(a.Score)
		}
	}
	sortRanked(out)
	return out
}

// contextWeight is the whole request's largest share in an intent's
// ranking.
const contextWeight = 0.5

func (c *Catalog) withDefaults(o Options) Options {
	d := c.Document.Search
	if o.Method == "" {
		o.Method = Method(d.Method)
		if o.Method == "" {
			o.Method = Hybrid
		}
	}
	if o.TopK <= 0 {
		o.TopK = d.TopK
		if o.TopK <= 0 {
			o.TopK = 5
		}
	}
	if o.Threshold == nil {
		o.Threshold = d.SimilarityThreshold
	}
	if o.SemanticWeight == nil {
		o.SemanticWeight = d.SemanticWeight
		if o.SemanticWeight == nil {
			o.SemanticWeight = ptr(DefaultSemanticWeight)
		}
	}
	if o.MinLexicalEvidence == nil {
		o.MinLexicalEvidence = d.MinLexicalEvidence
		if o.MinLexicalEvidence == nil {
			o.MinLexicalEvidence = ptr(DefaultMinLexicalEvidence)
		}
	}
	if o.K1 == 0 {
		o.K1 = DefaultK1
	}
	if o.B == 0 {
		o.B = DefaultB
	}
	if o.RRFK <= 0 {
		o.RRFK = DefaultRRFK
	}
	if o.Intents == "" {
		o.Intents = d.Intents
		if o.Intents == "" {
			o.Intents = IntentsOn
		}
	}
	if o.MinIntentEvidence == nil {
		o.MinIntentEvidence = ptr(DefaultMinIntentEvidence)
	}
	return o
}

// ranked is a tool's place in one ranking.
type ranked struct {
	name  string
	score float64
	// key orders equal scores as their names do, when set: a full scan's
	// row or tool index in a catalog whose tools are in name order (see
	// Catalog.nameKeys), so ties cost no string comparison. A ranking's
	// entries all have a key, or none.
	key int32
}

// better orders by score, then key, then name, so equal scores always
// order alike.
func better(a, b ranked) bool { return compareRanked(a, b) < 0 }

// compareRanked orders the better of a and b first: by score, then key,
// then name.
func compareRanked(a, b ranked) int {
	if a.score != b.score {
		if a.score > b.score {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(a.key, b.key); c != 0 {
		return c
	}
	return strings.Compare(a.name, b.name)
}

// sortRanked orders a ranking best first.
func sortRanked(r []ranked) { slices.SortFunc(r, compareRanked) }

// depth is how many tools each arm ranks: enough for any topK and for
// reciprocal rank fusion, whose contributions beyond it are negligible
// (under 1/(k+depth) each), without sorting every tool of a large catalog.
func depth(topK int) int { return max(100, 10*topK) }

// selection keeps the best d entries offered, by heap selection.
type selection struct {
	h rankHeap
	d int
}

func newSelection(d int) *selection { return &selection{h: make(rankHeap, 0, d), d: d} }

// wants reports whether r would be kept, so a caller can skip the work of
// offering it.
func (t *selection) wants(r ranked) bool { return len(t.h) < t.d || better(r, t.h[0]) }

// below reports whether any entry of this score would be turned away: a
// scan of every tool asks it first, before it reads the tool's name.
func (t *selection) below(score float64) bool { return len(t.h) == t.d && score < t.h[0].score }

// offer keeps r if it is among the best d offered so far.
func (t *selection) offer(r ranked) {
	switch {
	case len(t.h) < t.d:
		t.h = append(t.h, r)
		t.h.up(len(t.h) - 1)
	case better(r, t.h[0]):
		t.h[0] = r
		t.h.down(0)
	}
}

// sorted is what was kept, best first.
func (t *selection) sorted() []ranked {
	out := []ranked(t.h)
	sortRanked(out)
	return out
}

// rankHeap is a min-heap: the worst kept entry on top. Its up and down
// are container/heap's, typed: no entry is boxed to be pushed, and no
// comparison goes through an interface.
type rankHeap []ranked

// worse reports whether h[i] ranks below h[j].
func (h rankHeap) worse(i, j int) bool { return better(h[j], h[i]) }

// up moves h[i] towards the top while it is worse than its parent.
func (h rankHeap) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.worse(i, parent) {
			return
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

// down moves h[i] towards the leaves while a child is worse than it.
func (h rankHeap) down(i int) {
	for {
		child := 2*i + 1
		if child >= len(h) {
			return
		}
		if right := child + 1; right < len(h) && h.worse(right, child) {
			child = right
		}
		if !h.worse(child, i) {
			return
		}
		h[i], h[child] = h[child], h[i]
		i = child
	}
}

// rank orders the tools for a query by method, with the query's unit
// vector (nil for BM25). It fills resp's lexical evidence and hybrid
// settings and returns the order with each arm's ranking. own, when set,
// replaces one tool's cosine (see grader.grade); made, when set, gives the
// query's BM25 ranking, made beforehand.
func (c *Catalog) rank(query string, unit []float32, opts Options, allowed func(string) bool, method Method, resp *Blend, own *ownScore, made func() []ranked) (order []ranked, semantic semanticScores, lexical []ranked) {
	resp.SemanticWeight, resp.MinLexicalEvidence = *opts.SemanticWeight, *opts.MinLexicalEvidence
	// BM25 is cheap: rank it always, so every result shows both arms. In
	// a large catalog it is ranked beside the semantic arm, whose scan of
	// the vectors leaves a core free once its blocks are scored.
	if made == nil && method != BM25 && len(c.vecNames) >= concurrentArms {
		lexicals := c.bm25Rankings([]string{query}, opts, allowed)
		made = func() []ranked { return lexicals(0) }
	}
	if method != BM25 {
		semantic = c.semanticRanking(unit, opts, allowed, own)
	}
	if made != nil {
		lexical = made()
	} else {
		lexical = c.bm25Ranking(query, opts, allowed)
	}
	if len(lexical) > 0 && c.index.maxIDF > 0 {
		resp.LexicalEvidence = lexical[0].score / c.index.maxIDF
	}
	switch method {
	case Semantic:
		return semantic.top, semantic, lexical
	case RRF:
		return fuse(opts.RRFK, semantic.top, lexical), semantic, lexical
	case Hybrid:
		if resp.LexicalEvidence < resp.MinLexicalEvidence {
			resp.SemanticOnly = true
			return semantic.top, semantic, lexical
		}
		// A query holding many distinctive tool words is trusted more to
		// BM25: past strongLexicalEvidence the cosine's share shrinks in
		// proportion.
		if resp.LexicalEvidence > strongLexicalEvidence {
			resp.SemanticWeight *= strongLexicalEvidence / resp.LexicalEvidence
		}
		// A cosine arm that barely tells its first tool from its
		// marginRank-th is trusted less: below confidentMargin its share
		// shrinks in proportion.
		if m, ok := semanticMargin(semantic.top); ok && m < confidentMargin {
			resp.SemanticWeight *= m / confidentMargin
		}
		return c.blend(resp.SemanticWeight, semantic, lexical), semantic, lexical
	}
	return lexical, semantic, lexical
}

// confidentMargin is the lead of the semantic arm's first cosine over
// its marginRank-th below which hybrid search lowers the cosine's share
// in proportion: many tools about as near as the best (a catalog of
// look-alike tools, a request the encoder cannot place) leave the order
// to BM25. Chosen with each shared set left out (docs/search.md).
const confidentMargin = 0.06

// marginRank is the rank whose cosine confidentMargin is measured from.
const marginRank = 10

// semanticMargin is the semantic arm's first cosine less its
// marginRank-th, at least 0; false when it ranked fewer tools.
func semanticMargin(top []ranked) (float64, bool) {
	at, ok := marginCosine(top)
	if !ok {
		return 0, false
	}
	return max(top[0].score-at, 0), true
}

// marginCosine is the semantic arm's marginRank-th cosine, the one its
// margin is measured from; false when it ranked fewer tools.
func marginCosine(top []ranked) (float64, bool) {
	if len(top) < marginRank {
		return 0, false
	}
	return top[marginRank-1].score, true
}

// concurrentArms is the number of vectors from which a search ranks its
// two arms concurrently: below, a goroutine costs about what it saves. A
// variable for tests.
var concurrentArms = 4096

// ownScore is one tool's cosine to use instead of the catalog's, for a
// query whose cosines with every tool were computed beforehand (cosines,
// by vector row; nil when they were not).
type ownScore struct {
	// row is the tool's vector row; -1 for a query of no tool (an
	// intent), whose cosines alone were computed beforehand.
	row     int
	cosine  float32
	cosines []float32
	// kept, when set, are the only rows that may rank among the arm's
	// best, with their exact cosines (see keptRanking); cosines is then
	// room for every row's, written before it is read.
	kept     []keptRow
	complete bool
}

// semanticScores are the semantic arm of one search.
type semanticScores struct {
	// top is the best-scoring allowed tools, best first.
	top []ranked
	// cosine holds every tool's cosine by vector row (see Catalog.rowOf):
	// exact for the rows in top; when approximate, int8 scores for rows
	// rescore left alone, which exactCosines replaces.
	cosine      []float32
	approximate bool
	unit        []float32
	// ownRow is the row whose cosine a grading gave (ownScore), which
	// exactCosines leaves as it is; -1 when none.
	ownRow int
	// kept, for a grading, is the arm's best keptSlack more than top,
	// best first; complete says it holds every row the arm may rank.
	kept     []ranked
	complete bool
}

// embedQueries embeds the texts with the catalog's model in one call and
// returns them at unit length, or a reason why it cannot.
func (c *Catalog) embedQueries(ctx context.Context, texts []string, opts Options) ([][]float32, string) {
	switch {
	case opts.Embedder == nil:
		return nil, "no query embedder configured"
	case opts.Embedder.Model() != c.Document.Embedding.Model:
		return nil, fmt.Sprintf("the query embedder's model %s is not the catalog's model %s", opts.Embedder.Model(), c.Document.Embedding.Model)
	case strings.TrimSpace(texts[0]) == "":
		return nil, "empty query"
	}
	vecs, err := opts.Embedder.Embed(ctx, texts)
	if err != nil {
		return nil, fmt.Sprintf("embedding the query failed: %v", err)
	}
	if len(vecs) != len(texts) {
		return nil, fmt.Sprintf("the query embedder returned %d vectors for %d texts", len(vecs), len(texts))
	}
	units := make([][]float32, len(vecs))
	for i, v := range vecs {
		var reason string
		if units[i], reason = c.unitQuery(v); reason != "" {
			return nil, reason
		}
	}
	return units, ""
}

// unitTolerance is how far from 1 a vector's norm may be for the vector
// to count as unit length: float32 rounding of a normalised vector.
const unitTolerance = 1e-6

// unitQuery checks a query vector against the catalog and scales it to
// unit length.
func (c *Catalog) unitQuery(q []float32) ([]float32, string) {
	if len(q) != c.dims {
		return nil, fmt.Sprintf("the query vector has %d dimensions, the catalog's %d", len(q), c.dims)
	}
	qn := norm(q)
	if qn == 0 {
		return nil, "the query embeds to a zero vector"
	}
	if math.Abs(qn-1) <= unitTolerance {
		// Already unit length, as providers return their vectors: used
		// as it is (read, never written), not copied, which a grading
		// of many tools' queries would hold once more.
		return q, ""
	}
	unit := make([]float32, len(q))
	for i, x := range q {
		unit[i] = float32(float64(x) / qn)
	}
	return unit, ""
}

// semanticRanking ranks tools by cosine similarity of the query and their
// centroids.
func (c *Catalog) semanticRanking(unit []float32, opts Options, allowed func(string) bool, own *ownScore) semanticScores {
	var scores []float32
	var candidates []int // nil: every row
	approximate := false
	switch {
	case own != nil && own.kept != nil:
		// A grading's kept ranking: no other row may rank (see
		// keptRanking); the other cosines are left to exactCosines.
		scores, approximate = own.cosines, true
		candidates = make([]int, len(own.kept))
		for i, k := range own.kept {
			scores[k.row], candidates[i] = k.score, int(k.row)
		}
	case own != nil && own.cosines != nil:
		scores = own.cosines
	case c.int8Only:
		// The int8 rows are all it holds: their scores are its cosines.
		scores = make([]float32, len(c.vecNames))
		if c.quant != nil {
			c.quant.Dots(scores, unit, linalg.Best)
		}
	case c.quant != nil:
		// The int8 rows first, then the rows they may misplace exactly.
		scores, approximate = make([]float32, len(c.vecNames)), true
		c.quant.Dots(scores, unit, linalg.Best)
	default:
		// One matrix-vector product scores every tool.
		scores = make([]float32, len(c.vecNames))
		linalg.DotsParallel(scores, c.matrix, unit, linalg.Best)
	}
	ownRow := -1
	if own != nil && own.row >= 0 {
		scores[own.row], ownRow = own.cosine, own.row
	}
	d := depth(opts.TopK)
	if approximate && candidates == nil {
		candidates = c.rescore(scores, unit, d, opts.Threshold, allowed, ownRow)
	}
	// A grading keeps keptSlack more than it ranks of a tool's query,
	// for the next.
	keep := d
	if ownRow >= 0 {
		keep += keptSlack
	}
	// The best depth tools by heap selection as the scores are read:
	// O(n log d), with no list of every tool.
	top := newSelection(keep)
	consider := func(row int) {
		s := float64(scores[row])
		if opts.Threshold != nil && s < *opts.Threshold || top.below(s) {
			return
		}
		name := c.vecNames[row]
		if r := (ranked{name, s, c.nameKey(row)}); top.wants(r) && allowed(name) {
			top.offer(r)
		}
	}
	if candidates != nil {
		for _, row := range candidates {
			consider(row)
		}
	} else {
		for row := range c.vecNames {
			consider(row)
		}
	}
	best := top.sorted()
	out := semanticScores{top: slices.Clip(best[:min(d, len(best))]), cosine: scores, approximate: approximate, unit: unit, ownRow: ownRow}
	if ownRow >= 0 {
		out.kept, out.complete = best, len(best) < keep && (own.kept == nil || own.complete)
	}
	return out
}

// rescore replaces the int8 scores of every row that may rank among the
// best d allowed rows with its exact cosine, the bits a scan of the float
// rows gives it; ownRow's score is exact already. Each int8 score is
// within its row's bound of the exact one, so the d rows of the highest
// lower bounds score at least the d-th of those, t, exactly, and a row
// whose upper bound is under t ranks below them all: only rows reaching t
// are scored again, typically a few times d. It returns those rows, the
// only ones that may rank among the best d, or nil when it scored every
// row exactly.
func (c *Catalog) rescore(scores, unit []float32, d int, threshold *float64, allowed func(string) bool, ownRow int) []int {
	bound := func(row int) float32 {
		if row == ownRow {
			return 0
		}
		return c.quant.Err(row)
	}
	lower := newSelection(d)
	for row := range c.vecNames {
		lo := float64(scores[row] - bound(row))
		if threshold != nil && lo < *threshold {
			continue // it may not pass the threshold: not one of the d
		}
		if lower.below(lo) {
			continue
		}
		name := c.vecNames[row]
		if r := (ranked{name, lo, c.nameKey(row)}); lower.wants(r) && allowed(name) {
			lower.offer(r)
		}
	}
	if len(lower.h) < d {
		// Fewer than d rows surely count: score every row exactly.
		own := float32(0)
		if ownRow >= 0 {
			own = scores[ownRow]
		}
		linalg.DotsParallel(scores, c.matrix, unit, linalg.Best)
		if ownRow >= 0 {
			scores[ownRow] = own
		}
		return nil
	}
	t := lower.h[0].score
	candidates, rows := []int{}, []int{}
	for row := range c.vecNames {
		if float64(scores[row]+bound(row)) >= t {
			candidates = append(candidates, row)
			if row != ownRow {
				rows = append(rows, row)
			}
		}
	}
	exact := make([]float32, len(rows))
	linalg.DotsRows(exact, c.matrix, rows, unit, linalg.Best)
	for i, row := range rows {
		scores[row] = exact[i]
	}
	return candidates
}

// exactCosines makes the cosines of rows exact, where they are not.
func (c *Catalog) exactCosines(s semanticScores, rows []int) {
	if !s.approximate || len(rows) == 0 {
		return
	}
	if i := slices.Index(rows, s.ownRow); i >= 0 {
		rows = slices.Delete(slices.Clone(rows), i, i+1)
	}
	exact := make([]float32, len(rows))
	c.dotsRows(exact, rows, s.unit)
	for i, row := range rows {
		s.cosine[row] = exact[i]
	}
}

// bm25Rankings starts ranking each text by BM25 on a goroutine of its
// own and returns the rankings, by text, as each is done.
func (c *Catalog) bm25Rankings(texts []string, opts Options, allowed func(string) bool) func(i int) []ranked {
	out := make([][]ranked, len(texts))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i, t := range texts {
			out[i] = c.bm25Ranking(t, opts, allowed)
		}
	}()
	return func(i int) []ranked {
		<-done
		return out[i]
	}
}

func (c *Catalog) bm25Ranking(query string, opts Options, allowed func(string) bool) []ranked {
	scores, matched := c.index.scores(query, opts.K1, opts.B)
	defer c.index.release(scores, matched)
	top := newSelection(depth(opts.TopK))
	for _, doc := range matched {
		// A tool's name is read only when its score may place it (or,
		// without keys, its name break a tie): reading every matched
		// tool's from the document costs a cache miss each.
		r := ranked{score: scores[doc], key: c.nameKey(doc)}
		if r.key == 0 {
			r.name = c.Document.Tools[doc].Name
		}
		if top.wants(r) {
			r.name = c.Document.Tools[doc].Name
			if allowed(r.name) {
				top.offer(r)
			}
		}
	}
	return top.sorted()
}

// blend ranks the tools either arm placed by a convex blend of their
// scores, w·cosine' + (1-w)·bm25', each arm's score scaled between the
// one at rank scaleDepth (0) and the best (1). Scaled, w is the cosine's
// share whatever the model: one model's cosines spread over a tenth,
// another's over a third. The cosine is counted from the one at rank
// scaleDepth (or the lowest), so tools far down the semantic ranking add
// nothing rather than subtract.
func (c *Catalog) blend(w float64, semantic semanticScores, lexical []ranked) []ranked {
	lex := between(lexicalScale(lexical))
	cos := between(cosineScale(semantic.top))
	// A tool is known by its index in the document, and looked up in the
	// other arm by binary search: no map of names is made per search.
	type lexScore struct {
		tool  int
		score float64
	}
	bm25 := make([]lexScore, len(lexical))
	rows := make([]int, 0, len(lexical))
	for i, r := range lexical {
		t := c.tools[r.name]
		bm25[i] = lexScore{t, r.score}
		if row := c.rowOf[t]; row >= 0 {
			rows = append(rows, row)
		}
	}
	c.exactCosines(semantic, rows)
	slices.SortFunc(bm25, func(a, b lexScore) int { return cmp.Compare(a.tool, b.tool) })
	placed := make([]int, 0, len(semantic.top)) // the tools the cosine placed
	out := make([]ranked, 0, len(lexical)+len(semantic.top))
	add := func(name string, t int) {
		var s float64
		if row := c.rowOf[t]; row >= 0 {
			s = w * cos(float64(semantic.cosine[row]))
		}
		if i, ok := slices.BinarySearchFunc(bm25, t, func(e lexScore, t int) int { return cmp.Compare(e.tool, t) }); ok {
			s += (1 - w) * lex(bm25[i].score)
		}
		out = append(out, ranked{name: name, score: s})
	}
	for _, r := range semantic.top {
		t := c.tools[r.name]
		placed = append(placed, t)
		add(r.name, t)
	}
	slices.Sort(placed)
	for _, r := range lexical {
		t := c.tools[r.name]
		if _, ok := slices.BinarySearch(placed, t); !ok {
			add(r.name, t)
		}
	}
	sortRanked(out)
	return out
}

// scaleDepth is the rank whose score counts as an arm's baseline.
const scaleDepth = 100

// scaler maps an arm's scores to [0, 1] on its lexicalScale.
func scaler(top []ranked) func(float64) float64 { return between(lexicalScale(top)) }

// lexicalScale is the span a blend scales BM25 scores over: from the
// score at scaleDepth (0 when fewer tools matched: the others score 0) to
// the best.
func lexicalScale(top []ranked) (hi, lo float64) {
	if len(top) > 0 {
		hi = top[0].score
	}
	if len(top) >= scaleDepth {
		lo = top[scaleDepth-1].score
	}
	return hi, lo
}

// cosineScale is the span a blend scales cosines over: from the cosine at
// scaleDepth, or the lowest ranked in a smaller catalog, to the best.
func cosineScale(top []ranked) (hi, lo float64) {
	if n := min(len(top), scaleDepth); n > 0 {
		return top[0].score, top[n-1].score
	}
	return 0, 0
}

// between maps lo to 0 and hi to 1, clamping what lies outside; every
// score to 0 when hi is not above lo.
func between(hi, lo float64) func(float64) float64 {
	if hi <= lo {
		return func(float64) float64 { return 0 }
	}
	return func(s float64) float64 { return min(max((s-lo)/(hi-lo), 0), 1) }
}

// fuse combines rankings by reciprocal rank fusion: Σ 1/(k + rank).
func fuse(k int, lists ...[]ranked) []ranked {
	scores := map[string]float64{}
	for _, l := range lists {
		for i, r := range l {
			scores[r.name] += 1 / float64(k+i+1)
		}
	}
	out := make([]ranked, 0, len(scores))
	for n, s := range scores {
		out = append(out, ranked{name: n, score: s})
	}
	sortRanked(out)
	return out
}

// armsOf indexes a ranking by name.
func armsOf(list []ranked) map[string]*Arm {
	out := make(map[string]*Arm, len(list))
	for i, r := range list {
		out[r.name] = &Arm{Score: r.score, Rank: i + 1}
	}
	return out
}
