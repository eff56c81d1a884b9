package toolcatalog

import (
	"math"
	"time"

	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
)

func sqrt(x float64) float64 { return math.Sqrt(x) }

// BuiltinEmbedder embeds queries with the operator's builtin offline model
// (Universal Sentence Encoder lite), for catalogs whose embedding provider
// is builtin.
func BuiltinEmbedder() QueryEmbedder { return embedding.SentenceEmbedder{} }

// OpenAIEmbedder embeds queries through an OpenAI-compatible endpoint, for
// catalogs whose provider is openai; use the catalog's model and
// dimensions (Document.Embedding).
func OpenAIEmbedder(baseURL, apiKey, model string, dimensions int, timeout time.Duration) (QueryEmbedder, error) {
	return embedding.NewOpenAIEmbedder(embedding.OpenAIEmbedderConfig{
		OpenAIConfig: embedding.OpenAIConfig{BaseURL: baseURL, APIKey: embedding.Secret(apiKey), Timeout: timeout},
		Model:        model, Dimensions: dimensions,
	})
}
