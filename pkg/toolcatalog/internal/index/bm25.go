package index

import (
	"bytes"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/text"
)

// Default BM25 and fusion parameters.
const (
	DefaultK1   = 1.2
	DefaultB    = 0.75
	DefaultRRFK = 60
)

// Default hybrid blend, chosen on public tool-retrieval sets (see
// docs/search.md).
const (
	DefaultSemanticWeight     = 0.6
	DefaultMinLexicalEvidence = 1.0
)

// strongLexicalEvidence is the lexical evidence past which hybrid search
// lowers the cosine's share of the blend in proportion.
const strongLexicalEvidence = 2.0

func ptr[T any](v T) *T { return &v }

// Field weights of the BM25 index: a term counts this many times per
// occurrence in each field. A tool's name is its strongest signal; its
// parameters say what it takes, their descriptions add the words a user
// puts in a request ("the city", "a date") but also generic prose, so they
// count for less.
const (
	nameWeight                 = 2.0
	descriptionWeight          = 1.0
	parameterNameWeight        = 1.0
	parameterDescriptionWeight = 0.5
)

// bm25Index is an inverted index over weighted fields of each tool: its
// name (split on _, -, . and camelCase), description, top-level parameter
// names and their descriptions.
type bm25Index struct {
	postings map[string][]posting
	lengths  []float64
	avgLen   float64
	// maxIDF is the idf of a word only one tool holds: the most a single
	// query word can say.
	maxIDF float64
	// docs holds each tool's indexed text and length, so the index of a
	// next version tokenizes only the tools whose text changed (the
	// others' terms are in the postings).
	docs []docTerms
	// norms caches each tool's length term of the BM25 denominator for
	// the k1 and b last searched with (see lengthNorms).
	norms atomic.Pointer[lengthNorms]
}

// lengthNorms are k1·(1 − b + b·length/avgLen) by tool, for one k1 and b.
type lengthNorms struct {
	k1, b float64
	norm  []float64
}

// lengthNorms returns the tools' length norms for k1 and b, computed once
// for the parameters searches use: a search then spends no division on
// them per matching tool.
func (ix *bm25Index) lengthNorms(k1, b float64) []float64 {
	if ln := ix.norms.Load(); ln != nil && ln.k1 == k1 && ln.b == b {
		return ln.norm
	}
	ln := &lengthNorms{k1: k1, b: b, norm: make([]float64, len(ix.lengths))}
	for doc, l := range ix.lengths {
		ln.norm[doc] = k1 * (1 - b + b*l/ix.avgLen)
	}
	ix.norms.Store(ln)
	return ln.norm
}

// posting is one tool holding a term: its position and the term's
// weighted count there (a sum of field weights, exact in a float32).
type posting struct {
	doc  int32
	freq float32
}

// docTerms are one tool's indexed text and the sum of its weighted terms
// (the tool's length). The terms themselves are kept only in the
// postings: a tool's list of them would hold about as much again.
type docTerms struct {
	name, description string
	parameters        []byte
	length            float64
}

// termFreq is a term's weighted count in one tool.
type termFreq struct {
	term string
	freq float64
}

// terms are the index's features of a text: its words (text.Parts)
// without stopwords, stemmed.
func terms(s string) []string { return stems(nil).terms(s) }

// stems remembers the stems of the words met while indexing: a catalog's
// tools share most of their words, and stemming is the dearest step of
// tokenizing. Its tools then share one copy of each term.
type stems map[string]string

// terms are the index terms of s, stemmed through the memo when there
// is one, else through the requests' cache (queryStem).
func (m stems) terms(s string) []string { return m.appendTerms(nil, s) }

// appendTerms appends the index terms of s to out, as terms does.
func (m stems) appendTerms(out []string, s string) []string {
	// The parts are appended to out and replaced there by their terms.
	first := len(out)
	out = text.AppendParts(out, s)
	kept := out[:first]
	for _, w := range out[first:] {
		if text.Stopwords[w] {
			continue
		}
		if m == nil {
			kept = append(kept, queryStem(w))
			continue
		}
		st, ok := m[w]
		if !ok {
			// A term the index keeps holds no part of another tool's
			// text (w may be a substring of s).
			st = strings.Clone(text.Stem(w))
			m[w] = st
		}
		kept = append(kept, st)
	}
	return kept
}

// tokenizer tokenizes tools on one goroutine, remembering what recurs
// across a catalog's tools: the stems of words, and the weighted terms of
// each parameters schema (the tools of one server share many). It counts
// each tool's terms in the same scratch space: tokenizing a large catalog
// then leaves little garbage beside the terms it returns.
type tokenizer struct {
	stems   stems
	schemas map[string][]weighted
	tf      map[string]float64
	words   []string
}

// weighted is a term met in a field of weight w.
type weighted struct {
	term string
	w    float64
}

// maxReusedTerms is the most terms of a tool after which the tokenizer
// counts the next tool's in a new map rather than the one it cleared.
const maxReusedTerms = 512

func newTokenizer() *tokenizer {
	return &tokenizer{stems: stems{}, schemas: map[string][]weighted{}, tf: map[string]float64{}}
}

// termsOf tokenizes a tool's fields, weighted: its indexed text and its
// terms.
func (tk *tokenizer) termsOf(t contract.Tool) (docTerms, []termFreq) {
	if len(tk.tf) > maxReusedTerms {
		tk.tf = map[string]float64{} // a map cleared costs its size
	}
	tf := tk.tf
	clear(tf)
	var length float64 // summed in text order, so alike every time
	add := func(w string, weight float64) {
		tf[w] += weight
		length += weight
	}
	field := func(s string, weight float64) {
		tk.words = tk.stems.appendTerms(tk.words[:0], s)
		for _, w := range tk.words {
			add(w, weight)
		}
	}
	field(t.Name, nameWeight)
	field(t.Description, descriptionWeight)
	params, ok := tk.schemas[string(t.Parameters)]
	if !ok {
		params = tk.parameterTerms(t.Parameters)
		tk.schemas[string(t.Parameters)] = params
	}
	for _, p := range params {
		add(p.term, p.w)
	}
	terms := make([]termFreq, 0, len(tf))
	for w, f := range tf {
		terms = append(terms, termFreq{w, f})
	}
	return docTerms{name: t.Name, description: t.Description, parameters: t.Parameters, length: length}, terms
}

// tool is the text d indexes, as a tool to tokenize again.
func (d *docTerms) tool() contract.Tool {
	return contract.Tool{Name: d.name, Description: d.description, Parameters: d.parameters}
}

// parameterTerms are the weighted terms of a parameters schema, in text
// order.
func (tk *tokenizer) parameterTerms(schema []byte) []weighted {
	var out []weighted
	field := func(s string, weight float64) {
		for _, w := range tk.stems.terms(s) {
			out = append(out, weighted{w, weight})
		}
	}
	for _, p := range contract.Parameters(schema) {
		field(p.Name, parameterNameWeight)
		field(p.Description, parameterDescriptionWeight)
		// The values a parameter takes name what the tool does
		// ("celsius", "pdf").
		for _, v := range p.Enum {
			field(v, parameterDescriptionWeight)
		}
	}
	return out
}

// indexes reports whether d is the tokenization of t's text.
func (d *docTerms) indexes(t contract.Tool) bool {
	return d.name == t.Name && d.description == t.Description && bytes.Equal(d.parameters, t.Parameters)
}

// minTokenized is how many tools a goroutine of tokenize takes at least.
const minTokenized = 256

// tokenize sets docs[i] to the text of tools[i] for each i in todo and
// returns their terms, in todo's order, on as many cores as there are
// chunks of minTokenized tools: tokenizing is most of the time of a
// first load.
func tokenize(tools []contract.Tool, todo []int, docs []docTerms) [][]termFreq {
	terms := make([][]termFreq, len(todo))
	workers := max(1, min(runtime.GOMAXPROCS(0), len(todo)/minTokenized))
	chunk := (len(todo) + workers - 1) / workers
	var wg sync.WaitGroup
	for start := 0; start < len(todo); start += chunk {
		end := min(start+chunk, len(todo))
		wg.Go(func() {
			tk := newTokenizer()
			for k := start; k < end; k++ {
				docs[todo[k]], terms[k] = tk.termsOf(tools[todo[k]])
			}
		})
	}
	wg.Wait()
	return terms
}

// byDoc orders postings by tool.
func byDoc(p posting, doc int32) int { return int(p.doc - doc) }

// mergeFresh puts a term's postings in order of tool: the lent ones,
// first, come in their order in the last version (the same, unless its
// tools were out of order), and its last n, the fresh ones, in order.
func mergeFresh(ps []posting, n int) {
	order := func(a, b posting) int { return byDoc(a, b.doc) }
	lent := ps[:len(ps)-n]
	if !slices.IsSortedFunc(lent, order) {
		slices.SortFunc(ps, order)
		return
	}
	if n == 0 || len(lent) == 0 || lent[len(lent)-1].doc < ps[len(lent)].doc {
		return
	}
	fresh := slices.Clone(ps[len(lent):])
	i, k := len(lent)-1, len(ps)-1
	for j := len(fresh) - 1; j >= 0; k-- {
		if i >= 0 && lent[i].doc > fresh[j].doc {
			ps[k], i = lent[i], i-1
		} else {
			ps[k], j = fresh[j], j-1
		}
	}
}

// newBM25Index indexes tools. prev, the index of an earlier version with
// its tools' positions by name, lends the postings of tools whose text is
// unchanged.
func newBM25Index(tools []contract.Tool, prev *bm25Index, prevAt map[string]int) *bm25Index {
	ix := &bm25Index{lengths: make([]float64, len(tools)), docs: make([]docTerms, len(tools))}
	var todo []int
	// to maps a lending tool's position in prev to its position here.
	var to []int32
	if prev != nil {
		to = make([]int32, len(prev.docs))
		for j := range to {
			to[j] = -1
		}
	}
	for i, t := range tools {
		if j, ok := prevAt[t.Name]; ok && prev != nil && j < len(prev.docs) && to[j] < 0 && prev.docs[j].indexes(t) {
			ix.docs[i], to[j] = prev.docs[j], int32(i)
		} else {
			todo = append(todo, i)
		}
	}
	fresh := tokenize(tools, todo, ix.docs)
	// The postings are laid out in one block, each term's with room for
	// its postings in prev and its fresh ones: one allocation for all,
	// with no more slack than the postings of the tools that went.
	count := map[string]int{}
	all := 0
	for _, terms := range fresh {
		for _, tf := range terms {
			count[tf.term]++
		}
		all += len(terms)
	}
	if prev != nil {
		for _, ps := range prev.postings {
			all += len(ps)
		}
	}
	block := make([]posting, 0, all)
	take := func(n int) []posting {
		var ps []posting
		ps, block = block[len(block):len(block):len(block)+n], block[:len(block)+n]
		return ps
	}
	ix.postings = make(map[string][]posting, len(count))
	if prev != nil {
		for term, ps := range prev.postings {
			lent := take(len(ps) + count[term])
			for _, p := range ps {
				if i := to[p.doc]; i >= 0 {
					lent = append(lent, posting{doc: i, freq: p.freq})
				}
			}
			if len(lent) > 0 || count[term] > 0 {
				ix.postings[term] = lent
			}
		}
	}
	for term, n := range count {
		if _, ok := ix.postings[term]; !ok {
			ix.postings[term] = take(n)
		}
	}
	for k, i := range todo {
		for _, tf := range fresh[k] {
			ix.postings[tf.term] = append(ix.postings[tf.term], posting{doc: int32(i), freq: float32(tf.freq)})
		}
	}
	for term, ps := range ix.postings {
		mergeFresh(ps, count[term])
	}
	var total float64
	for i := range ix.docs {
		ix.lengths[i] = ix.docs[i].length
		total += ix.docs[i].length
	}
	if len(tools) > 0 {
		ix.avgLen = total / float64(len(tools))
		ix.maxIDF = idf(float64(len(tools)), 1)
	}
	return ix
}

// reindex makes ix, in place, the index of tools: ix's own tools in the
// same order, some with new text. Only those are tokenized, and only
// their postings change, where newBM25Index would lay out every term's
// postings again; the result is the same index. It returns the tools
// whose text changed. ix must be no one else's.
func (ix *bm25Index) reindex(tools []contract.Tool) (changed []string) {
	return ix.reindexAt(tools, seq(len(tools)))
}

// reindexAt is reindex when only the tools at the places at may have new
// text: no other tool is looked at.
func (ix *bm25Index) reindexAt(tools []contract.Tool, at []int) (changed []string) {
	var todo []int
	for _, i := range at {
		if !ix.docs[i].indexes(tools[i]) {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	// The old text is tokenized again to find the postings it left.
	old := make([]contract.Tool, len(todo))
	for k, i := range todo {
		old[k] = ix.docs[i].tool()
	}
	oldTerms := tokenize(old, seq(len(old)), make([]docTerms, len(old)))
	terms := tokenize(tools, todo, ix.docs)
	for k, i := range todo {
		doc := int32(i)
		for _, tf := range oldTerms[k] {
			ps := ix.postings[tf.term]
			if at, found := slices.BinarySearchFunc(ps, doc, byDoc); found {
				ps = slices.Delete(ps, at, at+1)
			}
			if len(ps) == 0 {
				delete(ix.postings, tf.term)
			} else {
				ix.postings[tf.term] = ps
			}
		}
		for _, tf := range terms[k] {
			ps := ix.postings[tf.term]
			at, _ := slices.BinarySearchFunc(ps, doc, byDoc)
			ix.postings[tf.term] = slices.Insert(ps, at, posting{doc: doc, freq: float32(tf.freq)})
		}
		ix.lengths[i] = ix.docs[i].length
		changed = append(changed, tools[i].Name)
	}
	var total float64 // summed in order, as newBM25Index does
	for i := range ix.docs {
		total += ix.docs[i].length
	}
	ix.avgLen = total / float64(len(tools))
	ix.norms.Store(nil)
	return changed
}

// scoreBuffers holds the buffers of scores between searches: dense
// scores, each zero, and the matched list, empty.
var scoreBuffers sync.Pool

type scoreBuffer struct {
	score   []float64
	matched []int
}

// scores returns the BM25 score of every tool matching a query term, by
// document: dense, with the documents that matched in order of first
// match. Only the first match of a document adds it to matched. Hand
// both to release when done with them.
func (ix *bm25Index) scores(query string, k1, b float64) (score []float64, matched []int) {
	n := float64(len(ix.lengths))
	seen := map[string]bool{}
	var norms []float64
	for _, w := range terms(query) {
		if seen[w] {
			continue
		}
		seen[w] = true
		ps := ix.postings[w]
		if len(ps) == 0 {
			continue
		}
		if score == nil {
			if buf, ok := scoreBuffers.Get().(*scoreBuffer); ok && cap(buf.score) >= len(ix.lengths) {
				score, matched = buf.score[:len(ix.lengths)], buf.matched[:0]
			} else {
				score = make([]float64, len(ix.lengths))
			}
		}
		w := idf(n, float64(len(ps)))
		if norms == nil {
			norms = ix.lengthNorms(k1, b)
		}
		for _, p := range ps {
			doc, freq := int(p.doc), float64(p.freq)
			norm := freq + norms[doc]
			if score[doc] == 0 {
				matched = append(matched, doc)
			}
			score[doc] += w * freq * (k1 + 1) / norm
		}
	}
	return score, matched
}

// release returns a buffer scores gave, zeroing the scores it set.
func (ix *bm25Index) release(score []float64, matched []int) {
	if score == nil {
		return
	}
	for _, doc := range matched {
		score[doc] = 0
	}
	scoreBuffers.Put(&scoreBuffer{score, matched})
}

// queryTerms are a query's distinct terms.
func (ix *bm25Index) queryTerms(query string) []string {
	var out []string
	for _, w := range terms(query) {
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// scoreOf is one tool's BM25 score for a query's distinct terms.
func (ix *bm25Index) scoreOf(doc int, qterms []string, k1, b float64) float64 {
	n := float64(len(ix.lengths))
	var s float64
	for _, w := range qterms {
		ps := ix.postings[w]
		i, found := slices.BinarySearchFunc(ps, int32(doc), byDoc)
		if !found {
			continue
		}
		f := float64(ps[i].freq)
		norm := f + k1*(1-b+b*ix.lengths[doc]/ix.avgLen)
		s += idf(n, float64(len(ix.postings[w]))) * f * (k1 + 1) / norm
	}
	return s
}

// idf is the BM25 inverse document frequency of a word n tools of which df
// hold.
func idf(n, df float64) float64 { return math.Log(1 + (n-df+0.5)/(df+0.5)) }

// seq is 0, 1, …, n−1.
func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}
