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

// bm25Index is an inverted index over tool names (split on _, -, . and
// camelCase, counted twice: a name is the strongest signal), descriptions
// and top-level parameter names.
type bm25Index struct {
	postings map[string][]posting
	lengths  []float64
	avgLen   float64
}

type posting struct {
	doc  int
	freq float64
}

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
		name := terms(t.Name)
		for _, w := range append(append(name, name...), terms(t.Description)...) {
			tf[w]++
		}
		for _, p := range contract.ParameterNames(t.Parameters) {
			for _, w := range terms(p) {
				tf[w]++
			}
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
		df := float64(len(ps))
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for _, p := range ps {
			norm := p.freq + k1*(1-b+b*ix.lengths[p.doc]/ix.avgLen)
			out[p.doc] += idf * p.freq * (k1 + 1) / norm
		}
	}
	return out
}
