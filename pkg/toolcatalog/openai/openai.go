// Package openai embeds search queries through an OpenAI-compatible
// /v1/embeddings endpoint (OpenAI, Azure, Ollama, vLLM, TEI, LiteLLM), for
// catalogs whose embedding provider is openai. It is a package of its own
// so that only consumers who need it carry the OpenAI SDK.
package openai

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// Config says where and how to embed; use the catalog's model and
// dimensions (Document.Embedding) so queries and tools compare.
type Config struct {
	// BaseURL is the API root, e.g. https://api.openai.com/v1 (the SDK's
	// default when empty).
	BaseURL string
	// APIKey is sent as a bearer token; empty sends none.
	APIKey string
	// Model and Dimensions are the catalog's.
	Model      string
	Dimensions int
	// Timeout bounds one request (30 s when zero); the SDK retries 429
	// and 5xx answers twice.
	Timeout time.Duration
}

// Embedder embeds queries with an OpenAI-compatible endpoint.
type Embedder struct {
	cfg    Config
	client openai.Client
}

// New returns an Embedder for cfg.
func New(cfg Config) (*Embedder, error) {
	if cfg.Model == "" {
		return nil, errors.New("openai: the catalog's embedding model is required")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	opts := []option.RequestOption{option.WithRequestTimeout(cfg.Timeout), option.WithAPIKey(cfg.APIKey)}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	return &Embedder{cfg: cfg, client: openai.NewClient(opts...)}, nil
}

// Model returns the configured model.
func (e *Embedder) Model() string { return e.cfg.Model }

// Params is the embeddings request for texts: float vectors of the model,
// of the given length when dimensions > 0. The operator sends the same.
func Params(model string, dimensions int, texts []string) openai.EmbeddingNewParams {
	params := openai.EmbeddingNewParams{
		Model:          model,
		Input:          openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts},
		EncodingFormat: openai.EmbeddingNewParamsEncodingFormatFloat,
	}
	if dimensions > 0 {
		params.Dimensions = openai.Int(int64(dimensions))
	}
	return params
}

// EmbeddingsResponse is what is read of an embeddings response: each
// vector decoded straight into float32, not through the SDK's generic
// response type (which holds every number as float64 and a parse tree
// besides: many times the memory, for thousands of vectors). Pointers tell
// a missing field from a zero one.
type EmbeddingsResponse struct {
	Data *[]struct {
		Index     *int64    `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
}

// Embed returns one vector per text, in input order.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	var resp EmbeddingsResponse
	if _, err := e.client.Embeddings.New(ctx, Params(e.cfg.Model, e.cfg.Dimensions, texts), option.WithResponseBodyInto(&resp)); err != nil {
		return nil, fmt.Errorf("openai: embedding %d texts with %s: %w", len(texts), e.cfg.Model, err)
	}
	if resp.Data == nil {
		return nil, errors.New("openai: the response has no data list")
	}
	if len(*resp.Data) != len(texts) {
		return nil, fmt.Errorf("openai: %d embeddings for %d texts", len(*resp.Data), len(texts))
	}
	out := make([][]float32, len(texts))
	for _, d := range *resp.Data {
		if d.Index == nil || *d.Index < 0 || int(*d.Index) >= len(texts) || out[*d.Index] != nil {
			return nil, fmt.Errorf("openai: an embedding index is missing, out of range or repeated")
		}
		if e.cfg.Dimensions > 0 && len(d.Embedding) != e.cfg.Dimensions {
			return nil, fmt.Errorf("openai: embedding %d has %d dimensions, want %d", *d.Index, len(d.Embedding), e.cfg.Dimensions)
		}
		out[*d.Index] = d.Embedding
	}
	return out, nil
}
