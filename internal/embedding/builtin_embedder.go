package embedding

import (
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/text"

	"context"
	"fmt"
	"hash/fnv"
	"math"
	"strings"
)

const (
	// BuiltinLexicalModel identifies the builtin lexical embedder's vectors.
	BuiltinLexicalModel = "builtin-hashed-ngrams-v1"
	// BuiltinLexicalDimensions is its vector length.
	BuiltinLexicalDimensions = 512

	wordWeight   = 1.0
	bigramWeight = 0.5
	// charWeight is the total weight of a word's character n-grams.
	charWeight = 0.7
)

// LexicalEmbedder is a fast lexical embedder, the builtin one before the
// sentence encoder and kept for tests and benchmarks: it hashes words, word
// pairs and character 3- to 5-grams into a fixed-length vector (the hashing
// trick), then L2-normalises it. Texts sharing words or word parts get a
// higher cosine similarity than unrelated texts; it knows no synonyms. It
// is deterministic across runs, processes and platforms, needs no network
// and no key, and handles any Unicode text.
type LexicalEmbedder struct{}

var _ Embedder = LexicalEmbedder{}

// Model returns BuiltinLexicalModel.
func (LexicalEmbedder) Model() string { return BuiltinLexicalModel }

// Dimensions returns BuiltinLexicalDimensions.
func (LexicalEmbedder) Dimensions() int { return BuiltinLexicalDimensions }

// Embed returns one normalised vector per text; a blank text is an error.
func (e LexicalEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if strings.TrimSpace(t) == "" {
			return nil, &Error{Kind: KindInvalidInput, Provider: "builtin embedder", Model: BuiltinLexicalModel, Err: fmt.Errorf("text %d is empty", i)}
		}
		out[i] = embedLexical(t)
	}
	return out, nil
}

func embedLexical(s string) []float32 {
	acc := make([]float64, BuiltinLexicalDimensions)
	add := func(feature string, weight float64) { addHashed(acc, feature, weight) }

	var content []string
	for _, w := range text.Words(s) {
		if !text.Stopwords[w] {
			content = append(content, stripPlural(w))
		}
	}
	if len(content) == 0 {
		// Only stopwords: better to use them than to return nothing.
		for _, w := range text.Words(s) {
			content = append(content, stripPlural(w))
		}
	}
	for i, w := range content {
		add("w:"+w, wordWeight)
		if i > 0 {
			add("b:"+content[i-1]+" "+w, bigramWeight)
		}
		grams := charNgrams(w)
		gw := charWeight / math.Sqrt(float64(len(grams)))
		for _, g := range grams {
			add("c:"+g, gw)
		}
	}

	var norm float64
	for _, x := range acc {
		// The conversion forbids fusing into an FMA, whose rounding
		// differs, so every platform computes the same bytes.
		norm += float64(x * x)
	}
	norm = math.Sqrt(norm)
	v := make([]float32, len(acc))
	if norm == 0 {
		return v
	}
	for i, x := range acc {
		v[i] = float32(x / norm)
	}
	return v
}

// addHashed adds weight to acc at the place the feature's FNV-1a hash
// picks (the hashing trick), with the sign its top bit picks so that
// collisions cancel on average instead of piling up.
func addHashed(acc []float64, feature string, weight float64) {
	h := fnv.New64a()
	h.Write([]byte(feature))
	sum := h.Sum64()
	if sum>>63 == 1 {
		weight = -weight
	}
	acc[sum%uint64(len(acc))] += weight
}

// charNgrams returns the 3- to 5-grams of a word wrapped in boundary marks;
// a word shorter than three runes yields itself.
func charNgrams(w string) []string {
	r := []rune("<" + w + ">")
	if len(r) < 3 {
		return []string{string(r)}
	}
	var out []string
	for n := 3; n <= 5; n++ {
		for i := 0; i+n <= len(r); i++ {
			out = append(out, string(r[i:i+n]))
		}
	}
	return out
}

// stripPlural removes a plural "s" so that "issues" and "issue" share a
// feature. The lexical model keeps this rule, not text.Stem: its vectors
// must not change under its model name.
func stripPlural(w string) string {
	r := []rune(w)
	if len(r) > 3 && r[len(r)-1] == 's' && r[len(r)-2] != 's' && r[len(r)-2] != 'u' && r[len(r)-2] != 'i' {
		return string(r[:len(r)-1])
	}
	return w
}
