package embedding

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/toolcatalog/tool-catalog-operator/internal/embedding/use"
)

// BuiltinModel identifies the builtin embedder's vectors: Universal
// Sentence Encoder lite with float16 weights.
const BuiltinModel = use.ModelID

// BuiltinDimensions is the builtin embedder's vector length.
const BuiltinDimensions = use.Dimensions

var loadSentenceModel = sync.OnceValues(use.Load)

// SentenceEmbedder is the builtin embedder: Universal Sentence Encoder lite,
// a small transformer sentence encoder run in pure Go from weights compiled
// into the binary. It relates paraphrases ("is it going to rain tomorrow"
// and "weather forecast") with no network, no key and no native library.
// Texts are embedded in parallel, one per CPU.
type SentenceEmbedder struct{}

var _ Embedder = SentenceEmbedder{}

// Model returns BuiltinModel.
func (SentenceEmbedder) Model() string { return BuiltinModel }

// Dimensions returns BuiltinDimensions.
func (SentenceEmbedder) Dimensions() int { return BuiltinDimensions }

// Embed returns one unit vector per text; a blank text is an error.
func (SentenceEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	for i, t := range texts {
		if strings.TrimSpace(t) == "" {
			return nil, &Error{Kind: KindInvalidInput, Provider: "builtin embedder", Model: BuiltinModel, Err: fmt.Errorf("text %d is empty", i)}
		}
	}
	m, err := loadSentenceModel()
	if err != nil {
		return nil, err
	}
	out := make([][]float32, len(texts))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, t := range texts {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			v, err := m.Embed(t)
			if err != nil {
				return &Error{Kind: KindInvalidInput, Provider: "builtin embedder", Model: BuiltinModel, Err: fmt.Errorf("text %d: %w", i, err)}
			}
			out[i] = v
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}
