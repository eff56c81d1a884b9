package embedding

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// Centroid returns the mean of the vectors, L2-normalised: the vector that
// represents a tool built from the embeddings of its queries. An empty set,
// vectors of different lengths, non-finite values or a zero mean are errors,
// never a NaN vector.
func Centroid(vectors [][]float32) ([]float32, error) {
	if len(vectors) == 0 {
		return nil, errors.New("centroid of an empty set of vectors")
	}
	dims := len(vectors[0])
	if dims == 0 {
		return nil, errors.New("centroid of zero-length vectors")
	}
	// Accumulate in float64 so the result does not depend on rounding
	// order more than necessary.
	sum := make([]float64, dims)
	for i, v := range vectors {
		if len(v) != dims {
			return nil, fmt.Errorf("vector %d has %d dimensions, want %d", i, len(v), dims)
		}
		for j, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return nil, fmt.Errorf("vector %d has a non-finite value at %d", i, j)
			}
			sum[j] += float64(x)
		}
	}
	var norm float64
	for _, s := range sum {
		norm += s * s
	}
	norm = math.Sqrt(norm)
	if norm == 0 {
		return nil, errors.New("centroid is the zero vector: the vectors cancel out or are all zero")
	}
	out := make([]float32, dims)
	for j, s := range sum {
		out[j] = float32(s / norm)
	}
	return out, nil
}

// Cosine returns the cosine similarity of two vectors of equal length, or 0
// when either is zero.
func Cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / (math.Sqrt(na) * math.Sqrt(nb))
}

// QueryCentroids embeds the queries of several tools in one Embed call (so
// the embedder batches across tools) and returns one centroid per query set,
// in order. A set that yields no centroid (empty, or vectors that cancel
// out) gets an error in errs at its index and a nil centroid; err is set
// when the embedding call itself failed, and then no centroid is returned.
func QueryCentroids(ctx context.Context, e Embedder, sets [][]string) (centroids [][]float32, errs []error, err error) {
	var texts []string
	for _, s := range sets {
		texts = append(texts, s...)
	}
	var vecs [][]float32
	if len(texts) > 0 {
		if vecs, err = e.Embed(ctx, texts); err != nil {
			return nil, nil, err
		}
	}
	centroids = make([][]float32, len(sets))
	errs = make([]error, len(sets))
	offset := 0
	for i, s := range sets {
		centroids[i], errs[i] = Centroid(vecs[offset : offset+len(s)])
		offset += len(s)
	}
	return centroids, errs, nil
}
