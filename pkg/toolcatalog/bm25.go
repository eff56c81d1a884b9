package toolcatalog

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
	// docs holds each tool's weighted terms, so the index of a next
	// version tokenizes only the tools whose text changed.
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

// docTerms are one tool's indexed text, its weighted terms and their sum
// (the tool's length).
type docTerms struct {
	name, description string
	parameters        []byte
	terms             []termFreq
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
// is one.
func (m stems) terms(s string) []string {
	var out []string
	for _, w := range text.Parts(s) {
		if text.Stopwords[w] {
			continue
		}
		st, ok := m[w]
		if !ok {
			st = text.Stem(w)
			if m != nil {
				// A term the index keeps holds no part of another
				// tool's text (w may be a substring of s).
				st = strings.Clone(st)
				m[w] = st
			}
		}
		out = append(out, st)
	}
	return out
}

// tokenizer tokenizes tools on one goroutine, remembering what recurs
// across a catalog's tools: the stems of words, and the weighted terms of
// each parameters schema (the tools of one server share many).
type tokenizer struct {
	stems   stems
	schemas map[string][]weighted
}

// weighted is a term met in a field of weight w.
type weighted struct {
	term string
	w    float64
}

func newTokenizer() *tokenizer { return &tokenizer{stems: stems{}, schemas: map[string][]weighted{}} }

// termsOf tokenizes a tool's fields, weighted.
func (tk *tokenizer) termsOf(t contract.Tool) docTerms {
	tf := map[string]float64{}
	var length float64 // summed in text order, so alike every time
	add := func(w string, weight float64) {
		tf[w] += weight
		length += weight
	}
	field := func(s string, weight float64) {
		for _, w := range tk.stems.terms(s) {
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
	d := docTerms{name: t.Name, description: t.Description, parameters: t.Parameters, terms: make([]termFreq, 0, len(tf)), length: length}
	for w, f := range tf {
		d.terms = append(d.terms, termFreq{w, f})
	}
	return d
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

// tokenize sets docs[i] to the terms of tools[i] for each i in todo, on
// as many cores as there are chunks of minTokenized tools: tokenizing is
// most of the time of a first load.
func tokenize(tools []contract.Tool, todo []int, docs []docTerms) {
	workers := max(1, min(runtime.GOMAXPROCS(0), len(todo)/minTokenized))
	chunk := (len(todo) + workers - 1) / workers
	var wg sync.WaitGroup
	for start := 0; start < len(todo); start += chunk {
		part := todo[start:min(start+chunk, len(todo))]
		wg.Go(func() {
			tk := newTokenizer()
			for _, i := range part {
				docs[i] = tk.termsOf(tools[i])
			}
		})
	}
	wg.Wait()
}

// newBM25Index indexes tools. prev, the index of an earlier version with
// its tools' positions by name, lends the terms of tools whose text is
// unchanged.
func newBM25Index(tools []contract.Tool, prev *bm25Index, prevAt map[string]int) *bm25Index {
	ix := &bm25Index{lengths: make([]float64, len(tools)), docs: make([]docTerms, len(tools))}
	var todo []int
	for i, t := range tools {
		if j, ok := prevAt[t.Name]; ok && prev != nil && j < len(prev.docs) && prev.docs[j].indexes(t) {
			ix.docs[i] = prev.docs[j]
		} else {
			todo = append(todo, i)
		}
	}
	tokenize(tools, todo, ix.docs)
	var total float64
	// Each term's postings are counted first, then laid out in one
	// block: no slack from growing lists, one allocation for all.
	count := map[string]int{}
	all := 0
	for i := range tools {
		for _, tf := range ix.docs[i].terms {
			count[tf.term]++
		}
		all += len(ix.docs[i].terms)
		ix.lengths[i] = ix.docs[i].length
		total += ix.docs[i].length
	}
	block := make([]posting, 0, all)
	ix.postings = make(map[string][]posting, len(count))
	for i := range ix.docs {
		for _, tf := range ix.docs[i].terms {
			ps, ok := ix.postings[tf.term]
			if !ok {
				n := count[tf.term]
				ps, block = block[len(block):len(block):len(block)+n], block[:len(block)+n]
			}
			ix.postings[tf.term] = append(ps, posting{doc: int32(i), freq: float32(tf.freq)})
		}
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
	var todo []int
	for i, t := range tools {
		if !ix.docs[i].indexes(t) {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	old := make([][]termFreq, len(todo))
	for k, i := range todo {
		old[k] = ix.docs[i].terms
	}
	tokenize(tools, todo, ix.docs)
	byDoc := func(p posting, doc int32) int { return int(p.doc - doc) }
	for k, i := range todo {
		doc := int32(i)
		for _, tf := range old[k] {
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
		for _, tf := range ix.docs[i].terms {
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
	d := ix.docs[doc].terms
	n := float64(len(ix.lengths))
	var s float64
	for _, w := range qterms {
		i := slices.IndexFunc(d, func(tf termFreq) bool { return tf.term == w })
		if i < 0 {
			continue
		}
		f := d[i].freq
		norm := f + k1*(1-b+b*ix.lengths[doc]/ix.avgLen)
		s += idf(n, float64(len(ix.postings[w]))) * f * (k1 + 1) / norm
	}
	return s
}

// idf is the BM25 inverse document frequency of a word n tools of which df
// hold.
func idf(n, df float64) float64 { return math.Log(1 + (n-df+0.5)/(df+0.5)) }
