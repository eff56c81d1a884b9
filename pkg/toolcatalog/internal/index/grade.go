package index

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/text"
)

// grader grades the successive versions of one catalog, each from the
// grading before (see package selfgrade). The zero value is ready to use.
type grader struct {
	// maxSearches bounds the searches of one grade, DefaultMaxSearches
	// when 0, none when negative; what is left is searched by the next
	// grade, and the grading reports only the queries searched.
	maxSearches int
	// sample is how many tools' kept queries each grade searches again
	// in turn, DefaultSample when 0.
	sample int

	prev *Catalog
	// next is the catalog nextVersion built from prev, prev then spent;
	// nextRows names the tools whose row next wrote or whose text it
	// re-indexed in prev's index, or, when nextMoved, whose row next
	// holds and prev did not (next copied the rows to new places);
	// nextAll says they are every tool that changed, the others looked at
	// by no one.
	next      *Catalog
	nextRows  []string
	nextMoved bool
	nextAll   bool
	tools     map[string]*gradedTool
	// turn is the tool after which the rotating sample goes on.
	turn string
}

// gradeBatch is how many queries' cosines one matrix product computes.
const gradeBatch = 32

// watchRank is the rank in either arm above which a changed tool could
// enter a query's top K: the blend of two arms can lift a tool a few
// places above its rank in each.
const watchRank = 3 * K

// gradedTool is one tool's queries, ready to search, and their outcomes.
type gradedTool struct {
	set   QuerySet
	units [][]float32
	// intentUnits are the unit vectors of IntentVectors.
	intentUnits map[int][][]float32
	// outcomes holds each query's last outcome, nil when it is due.
	outcomes []*queryOutcome
	// kept holds each query's semantic ranking as the last search left
	// it, nil when the next search must score every row.
	kept []*keptRanking
}

// keptRanking is the best rows of a query's semantic arm, best first by
// exact cosine (then name), with keptSlack more than a search ranks, and
// every other row ranked after the last of them. A query vector and the
// vectors of the tools that did not change score as they did, so the next
// version's arm is ranked from these rows and the changed tools' alone,
// without a scan of every row: the rows of changed tools leave, the
// changed tools that rank before the last row join, and the ranking holds
// while it has as many rows as a search ranks (or holds every row).
// Each row costs 8 bytes; only catalogs of keptMinRows vectors or more
// keep them.
type keptRanking struct {
	rows []keptRow
	// complete says no other row may rank: the arm ranked fewer rows
	// than it asked for.
	complete bool
}

// keptRow is one row of a keptRanking.
type keptRow struct {
	row   int32
	score float32
}

// keptSlack is how many rows a keptRanking holds beyond a search's depth:
// the changed tools it may lose before a scan is due again.
const keptSlack = 16

// keptMinRows is the number of vectors from which a grading keeps its
// queries' rankings; a smaller catalog is scanned as fast.
const keptMinRows = KeptMinTools

// queryOutcome is where one left-out query ranked its tool.
type queryOutcome struct {
	found bool
	// first is the tool ranked first; top the first K.
	first string
	top   []string
	// terms are the query's distinct index terms; semWatch and lexWatch
	// the arms' scores at watchRank (any score enters an arm that ranked
	// fewer tools).
	terms              []string
	semWatch, lexWatch float64
	// intents, for a query searched by its intents, is what a changed
	// tool must be or pass to move its outcome (see intentWatch).
	intents *intentWatch
	// blend, for a hybrid search of the query whole, is how it blended
	// the arms: a changed tool is due by the score the blend would give it
	// (see blendWatch.reaches), not by its rank in each arm.
	blend *blendWatch
}

// blendWatch is what a hybrid search needs to score one more tool as it
// scored the others: each arm's scale, the cosine's share, the lexical
// evidence and the blended score of the K-th tool.
type blendWatch struct {
	w, cosHi, cosLo, lexHi, lexLo float64
	// marginCos is the semantic arm's cosine at marginRank, +Inf when it
	// ranked fewer tools: a tool above it moves the margin the cosine's
	// share follows (see confidentMargin).
	marginCos             float64
	evidence, minEvidence float64
	semanticOnly          bool
	// kth is the K-th tool's score on the blend's scale, or its
	// cosine in a semantic-only search, whose order is the cosines' alone;
	// -Inf when fewer tools ranked. kthName is that tool's name in a
	// semantic-only search.
	kth     float64
	kthName string
}

// blendMargin is how far under the K-th blended score a changed tool
// still counts as able to pass it: the change moves other scores a little
// too, through the words' weights and the arms' baselines.
const blendMargin = 0.05

// newBlendWatch keeps how a hybrid search blended the arms into order.
func newBlendWatch(order, semantic, lexical []ranked, b Blend) *blendWatch {
	bw := &blendWatch{w: b.SemanticWeight, evidence: b.LexicalEvidence, minEvidence: b.MinLexicalEvidence, semanticOnly: b.SemanticOnly, kth: math.Inf(-1)}
	bw.cosHi, bw.cosLo = cosineScale(semantic)
	bw.marginCos = math.Inf(1)
	if at, ok := marginCosine(semantic); ok {
		bw.marginCos = at
	}
	bw.lexHi, bw.lexLo = lexicalScale(lexical)
	if bw.semanticOnly {
		bw.w = 1
	}
	if len(order) >= K {
		bw.kth = order[K-1].score
		if bw.semanticOnly {
			bw.kthName = order[K-1].name
		}
	}
	return bw
}

// reaches reports whether the tool name with this cosine and BM25 score
// (0: no match) in the next version could rank among the query's first
// K. It scores the tool as the blend scored the others, on each
// arm's scale widened to take it, and lets the others' scores fall by what
// that widening can take from them. A tool that moves the lexical evidence
// across the semantic-only or the strong-evidence line changes how every
// tool is blended, and is due. A semantic-only search orders by cosine,
// which a change of another tool does not move: the tool is due when it
// passes the K-th, as the search breaks ties (by name).
func (bw *blendWatch) reaches(name string, cosine, bm25, maxIDF float64) bool {
	if math.IsInf(bw.kth, -1) {
		return true
	}
	lexHi := max(bw.lexHi, bm25)
	if maxIDF > 0 && bm25 > bw.lexHi {
		after := lexHi / maxIDF
		if bw.semanticOnly && after >= bw.minEvidence || !bw.semanticOnly && max(bw.evidence, after) > strongLexicalEvidence {
			return true
		}
	}
	if bw.semanticOnly {
		return cosine > bw.kth+tieCosine || cosine >= bw.kth-tieCosine && name < bw.kthName
	}
	if cosine >= bw.marginCos {
		return true
	}
	cosHi := max(bw.cosHi, cosine)
	score := bw.w * between(cosHi, bw.cosLo)(cosine)
	slack := bw.w * widened(bw.cosHi, cosHi, bw.cosLo)
	if !bw.semanticOnly {
		if bm25 > 0 {
			score += (1 - bw.w) * between(lexHi, bw.lexLo)(bm25)
		}
		slack += (1 - bw.w) * widened(bw.lexHi, lexHi, bw.lexLo)
	}
	return score+slack+blendMargin >= bw.kth
}

// tieCosine is how near two cosines count as a tie a name breaks: the
// cosine a search ranks by and the one the grading computes of a changed
// row may be summed in another order.
const tieCosine = 1e-6

// widened is the most a score scaled between lo and hi loses when hi
// rises to to.
func widened(hi, to, lo float64) float64 {
	if to <= hi || hi <= lo {
		return 0 // nothing moves, or every score was 0
	}
	return (to - hi) / (to - lo)
}

// NewGrader returns a Grader bounded to maxSearches searches per Grade
// (the default when 0, none when negative), searching again sample tools'
// kept queries in turn (the default when 0). Package selfgrade offers it;
// nothing else refers to it, so only a program that grades links the
// grading.
func NewGrader(maxSearches, sample int) Grader {
	return &indexGrader{grader: grader{maxSearches: maxSearches, sample: sample}}
}

// indexGrader is the grader package selfgrade hands out: it indexes each
// version from the last one graded and grades what it indexed.
type indexGrader struct {
	grader
	indexed *Catalog
}

// Index indexes doc from the catalog last graded, reading only the
// vectors that changed since, or whole the first time, chunk tools at a
// time. touched, when not nil, names every tool whose entry or vector
// may differ from the version graded last: only those are looked at
// when the tools are the same ones.
func (g *indexGrader) Index(doc *contract.Document, chunk int, digest func(name string) uint64, touched []string, read func(names []string) (map[string]string, error)) error {
	g.indexed = nil
	prev := g.graded()
	if prev == nil {
		c, err := newReading(doc, chunk, true, read)
		if err != nil {
			return err
		}
		g.indexed = c
		return nil
	}
	readRaw := func(names []string) (map[string][]byte, error) {
		if len(names) == 0 {
			return nil, nil
		}
		raw, err := read(names)
		if err != nil {
			return nil, err
		}
		vecs := make(map[string][]byte, len(raw))
		for name, r := range raw {
			vecs[name] = []byte(r)
		}
		return vecs, nil
	}
	if touched != nil {
		var stale []string
		for _, name := range touched {
			if d := digest(name); d != 0 {
				if _, h := prev.rowHash(name); h != d {
					stale = append(stale, name)
				}
			}
		}
		vecs, err := readRaw(stale)
		if err != nil {
			return err
		}
		if c, rows := overwriteTouched(doc, vecs, prev, touched, digest); c != nil {
			g.next, g.nextRows, g.nextMoved, g.nextAll = c, rows, false, true
			g.indexed = c
			return nil
		}
	}
	vecs, err := readRaw(prev.staleVectors(doc, digest))
	if err != nil {
		return err
	}
	g.indexed = g.nextVersion(doc, vecs)
	return nil
}

// Grade grades the catalog Index indexed last.
func (g *indexGrader) Grade(ctx context.Context, sets map[string]QuerySet) (*Grading, int, error) {
	if g.indexed == nil {
		return nil, 0, errors.New("no version indexed to grade")
	}
	return g.grade(ctx, g.indexed, sets)
}

// graded is the catalog last graded, nil before the first grade and
// after nextVersion until the next grade.
func (g *grader) graded() *Catalog {
	if g.next != nil {
		return nil
	}
	return g.prev
}

// nextVersion builds the catalog of the version after the one last graded
// from the parts that changed since, as Catalog.Next does, for the next
// grade. When the tools with a vector are the same, in the same order, the
// changed vectors are written over the last graded catalog's rows instead
// of a copy of every row (51 MB at 50,000 tools of 256 dimensions): that
// catalog is then spent, and must not be searched any more. It returns nil
// before the first grade.
func (g *grader) nextVersion(doc *contract.Document, rawVectors map[string][]byte) *Catalog {
	prev := g.graded()
	if prev == nil {
		return nil
	}
	if c, rows := overwrite(doc, rawVectors, prev); c != nil {
		g.next, g.nextRows, g.nextMoved, g.nextAll = c, rows, false, false
		return c
	}
	// A new row: the rows are copied to a larger block. What the grade
	// compares with prev is which rows changed and prev's text, so prev
	// lets go of its rows and search index now rather than hold them
	// through the grade's searches (65 MB at 50,000 tools).
	c := prev.Next(doc, rawVectors)
	g.next, g.nextRows, g.nextMoved, g.nextAll = c, changedRows(prev, c), true, false
	prev.spend()
	return c
}

// changedRows names the tools whose row in c is not their row in prev:
// new, gone, or of other values. A row decoded from the same raw vector
// (the same digest) is the same.
func changedRows(prev, c *Catalog) []string {
	out := []string{}
	for _, t := range c.Document.Tools {
		if !sameRow(prev, c, t.Name) {
			out = append(out, t.Name)
		}
	}
	return out
}

// grade grades c, a version of the catalog the grader graded before (or
// any catalog: a grader meeting another model or catalog starts afresh),
// with sets, the tools' own queries. It returns the grading and how many
// due queries were left for the next grade by maxSearches.
func (g *grader) grade(ctx context.Context, c *Catalog, sets map[string]QuerySet) (*Grading, int, error) {
	opts := c.withDefaults(Options{TopK: K})
	method := opts.Method
	if method != BM25 && c.dims == 0 {
		method = BM25
	}
	// What changed in the catalog nextVersion built is what it says
	// (prev's rows are spent: written over, or let go of). Any other
	// catalog after nextVersion grades afresh.
	spent := g.next != nil && g.next != c
	rows, moved, every := g.nextRows, g.nextMoved, g.nextAll
	if g.next != c {
		rows, every = nil, false
	}
	g.next, g.nextRows, g.nextMoved, g.nextAll = nil, nil, false, false
	if spent || g.prev == nil || g.prev.Document.CatalogUID != c.Document.CatalogUID || g.prev.Document.Embedding != c.Document.Embedding ||
		!sameRanking(g.prev.withDefaults(Options{TopK: K}), opts) {
		g.tools = nil
	}
	var changed map[string]bool
	if every && g.prev != nil {
		// Every tool that changed is in rows: the others are not
		// looked at.
		changed = make(map[string]bool, len(rows))
		for _, name := range rows {
			changed[name] = true
		}
	} else {
		changed = changedTools(g.prev, c, rows)
	}
	if g.tools == nil {
		g.tools = map[string]*gradedTool{}
	}
	names := make([]string, 0, len(sets))
	for n := range sets {
		names = append(names, n)
	}
	sort.Strings(names)
	keep := make(map[string]*gradedTool, len(names))
	for _, name := range names {
		set := sets[name]
		if _, ok := c.tools[name]; !ok || len(set.Queries) < 2 || len(set.Vectors) != len(set.Queries) {
			continue
		}
		gt := g.tools[name]
		if gt == nil || changed[name] || !slices.Equal(gt.set.Queries, set.Queries) {
			var err error
			if gt, err = c.gradedTool(name, set, method); err != nil {
				// c may be written over the last catalog's rows: the
				// next grade starts afresh.
				g.prev, g.tools = nil, nil
				return nil, 0, fmt.Errorf("tool %s: %w", name, err)
			}
			if gt == nil {
				continue
			}
		}
		keep[name] = gt
	}
	if method == BM25 {
		// No vectors to rank (and none kept up to date with c's).
		for _, gt := range keep {
			gt.kept = nil
		}
	} else {
		// Rows written over in place are where they were, unless tools
		// went and the rows after them moved up.
		sameRows := g.prev == c || rows != nil && !moved && len(c.vecNames) == len(g.prev.vecNames)
		g.updateKept(c, keep, changed, sameRows, opts)
	}
	g.tools, g.prev = keep, c
	g.markAffected(c, changed, opts)
	g.markSample(names)

	budget := g.maxSearches
	if budget == 0 {
		budget = defaultSearches(len(c.Document.Tools))
	}
	type due struct {
		tool string
		gt   *gradedTool
		i    int
	}
	var todo []due
	left := 0
	for _, name := range names {
		gt := g.tools[name]
		if gt == nil {
			continue
		}
		for i := range gt.outcomes {
			switch {
			case gt.outcomes[i] != nil:
			case budget != 0:
				todo = append(todo, due{name, gt, i})
				budget--
			default:
				left++
			}
		}
	}
	// A due query with a kept ranking ranks its semantic arm from it;
	// the others' cosines with every tool are computed in batches: one
	// matrix product reads the catalog's vectors once for many queries.
	keeps := method != BM25 && len(c.vecNames) >= keptMinRows
	var scan, kept []due
	for _, d := range todo {
		if method != BM25 && d.gt.kept != nil && d.gt.kept[d.i] != nil {
			kept = append(kept, d)
		} else {
			scan = append(scan, d)
		}
	}
	all := func(string) bool { return true }
	var sum []float64 // the room of each search's query sum
	// An intent is searched as itself, the tool it was asked of playing
	// no part: many tools' requests share intents, searched once.
	memo := &intentSearches{searched: map[intentKey]intentSearch{}}
	search := func(d due, cosines []float32) {
		var blend Blend
		var own *ownScore
		if method != BM25 {
			sum = d.gt.sum(sum)
			own = &ownScore{row: c.rowOf[c.tools[d.tool]], cosine: looCosine(d.gt.units[d.i], sum, d.gt.set.Vectors[d.i]), cosines: cosines}
			if d.gt.kept != nil && d.gt.kept[d.i] != nil {
				own.kept, own.complete = d.gt.kept[d.i].rows, d.gt.kept[d.i].complete
			}
		}
		q := d.gt.set.Queries[d.i]
		order, semantic, lexical := c.rank(q, d.gt.units[d.i], opts, all, method, &blend, own, nil)
		if keeps {
			d.gt.keep(d.i, c.keptRanking(semantic))
		}
		var intents []string
		if opts.Intents == IntentsOn {
			intents = text.Intents(q)
		}
		terms := c.index.queryTerms(q)
		units := d.gt.intentUnits[d.i]
		var watch *intentWatch
		if len(intents) > 0 && (method == BM25 || len(units) == len(intents)) {
			watch = &intentWatch{}
			watch.add(terms, semantic.top, lexical, opts)
			order = c.fuseIntents(order, intents, units, opts, method, memo, watch)
			watch.seal()
		}
		o := outcomeOf(d.tool, terms, order, semantic.top, lexical)
		o.intents = watch
		if method == Hybrid && watch == nil {
			o.blend = newBlendWatch(order, semantic.top, lexical, blend)
		}
		d.gt.outcomes[d.i] = o
	}
	n := len(c.vecNames)
	var units, cosines []float32
	for start := 0; start < len(scan); start += gradeBatch {
		batch := scan[start:min(start+gradeBatch, len(scan))]
		if method != BM25 {
			units = units[:0]
			for _, d := range batch {
				units = append(units, d.gt.units[d.i]...)
			}
			cosines = slices.Grow(cosines[:0], len(batch)*n)[:len(batch)*n]
			c.dotsBatch(cosines, units)
		}
		for j, d := range batch {
			if err := ctx.Err(); err != nil {
				return nil, 0, err
			}
			var own []float32
			if method != BM25 {
				own = cosines[j*n : (j+1)*n]
			}
			search(d, own)
		}
	}
	if len(kept) > 0 {
		// Room for one query's cosines, each written before it is read.
		room := make([]float32, n)
		for _, d := range kept {
			if err := ctx.Err(); err != nil {
				return nil, 0, err
			}
			search(d, room)
		}
	}
	searched := len(todo)
	out := g.grading(c)
	out.Searched = searched
	if method != BM25 {
		out.Scanned = len(scan)
	}
	return out, left, nil
}

// defaultSearches bounds one grade of a catalog of n tools by the work of
// DefaultMaxSearches searches of MaxSearchesTools
// tools: a search's cost grows with the tools it ranks.
func defaultSearches(n int) int {
	if n >= MaxSearchesTools {
		return DefaultMaxSearches
	}
	return DefaultMaxSearches * MaxSearchesTools / max(n, 1)
}

// keep keeps query i's semantic ranking for the next search.
func (gt *gradedTool) keep(i int, k *keptRanking) {
	if gt.kept == nil {
		gt.kept = make([]*keptRanking, len(gt.outcomes))
	}
	gt.kept[i] = k
}

// keptRanking is what a grading keeps of a search's semantic arm.
func (c *Catalog) keptRanking(s semanticScores) *keptRanking {
	k := &keptRanking{rows: make([]keptRow, len(s.kept)), complete: s.complete}
	for i, r := range s.kept {
		row := int(r.key) - 1 // the key of a row of tools in name order
		if r.key == 0 {
			row = c.rowOf[c.tools[r.name]]
		}
		k.rows[i] = keptRow{row: int32(row), score: float32(r.score)}
	}
	return k
}

// updateKept brings the kept rankings of the tools kept from the last
// grade (g.prev) to c: the rows of changed tools leave, the changed tools
// that rank before a ranking's last row join, and a ranking left with
// fewer rows than a search ranks goes, for a scan. sameRows says c's rows
// are g.prev's.
func (g *grader) updateKept(c *Catalog, tools map[string]*gradedTool, changed map[string]bool, sameRows bool, opts Options) {
	prev := g.prev
	if prev == nil || len(changed) == 0 && sameRows {
		return
	}
	// Old row → c's row; -1 for a changed tool's, which leaves.
	to := make([]int32, len(prev.vecNames))
	if sameRows {
		for old := range to {
			to[old] = int32(old)
		}
		for name := range changed {
			if j, ok := c.tools[name]; ok && c.rowOf[j] >= 0 {
				to[c.rowOf[j]] = -1
			}
		}
	} else {
		for old, name := range prev.vecNames {
			to[old] = -1
			if j, ok := c.tools[name]; ok && !changed[name] {
				to[old] = int32(c.rowOf[j])
			}
		}
	}
	var joining []int
	for name := range changed {
		if j, ok := c.tools[name]; ok && c.rowOf[j] >= 0 {
			joining = append(joining, c.rowOf[j])
		}
	}
	before := func(a, b keptRow) bool {
		return a.score > b.score || a.score == b.score && c.vecNames[a.row] < c.vecNames[b.row]
	}
	d, scores := depth(opts.TopK), make([]float32, len(joining))
	for _, gt := range tools {
		for i, k := range gt.kept {
			if k == nil {
				continue
			}
			if slices.ContainsFunc(k.rows, func(r keptRow) bool { return int(r.row) >= len(to) }) {
				gt.kept[i] = nil // not prev's rows: scan
				continue
			}
			var last keptRow
			var lastName string
			if n := len(k.rows); n > 0 {
				last, lastName = k.rows[n-1], prev.vecNames[k.rows[n-1].row]
			}
			rows := k.rows[:0]
			for _, r := range k.rows {
				if r.row = to[r.row]; r.row >= 0 {
					rows = append(rows, r)
				}
			}
			if len(joining) > 0 {
				c.dotsRows(scores, joining, gt.units[i])
			}
			for j, row := range joining {
				r := keptRow{row: int32(row), score: scores[j]}
				if !k.complete && (r.score < last.score || r.score == last.score && c.vecNames[row] > lastName) {
					continue // a row not kept may rank before it
				}
				at, _ := slices.BinarySearchFunc(rows, r, func(x, y keptRow) int {
					if before(x, y) {
						return -1
					}
					return 1
				})
				rows = slices.Insert(rows, at, r)
			}
			if len(rows) > d+keptSlack {
				rows, k.complete = rows[:d+keptSlack], false
			}
			k.rows = rows
			if !k.complete && len(rows) < d {
				gt.kept[i] = nil
			}
		}
	}
}

// gradedTool readies a tool's queries for search, nil when the semantic
// arm cannot grade it (no vector).
func (c *Catalog) gradedTool(name string, set QuerySet, method Method) (*gradedTool, error) {
	gt := &gradedTool{set: set, outcomes: make([]*queryOutcome, len(set.Queries))}
	if method == BM25 {
		gt.units = make([][]float32, len(set.Queries))
		return gt, nil
	}
	if c.rowOf[c.tools[name]] < 0 {
		return nil, nil
	}
	for i, v := range set.Vectors {
		if len(v) != c.dims {
			return nil, fmt.Errorf("a query vector has %d dimensions, the catalog's %d", len(v), c.dims)
		}
		unit, reason := c.unitQuery(v)
		if reason != "" {
			return nil, fmt.Errorf("query %d: %s", i, reason)
		}
		gt.units = append(gt.units, unit)
	}
	for i, vecs := range set.IntentVectors {
		units := make([][]float32, len(vecs))
		for j, v := range vecs {
			unit, reason := c.unitQuery(v)
			if reason != "" {
				return nil, fmt.Errorf("query %d, intent %d: %s", i, j+1, reason)
			}
			units[j] = unit
		}
		if gt.intentUnits == nil {
			gt.intentUnits = map[int][][]float32{}
		}
		gt.intentUnits[i] = units
	}
	return gt, nil
}

// fuseIntents is the order Search gives a query of several intents,
// whole holding its whole ranking: each intent's share of the top K,
// then the whole ranking. It searches each intent once per memo, and adds
// each intent's search to watch.
func (c *Catalog) fuseIntents(whole []ranked, intents []string, units [][]float32, opts Options, method Method, memo *intentSearches, watch *intentWatch) []ranked {
	all := func(string) bool { return true }
	rankings := []searched{{order: whole, final: armsOf(whole)}}
	for j, in := range intents {
		key := intentKey{text: in}
		if method != BM25 {
			key.unit = vectorHash(units[j])
		}
		s, ok := memo.searched[key]
		if !ok {
			var unit []float32
			var own *ownScore
			if method != BM25 {
				// Scored into the grade's room, as a tool's query is.
				unit = units[j]
				memo.room = slices.Grow(memo.room[:0], len(c.vecNames))[:len(c.vecNames)]
				c.dotsBatch(memo.room, unit)
				own = &ownScore{row: -1, cosines: memo.room}
			}
			var blend Blend
			var semantic semanticScores
			s.terms = c.index.queryTerms(in)
			s.order, semantic, s.lexical = c.rank(in, unit, opts, all, method, &blend, own, nil)
			s.semantic, s.evidence = semantic.top, blend.LexicalEvidence
			memo.searched[key] = s
		}
		watch.add(s.terms, s.semantic, s.lexical, opts)
		rankings = append(rankings, searched{order: s.order, evidence: s.evidence})
	}
	seen := map[string]bool{}
	var out []ranked
	for _, p := range intentPicks(rankings, K, func(n string) bool { return !seen[n] }) {
		seen[p.name] = true
		out = append(out, ranked{name: p.name})
	}
	for _, r := range whole {
		if !seen[r.name] {
			out = append(out, r)
		}
	}
	return out
}

// intentSearches holds the intents one grade searched, by intentKey, and
// the room of their cosines.
type intentSearches struct {
	searched map[intentKey]intentSearch
	room     []float32
}

// intentKey is an intent and the hash of its unit vector (vectorHash).
type intentKey struct {
	text string
	unit uint64
}

// intentSearch is one intent's search: its order, its terms and arms,
// and its lexical evidence.
type intentSearch struct {
	order, semantic, lexical []ranked
	terms                    []string
	evidence                 float64
}

// sameRanking reports whether two settings rank alike.
func sameRanking(a, b Options) bool {
	same := func(x, y *float64) bool { return x == nil && y == nil || x != nil && y != nil && *x == *y }
	return a.Method == b.Method && same(a.Threshold, b.Threshold) && same(a.SemanticWeight, b.SemanticWeight) &&
		same(a.MinLexicalEvidence, b.MinLexicalEvidence) && a.Intents == b.Intents
}

// outcomeOf records where a left-out query of tool ranked it.
func outcomeOf(tool string, terms []string, order, semantic, lexical []ranked) *queryOutcome {
	o := &queryOutcome{terms: terms, semWatch: math.Inf(-1)}
	at := rankOf(order, tool)
	o.found = at > 0 && at <= K
	if len(order) > 0 {
		o.first = order[0].name
	}
	for _, r := range order[:min(len(order), K)] {
		o.top = append(o.top, r.name)
	}
	if len(semantic) >= watchRank {
		o.semWatch = semantic[watchRank-1].score
	}
	if len(lexical) >= watchRank {
		o.lexWatch = lexical[watchRank-1].score
	}
	return o
}

// changedTools names the tools whose text or vector differ between two
// versions, or that only one holds; every tool when prev is nil. rows,
// when c was written over prev's rows, names the vectors and the text
// that changed (the text index may then be prev's own).
func changedTools(prev, c *Catalog, rows []string) map[string]bool {
	out := map[string]bool{}
	if prev == nil {
		return out
	}
	for _, name := range rows {
		out[name] = true
	}
	for _, t := range c.Document.Tools {
		j, ok := prev.tools[t.Name]
		if !ok || !prev.index.docs[j].indexes(t) || (rows == nil && !sameRow(prev, c, t.Name)) {
			out[t.Name] = true
		}
	}
	for _, t := range prev.Document.Tools {
		if _, ok := c.tools[t.Name]; !ok {
			out[t.Name] = true
		}
	}
	return out
}

// markAffected makes due every kept query a changed tool could rank
// differently: one whose top K or first held a changed tool, or
// for which a changed tool now scores into the top K of a hybrid
// search (see blendWatch) or above the watch rank of an arm of another;
// for a query searched by its intents, one that an arm of its searches
// ranked or now ranks (see intentWatch).
func (g *grader) markAffected(c *Catalog, changed map[string]bool, opts Options) {
	if len(changed) == 0 {
		return
	}
	// The changed tools, and the rows of those with one.
	var docs, rows []int
	for name := range changed {
		if i, ok := c.tools[name]; ok {
			docs = append(docs, i)
			if row := c.rowOf[i]; row >= 0 {
				rows = append(rows, row)
			}
		}
	}
	cosines := make([]float32, len(rows))
	for _, gt := range g.tools {
		for i, o := range gt.outcomes {
			if o == nil {
				continue
			}
			if o.intents != nil {
				// Its first K are tools its searches' arms ranked.
				if o.intents.moved(c, changed, docs, rows, gt.units[i], gt.intentUnits[i], cosines, opts) {
					gt.outcomes[i] = nil
				}
				continue
			}
			due := changed[o.first]
			for _, n := range o.top {
				due = due || changed[n]
			}
			if due {
				gt.outcomes[i] = nil
				continue
			}
			// Each changed row's cosine, as a scan scores it.
			semantic := len(rows) > 0 && gt.units[i] != nil
			if semantic {
				c.dotsRows(cosines, rows, gt.units[i])
			}
			at := 0 // the next changed row's place in rows
			for _, doc := range docs {
				if due {
					break
				}
				cosine := math.Inf(-1) // no vector: no cosine
				if c.rowOf[doc] >= 0 {
					if semantic {
						cosine = float64(cosines[at])
					}
					at++
				}
				bm25 := c.index.scoreOf(doc, o.terms, opts.K1, opts.B)
				if o.blend != nil {
					due = o.blend.reaches(c.Document.Tools[doc].Name, cosine, bm25, c.index.maxIDF)
				} else {
					due = cosine > o.semWatch || bm25 > 0 && bm25 > o.lexWatch
				}
			}
			if due {
				gt.outcomes[i] = nil
			}
		}
	}
}

// markSample makes due the kept queries of the next sample tools in name
// order after the turn, and moves the turn past them.
func (g *grader) markSample(names []string) {
	n := g.sample
	if n == 0 {
		n = DefaultSample
	}
	start := sort.SearchStrings(names, g.turn)
	if start < len(names) && names[start] == g.turn {
		start++
	}
	for k := range len(names) {
		if n <= 0 {
			return
		}
		name := names[(start+k)%len(names)]
		gt := g.tools[name]
		if gt == nil {
			continue
		}
		kept := false
		for i := range gt.outcomes {
			kept = kept || gt.outcomes[i] != nil
			gt.outcomes[i] = nil
		}
		if kept {
			n--
			g.turn = name
		}
	}
}

// grading sums up the outcomes of the searched queries.
func (g *grader) grading(c *Catalog) *Grading {
	out := &Grading{}
	firsts := map[string]map[string]int{} // tool → tool ranked first instead → count
	found := 0
	names := make([]string, 0, len(g.tools))
	for n := range g.tools {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		missed, queries := 0, 0
		for _, o := range g.tools[name].outcomes {
			if o == nil {
				continue
			}
			queries++
			if o.found {
				found++
			} else {
				missed++
			}
			if o.first != "" && o.first != name {
				if firsts[name] == nil {
					firsts[name] = map[string]int{}
				}
				firsts[name][o.first]++
			}
		}
		if queries == 0 {
			continue
		}
		out.Tools++
		out.Queries += queries
		if missed > 0 {
			out.Outranked = append(out.Outranked, Outranked{Tool: name, Missed: missed, Queries: queries, By: mostOften(firsts[name])})
		}
	}
	if out.Queries > 0 {
		out.SelfRecallAt5 = float64(found) / float64(out.Queries)
	}
	sort.SliceStable(out.Outranked, func(i, j int) bool {
		a, b := out.Outranked[i], out.Outranked[j]
		return float64(a.Missed)/float64(a.Queries) > float64(b.Missed)/float64(b.Queries)
	})
	for a, others := range firsts {
		for b := range others {
			if a < b && firsts[b][a] > 0 {
				out.Confusable = append(out.Confusable, ConfusablePair{A: a, B: b, Similarity: c.similarity(a, b)})
			}
		}
	}
	sort.Slice(out.Confusable, func(i, j int) bool {
		x, y := out.Confusable[i], out.Confusable[j]
		if x.Similarity != y.Similarity {
			return x.Similarity > y.Similarity
		}
		return x.A+"\x00"+x.B < y.A+"\x00"+y.B
	})
	return out
}

// sum adds the tool's query vectors, of the catalog's length, in float64:
// the others' centroid of each is the sum less it. It is added up for
// each search rather than kept, which would hold twice a vector per
// graded tool between gradings. It is added in buf's room.
func (gt *gradedTool) sum(buf []float64) []float64 {
	sum := slices.Grow(buf[:0], len(gt.set.Vectors[0]))[:len(gt.set.Vectors[0])]
	clear(sum)
	for _, v := range gt.set.Vectors {
		for i, x := range v {
			sum[i] += float64(x)
		}
	}
	return sum
}

// looCosine is the cosine of a unit query and the centroid of a tool's
// queries without that query (sum minus it).
func looCosine(unit []float32, sum []float64, held []float32) float32 {
	var dot, n float64
	for i := range sum {
		x := sum[i] - float64(held[i])
		dot += float64(unit[i]) * x
		n += x * x
	}
	if n == 0 {
		return 0
	}
	return float32(dot / math.Sqrt(n))
}

// similarity is the cosine of two tools' centroids, 0 when one has none.
func (c *Catalog) similarity(a, b string) float64 {
	ra, rb := c.rowIndex(a), c.rowIndex(b)
	if ra < 0 || rb < 0 {
		return 0
	}
	va, vb := c.rowVector(ra), c.rowVector(rb)
	var dot float64
	for i := range va {
		dot += float64(va[i]) * float64(vb[i])
	}
	return dot
}

func rankOf(order []ranked, name string) int {
	for i, r := range order {
		if r.name == name {
			return i + 1
		}
	}
	return 0
}

// mostOften is the key with the highest count, the first by name on ties.
func mostOften(counts map[string]int) string {
	best, n := "", 0
	for k, v := range counts {
		if v > n || v == n && k < best {
			best, n = k, v
		}
	}
	return best
}
