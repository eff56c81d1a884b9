package embedding

import (
	"context"
	"errors"

	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/builtin"
)

// BuiltinModel identifies the builtin embedder's vectors: Universal
// Sentence Encoder lite with float16 weights.
const BuiltinModel = builtin.Model

// BuiltinDimensions is the builtin embedder's vector length.
const BuiltinDimensions = builtin.Dimensions

// SentenceEmbedder is the builtin embedder of the operator: the consumers'
// builtin.Embedder (so both embed with the very same code), with failures
// classified like every provider's.
type SentenceEmbedder struct{}

var _ Embedder = SentenceEmbedder{}

// Model returns BuiltinModel.
func (SentenceEmbedder) Model() string { return BuiltinModel }

// Dimensions returns BuiltinDimensions.
func (SentenceEmbedder) Dimensions() int { return BuiltinDimensions }

// Embed returns one unit vector per text; a blank text is an error.
func (SentenceEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out, err := builtin.Embedder{}.Embed(ctx, texts)
	if err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
		return nil, &Error{Kind: KindInvalidInput, Provider: "builtin embedder", Model: BuiltinModel, Err: err}
	}
	return out, err
}
