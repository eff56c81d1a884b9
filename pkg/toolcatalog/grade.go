package toolcatalog

import (
	"context"
	"fmt"
	"math"
	"sort"
)

// GradeK is the cut-off of self-grading: a tool's held-back query counts as
// found when the tool ranks in the top GradeK.
const GradeK = 5

// QuerySet is one tool's own queries (synthetic and example) with their
// vectors, embedded by the catalog's model, in the same order.
type QuerySet struct {
	Queries []string
	Vectors [][]float32
}

// Grading is how well a catalog finds its own tools.
type Grading struct {
	// Tools and Queries count what was graded: tools with at least two
	// queries, and their queries.
	Tools, Queries int
	// SelfRecallAt5 is the share of graded queries whose tool ranked in
	// the top five.
	SelfRecallAt5 float64
	// Outranked lists the graded tools that some of their own queries did
	// not find in the top five, most missed first.
	Outranked []Outranked
	// Confusable lists pairs of tools whose queries rank the other tool
	// first, both ways, most similar first.
	Confusable []ConfusablePair
}

// Outranked is a tool other tools rank above it for its own queries.
type Outranked struct {
	Tool string
	// Missed of Queries held-back queries did not find the tool in the
	// top five.
	Missed, Queries int
	// By is the tool ranked first most often instead.
	By string
}

// ConfusablePair is two tools whose own queries retrieve each other.
type ConfusablePair struct {
	// A and B are the tools' names, A < B.
	A, B string
	// Similarity is the cosine of their centroids.
	Similarity float64
}

// Grade evaluates the catalog with its own queries, leaving one out at a
// time: each query of a tool is searched with the catalog's default method
// and settings against every tool, with the tool's centroid rebuilt from
// its other queries, so a query never finds its tool through itself. Tools
// missing from sets, or with fewer than two queries, are not graded but
// still compete. Permissions, always-included tools and exact names play
// no part.
func (c *Catalog) Grade(ctx context.Context, sets map[string]QuerySet) (*Grading, error) {
	opts := c.withDefaults(Options{TopK: GradeK})
	method := opts.Method
	if method != BM25 && c.dims == 0 {
		method = BM25
	}
	all := func(string) bool { return true }
	g := &Grading{}
	firsts := map[string]map[string]int{} // tool → tool ranked first instead → count
	names := make([]string, 0, len(sets))
	for n := range sets {
		names = append(names, n)
	}
	sort.Strings(names)
	found := 0
	for _, name := range names {
		set := sets[name]
		doc, ok := c.tools[name]
		if !ok || len(set.Queries) < 2 || len(set.Vectors) != len(set.Queries) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		row := c.rowOf[doc]
		sum, err := c.sumOf(set.Vectors)
		if method != BM25 && (row < 0 || err != nil) {
			continue
		}
		g.Tools++
		missed := 0
		for i, q := range set.Queries {
			resp := &Response{Method: method}
			var unit []float32
			var own *ownScore
			if method != BM25 {
				var reason string
				if unit, reason = c.unitQuery(set.Vectors[i]); reason != "" {
					return nil, fmt.Errorf("tool %s, query %d: %s", name, i, reason)
				}
				own = &ownScore{row: row, cosine: looCosine(unit, sum, set.Vectors[i])}
			}
			order, _, _ := c.rank(q, unit, opts, all, resp, own)
			g.Queries++
			if at := rankOf(order, name); at > 0 && at <= GradeK {
				found++
			} else {
				missed++
			}
			if len(order) > 0 && order[0].name != name {
				if firsts[name] == nil {
					firsts[name] = map[string]int{}
				}
				firsts[name][order[0].name]++
			}
		}
		if missed > 0 {
			g.Outranked = append(g.Outranked, Outranked{Tool: name, Missed: missed, Queries: len(set.Queries), By: mostOften(firsts[name])})
		}
	}
	if g.Queries > 0 {
		g.SelfRecallAt5 = float64(found) / float64(g.Queries)
	}
	sort.SliceStable(g.Outranked, func(i, j int) bool {
		a, b := g.Outranked[i], g.Outranked[j]
		return float64(a.Missed)/float64(a.Queries) > float64(b.Missed)/float64(b.Queries)
	})
	for a, others := range firsts {
		for b := range others {
			if a < b && firsts[b][a] > 0 {
				g.Confusable = append(g.Confusable, ConfusablePair{A: a, B: b, Similarity: c.similarity(a, b)})
			}
		}
	}
	sort.Slice(g.Confusable, func(i, j int) bool {
		x, y := g.Confusable[i], g.Confusable[j]
		if x.Similarity != y.Similarity {
			return x.Similarity > y.Similarity
		}
		return x.A+"\x00"+x.B < y.A+"\x00"+y.B
	})
	return g, nil
}

// sumOf adds vectors of the catalog's length in float64.
func (c *Catalog) sumOf(vecs [][]float32) ([]float64, error) {
	sum := make([]float64, c.dims)
	for _, v := range vecs {
		if len(v) != c.dims {
			return nil, fmt.Errorf("a query vector has %d dimensions, the catalog's %d", len(v), c.dims)
		}
		for i, x := range v {
			sum[i] += float64(x)
		}
	}
	return sum, nil
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
	va, vb := c.Vectors[a], c.Vectors[b]
	if va == nil || vb == nil {
		return 0
	}
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
