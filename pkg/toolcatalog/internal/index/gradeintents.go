package index

import (
	"hash/maphash"
	"math"
	"slices"
	"unsafe"
)

// intentWatch is what the grading keeps of a query it searched by its
// intents to tell whether a changed tool can move its outcome. The order
// it gives such a query is made of the arms of its searches alone (the
// request whole and each intent: see fuseIntents), so a tool that no arm
// of them ranked, and that scores into none of them now, leaves that
// order as it was; any other changed tool makes the query due. It costs 8
// bytes per tool an arm ranked, and no pointer but the terms.
type intentWatch struct {
	// ranked holds the watchHash of every tool an arm ranked, sorted.
	ranked []uint64
	// searches holds, for the request whole and then each intent, its
	// terms and what a tool must score to enter each arm.
	searches []watchedSearch
}

// watchedSearch is one search of an intentWatch.
type watchedSearch struct {
	terms []string
	// sem is the semantic arm's score at its last rank, and lex the
	// lexical arm's; -Inf and 0 for an arm that ranked fewer tools than
	// it may, which any tool scoring at all may enter.
	sem, lex float64
}

// watchSeed seeds the hashes by which an intentWatch knows tools: two
// names of one hash make a query due when one of them changes, no more.
var watchSeed = maphash.MakeSeed()

func watchHash(name string) uint64 { return maphash.String(watchSeed, name) }

// vectorHash is the hash of a vector's values.
func vectorHash(v []float32) uint64 {
	if len(v) == 0 {
		return 0
	}
	return maphash.Bytes(watchSeed, unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*4))
}

// add watches one search, of terms, whose arms ranked semantic and
// lexical with opts.
func (w *intentWatch) add(terms []string, semantic, lexical []ranked, opts Options) {
	s := watchedSearch{terms: terms, sem: math.Inf(-1)}
	d := depth(opts.TopK)
	if len(semantic) >= d {
		s.sem = semantic[len(semantic)-1].score
	}
	if len(lexical) >= d {
		s.lex = lexical[len(lexical)-1].score
	}
	for _, arm := range [][]ranked{semantic, lexical} {
		for _, r := range arm {
			w.ranked = append(w.ranked, watchHash(r.name))
		}
	}
	w.searches = append(w.searches, s)
}

// seal readies w for look-ups once every search is added.
func (w *intentWatch) seal() {
	slices.Sort(w.ranked)
	w.ranked = slices.Clip(slices.Compact(w.ranked))
	w.searches = slices.Clip(w.searches)
}

// holds reports whether an arm may have ranked the tool.
func (w *intentWatch) holds(name string) bool {
	_, ok := slices.BinarySearch(w.ranked, watchHash(name))
	return ok
}

// moved reports whether a changed tool may move the query's outcome in
// c: one an arm ranked, or one that now scores at or above an arm's last
// rank. docs are the changed tools' places in c's document and rows the
// rows of those with a vector, in the same order; unit is the query's
// unit vector and intentUnits its intents' (nil under BM25); cosines has
// room for len(rows).
func (w *intentWatch) moved(c *Catalog, changed map[string]bool, docs, rows []int, unit []float32, intentUnits [][]float32, cosines []float32, opts Options) bool {
	for name := range changed {
		if w.holds(name) {
			return true
		}
	}
	for j, s := range w.searches {
		u := unit
		if j > 0 {
			u = nil
			if j-1 < len(intentUnits) {
				u = intentUnits[j-1]
			}
		}
		semantic := len(rows) > 0 && u != nil
		if semantic {
			c.dotsRows(cosines, rows, u)
		}
		at := 0 // the next changed row's place in rows
		for _, doc := range docs {
			if c.rowOf[doc] >= 0 {
				if semantic && float64(cosines[at]) >= s.sem {
					return true
				}
				at++
			}
			if bm25 := c.index.scoreOf(doc, s.terms, opts.K1, opts.B); bm25 > 0 && bm25 >= s.lex {
				return true
			}
		}
	}
	return false
}

// heldBytes estimates the heap w holds.
func (w *intentWatch) heldBytes() int64 {
	n := int64(unsafe.Sizeof(*w)) + int64(cap(w.ranked))*8 + int64(cap(w.searches))*int64(unsafe.Sizeof(watchedSearch{}))
	for _, s := range w.searches {
		n += int64(cap(s.terms)) * stringBytes
		for _, t := range s.terms {
			n += int64(len(t))
		}
	}
	return n
}
