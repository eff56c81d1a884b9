package embedding

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/text"
)

// TermDimensions is the length of a TermsEmbedder's term half: each word
// stem is hashed to one of these places.
const TermDimensions = 512

// Terms are word weights fitted on a corpus of tool texts: how many of
// its tools use each word stem. A stem's weight is its inverse document
// frequency there, so words every tool uses ("get", "data") weigh little
// and the words that tell tools apart weigh much, which a sentence
// encoder trained on general text does not know.
type Terms struct {
	// Recipe says how the terms were fitted; Data names each corpus file
	// and its SHA-256.
	Recipe string            `json:"recipe"`
	Data   map[string]string `json:"data"`
	// Weight is the term half's share of a similarity: a cosine of a
	// TermsEmbedder is (base + Weight·terms) / (1 + Weight).
	Weight float64 `json:"weight"`
	// Docs is the corpus's number of tools; DF each stem's tools.
	Docs int            `json:"docs"`
	DF   map[string]int `json:"df"`

	id string
}

// FitTerms counts the stems of docs, one per tool (its texts), with the
// term half weighing weight.
func FitTerms(docs [][]string, weight float64, recipe string, data map[string]string) (*Terms, error) {
	if weight < 0 || math.IsNaN(weight) || math.IsInf(weight, 0) {
		return nil, fmt.Errorf("term weight %v: want a finite weight of 0 or more", weight)
	}
	t := &Terms{Recipe: recipe, Data: data, Weight: weight, Docs: len(docs), DF: map[string]int{}}
	for _, texts := range docs {
		var seen []string
		for _, s := range texts {
			for _, stem := range Stems(s) {
				if !slices.Contains(seen, stem) {
					seen = append(seen, stem)
					t.DF[stem]++
				}
			}
		}
	}
	// The terms are named by their serialised form (map keys sorted), so
	// terms fitted alike are named alike and other terms otherwise.
	b, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	t.id = hex.EncodeToString(sum[:4])
	return t, nil
}

// ID is the first 8 hex digits of the SHA-256 of the terms' JSON.
func (t *Terms) ID() string { return t.id }

// Stems are the distinct Snowball stems of a text's words and name parts,
// stopwords left out, in order of appearance.
func Stems(s string) []string {
	var out []string
	for _, w := range text.Parts(s) {
		if text.Stopwords[w] {
			continue
		}
		if stem := text.Stem(w); !slices.Contains(out, stem) {
			out = append(out, stem)
		}
	}
	return out
}

// idf is a stem's weight: ln((docs+1)/(df+1)), highest for a stem the
// corpus never saw.
func (t *Terms) idf(stem string) float64 {
	return math.Log(float64(t.Docs+1) / float64(t.DF[stem]+1))
}

// vector writes the text's unit term vector, scaled by scale, to out
// (TermDimensions long): each stem's weight hashed to its place, as the
// lexical embedder hashes its features (addHashed). A text of stopwords
// only writes nothing.
func (t *Terms) vector(s string, scale float64, out []float32) {
	var acc [TermDimensions]float64
	for _, stem := range Stems(s) {
		addHashed(acc[:], stem, t.idf(stem))
	}
	var norm float64
	for _, v := range acc {
		norm += v * v
	}
	if norm == 0 {
		return
	}
	scale /= math.Sqrt(norm)
	for i, v := range acc {
		out[i] = float32(v * scale)
	}
}

// TermsEmbedder is a candidate model: Base's vector beside the text's
// term vector, each a unit vector scaled by the square root of its
// share, so that a cosine is (base + w·terms) / (1 + w). It is measured
// by the retrieval benchmark (docs/search.md, "A candidate model"); no
// catalog embeds with it. Both fields are required.
type TermsEmbedder struct {
	Base  Embedder
	Terms *Terms
}

var _ Embedder = TermsEmbedder{}

// Model names Base's model and the terms.
func (e TermsEmbedder) Model() string { return e.Base.Model() + "-terms-" + e.Terms.ID() }

// Dimensions is Base's, then TermDimensions.
func (e TermsEmbedder) Dimensions() int { return e.Base.Dimensions() + TermDimensions }

// Embed returns one unit vector per text.
func (e TermsEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	base, err := e.Base.Embed(ctx, texts)
	if err != nil {
		return nil, err
	}
	w := e.Terms.Weight
	baseScale, termScale := 1/math.Sqrt(1+w), math.Sqrt(w/(1+w))
	out := make([][]float32, len(texts))
	for i, b := range base {
		v := make([]float32, len(b)+TermDimensions)
		var n float64
		for j, x := range b {
			v[j] = x
			n += float64(x) * float64(x)
		}
		if n == 0 || math.IsNaN(n) || math.IsInf(n, 0) {
			return nil, fmt.Errorf("%s: text %d embeds to a vector of norm² %v", e.Base.Model(), i, n)
		}
		// Base vectors are unit length, or scaled to it here.
		scale := float32(baseScale / math.Sqrt(n))
		for j := range b {
			v[j] *= scale
		}
		e.Terms.vector(texts[i], termScale, v[len(b):])
		out[i] = unit(v)
	}
	return out, nil
}

// unit scales v to unit length in place: a text of stopwords only has no
// term half, and its base half alone is scaled up to it.
func unit(v []float32) []float32 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	inv := float32(1 / math.Sqrt(n))
	for i := range v {
		v[i] *= inv
	}
	return v
}
