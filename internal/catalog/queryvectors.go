package catalog

import (
	"context"
	"slices"
	"sync"

	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
)

// MaxKeptQueryVectors bounds the query vectors kept per catalog between
// versions.
const MaxKeptQueryVectors = 4096

// QueryVectors keeps a catalog's most recently embedded query vectors by
// text, for one model, so grading a new version embeds only the queries
// neither its Grader holds nor a pass embedded. When full, the oldest
// vector makes room. The zero value is ready to use and safe for
// concurrent use.
type QueryVectors struct {
	// Limit bounds the vectors kept: MaxKeptQueryVectors when 0, none
	// when negative (a grading of one version that needs them all).
	Limit int

	mu     sync.Mutex
	model  string
	byText map[string][]float32
	// order holds the kept texts, oldest first.
	order []string
}

// Add keeps vectors of model, dropping the oldest beyond the limit.
// Vectors of another model replace all that are
// kept.
func (q *QueryVectors) Add(model string, texts []string, vecs [][]float32) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.model != model || q.byText == nil {
		q.model, q.byText, q.order = model, map[string][]float32{}, nil
	}
	for i, t := range texts {
		if _, ok := q.byText[t]; !ok {
			q.order = append(q.order, t)
		}
		q.byText[t] = vecs[i]
	}
	limit := q.Limit
	if limit == 0 {
		limit = MaxKeptQueryVectors
	}
	if over := len(q.order) - limit; over > 0 && limit > 0 {
		for _, t := range q.order[:over] {
			delete(q.byText, t)
		}
		q.order = slices.Clone(q.order[over:])
	}
}

// Take returns the kept vectors of model for texts, no longer keeping
// them, and the texts it lacks (each once). The grading that takes them
// keeps them with its query sets for as long as it needs them, so they are
// not held twice, nor held once the grading has let them go.
func (q *QueryVectors) Take(model string, texts []string) (map[string][]float32, []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	found := map[string][]float32{}
	var missing []string
	asked := map[string]bool{}
	for _, t := range texts {
		if v, ok := q.byText[t]; ok && q.model == model {
			found[t] = v
			delete(q.byText, t)
		} else if _, ok := found[t]; !ok && !asked[t] {
			asked[t] = true
			missing = append(missing, t)
		}
	}
	if len(found) > 0 {
		q.order = slices.DeleteFunc(q.order, func(t string) bool { _, ok := found[t]; return ok })
	}
	return found, missing
}

// Len is how many vectors are kept.
func (q *QueryVectors) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.byText)
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
