package embedding

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync/atomic"

	consumeropenai "github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/openai"
)

// DefaultBatchSize is the number of texts per embeddings request when a
// configuration names none.
const DefaultBatchSize = 64

// OpenAIEmbedderConfig configures an OpenAI-compatible /v1/embeddings client.
type OpenAIEmbedderConfig struct {
	OpenAIConfig
	// Model is the embedding model id; required.
	Model string
	// Dimensions, when set, is sent with each request and every returned
	// vector must have this length.
	Dimensions int
	// BatchSize is the number of texts per request; DefaultBatchSize when zero.
	BatchSize int
}

// OpenAIEmbedder embeds texts through an OpenAI-compatible endpoint.
type OpenAIEmbedder struct {
	cfg      OpenAIEmbedderConfig
	observed atomic.Int64
}

var _ Embedder = (*OpenAIEmbedder)(nil)

// NewOpenAIEmbedder validates the configuration and returns an embedder.
func NewOpenAIEmbedder(cfg OpenAIEmbedderConfig) (*OpenAIEmbedder, error) {
	if cfg.Model == "" {
		return nil, fmt.Errorf("embedding model is required")
	}
	if cfg.Dimensions < 0 || cfg.BatchSize < 0 {
		return nil, fmt.Errorf("dimensions and batch size must not be negative")
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if err := cfg.checkBaseURL(); err != nil {
		return nil, err
	}
	return &OpenAIEmbedder{cfg: cfg}, nil
}

// Model returns the configured model id.
func (e *OpenAIEmbedder) Model() string { return e.cfg.Model }

// Dimensions returns the configured length, or the observed one.
func (e *OpenAIEmbedder) Dimensions() int {
	if e.cfg.Dimensions > 0 {
		return e.cfg.Dimensions
	}
	return int(e.observed.Load())
}

func (e *OpenAIEmbedder) provider() string { return "openai embeddings at " + e.cfg.baseURL() }

// Embed sends the texts in batches of BatchSize, one request per batch, and
// returns the vectors in input order.
func (e *OpenAIEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	for i, t := range texts {
		if strings.TrimSpace(t) == "" {
			return nil, &Error{Kind: KindInvalidInput, Provider: e.provider(), Model: e.cfg.Model, Err: fmt.Errorf("text %d is empty", i)}
		}
	}
	out := make([][]float32, len(texts))
	for start := 0; start < len(texts); start += e.cfg.BatchSize {
		end := min(start+e.cfg.BatchSize, len(texts))
		vecs, err := e.embedBatch(ctx, texts[start:end])
		if err != nil {
			return nil, fmt.Errorf("embedding texts %d to %d of %d: %w", start+1, end, len(texts), err)
		}
		copy(out[start:end], vecs)
	}
	return out, nil
}

func (e *OpenAIEmbedder) embedBatch(ctx context.Context, batch []string) ([][]float32, error) {
	req := consumeropenai.NewEmbeddingsRequest(e.cfg.Model, e.cfg.Dimensions, batch)
	var vecs [][]float32
	err := e.cfg.call(ctx, "openai-embeddings", e.provider(), e.cfg.Model, func(ctx context.Context) error {
		var resp consumeropenai.EmbeddingsResponse
		if err := e.cfg.post(ctx, "/embeddings", req, &resp, consumeropenai.MaxEmbeddingsResponseBytes(len(batch))); err != nil {
			return err
		}
		var err error
		vecs, err = e.decode(&resp, len(batch))
		return err
	})
	return vecs, err
}

// decode maps the response's items back to the batch by their index, never
// by arrival order, and checks every vector.
func (e *OpenAIEmbedder) decode(resp *consumeropenai.EmbeddingsResponse, n int) ([][]float32, error) {
	malformed := func(format string, args ...any) error {
		return &Error{Kind: KindMalformed, Provider: e.provider(), Model: e.cfg.Model, Err: fmt.Errorf(format, args...)}
	}
	if resp.Data == nil {
		return nil, malformed("response has no data list")
	}
	if len(*resp.Data) != n {
		return nil, malformed("response has %d embeddings for %d inputs", len(*resp.Data), n)
	}
	want := e.Dimensions()
	out := make([][]float32, n)
	for _, item := range *resp.Data {
		if item.Index == nil || *item.Index < 0 || *item.Index >= int64(n) {
			return nil, malformed("embedding index %s is out of range for %d inputs", indexOf(item.Index), n)
		}
		i := *item.Index
		if out[i] != nil {
			return nil, malformed("embedding index %d appears twice", i)
		}
		if len(item.Embedding) == 0 {
			return nil, malformed("embedding %d is empty", i)
		}
		if want == 0 {
			want = len(item.Embedding)
		}
		if len(item.Embedding) != want {
			return nil, &Error{Kind: KindDimensionMismatch, Provider: e.provider(), Model: e.cfg.Model,
				Err: fmt.Errorf("embedding %d has %d dimensions, expected %d: check the model and embedding.dimensions", i, len(item.Embedding), want)}
		}
		for _, x := range item.Embedding {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return nil, malformed("embedding %d has a non-finite value", i)
			}
		}
		out[i] = item.Embedding
	}
	if e.cfg.Dimensions == 0 {
		e.observed.CompareAndSwap(0, int64(want))
	}
	return out, nil
}

func indexOf(i *int64) string {
	if i == nil {
		return "(none)"
	}
	return fmt.Sprint(*i)
}

// Identity names what decides the vectors the embedder returns: its
// endpoint, model and configured dimensions. API keys play no part.
func (e *OpenAIEmbedder) Identity() string {
	return fmt.Sprintf("openai-embeddings\n%s %s %d %s", e.cfg.baseURL(), e.cfg.Model, e.cfg.Dimensions, e.cfg.keyIdentity())
}
