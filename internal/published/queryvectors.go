package published

import (
	"context"
	"sync"

	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
)

// MaxKeptQueryVectors bounds the query vectors kept per catalog between
// versions.
const MaxKeptQueryVectors = 4096

// QueryVectors keeps a catalog's query vectors by text, for one model, so
// grading a new version embeds only the queries it has not seen. The zero
// value is ready to use and safe for concurrent use.
type QueryVectors struct {
	mu     sync.Mutex
	model  string
	byText map[string][]float32
}

// Add keeps vectors of model while there is room. Vectors of another
// model replace all that are kept.
func (q *QueryVectors) Add(model string, texts []string, vecs [][]float32) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.model != model || q.byText == nil {
		q.model, q.byText = model, map[string][]float32{}
	}
	for i, t := range texts {
		if len(q.byText) >= MaxKeptQueryVectors {
			return
		}
		q.byText[t] = vecs[i]
	}
}

// Lookup returns the kept vectors of model for texts, and the texts it
// lacks (each once).
func (q *QueryVectors) Lookup(model string, texts []string) (map[string][]float32, []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	found := map[string][]float32{}
	var missing []string
	asked := map[string]bool{}
	for _, t := range texts {
		if v, ok := q.byText[t]; ok && q.model == model {
			found[t] = v
		} else if !asked[t] {
			asked[t] = true
			missing = append(missing, t)
		}
	}
	return found, missing
}

// Retain keeps only the vectors of texts.
func (q *QueryVectors) Retain(texts []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	keep := make(map[string][]float32, len(texts))
	for _, t := range texts {
		if v, ok := q.byText[t]; ok {
			keep[t] = v
		}
	}
	q.byText = keep
}

// Recording returns emb keeping the query vectors it computes in q, so
// grading the version they go into embeds nothing again.
func (q *QueryVectors) Recording(emb embedding.Embedder) embedding.Embedder {
	return recordingEmbedder{Embedder: emb, keep: q}
}

type recordingEmbedder struct {
	embedding.Embedder
	keep *QueryVectors
}

func (e recordingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	vecs, err := e.Embedder.Embed(ctx, texts)
	if err == nil {
		e.keep.Add(e.Model(), texts, vecs)
	}
	return vecs, err
}
