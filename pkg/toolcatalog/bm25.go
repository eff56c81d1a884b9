package toolcatalog

import (
	"math"

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
	DefaultMinLexicalEvidence = 1.5
)

// strongLexicalEvidence is the lexical evidence past which hybrid search
// lowers the cosine's share of the blend in proportion.
const strongLexicalEvidence = 3.0

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
}

type posting struct {
	doc  int
	freq float64
}

// terms are the index's features of a text: its words without stopwords,
// stemmed.
func terms(s string) []string {
	var out []string
	for _, w := range text.Words(s) {
		if !text.Stopwords[w] {
			out = append(out, text.Stem(w))
		}
	}
	return out
}

func newBM25Index(tools []contract.Tool) *bm25Index {
	ix := &bm25Index{postings: map[string][]posting{}, lengths: make([]float64, len(tools))}
	var total float64
	for i, t := range tools {
		tf := map[string]float64{}
		field := func(s string, weight float64) {
			for _, w := range terms(s) {
				tf[w] += weight
			}
		}
		field(t.Name, nameWeight)
		field(t.Description, descriptionWeight)
		for _, p := range contract.Parameters(t.Parameters) {
			field(p.Name, parameterNameWeight)
			field(p.Description, parameterDescriptionWeight)
		}
		var n float64
		for w, f := range tf {
			ix.postings[w] = append(ix.postings[w], posting{doc: i, freq: f})
			n += f
		}
		ix.lengths[i] = n
		total += n
	}
	if len(tools) > 0 {
		ix.avgLen = total / float64(len(tools))
		ix.maxIDF = idf(float64(len(tools)), 1)
	}
	return ix
}

// scores returns the BM25 score of every tool matching a query term.
func (ix *bm25Index) scores(query string, k1, b float64) map[int]float64 {
	out := map[int]float64{}
	n := float64(len(ix.lengths))
	seen := map[string]bool{}
	for _, w := range terms(query) {
		if seen[w] {
			continue
		}
		seen[w] = true
		ps := ix.postings[w]
		if len(ps) == 0 {
			continue
		}
		w := idf(n, float64(len(ps)))
		for _, p := range ps {
			norm := p.freq + k1*(1-b+b*ix.lengths[p.doc]/ix.avgLen)
			out[p.doc] += w * p.freq * (k1 + 1) / norm
		}
	}
	return out
}

// idf is the BM25 inverse document frequency of a word n tools of which df
// hold.
func idf(n, df float64) float64 { return math.Log(1 + (n-df+0.5)/(df+0.5)) }
