// Package builtin embeds search queries with the operator's builtin offline
// model (Universal Sentence Encoder lite, pure Go, weights compiled in), for
// catalogs whose embedding provider is builtin. It is a package of its own
// so that only consumers who want the model (about 14 MB of weights) carry
// it: pass Embedder{} as toolcatalog.Options.Embedder.
package builtin

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/builtin/use"
)

// Model identifies the builtin model's vectors in a catalog document.
const Model = use.ModelID

// Dimensions is the builtin model's vector length.
const Dimensions = use.Dimensions

// ErrEmptyText is returned for a blank text: it has no meaning to embed.
var ErrEmptyText = errors.New("text is empty")

var load = sync.OnceValues(use.Load)

// Embedder is the builtin sentence model. It relates paraphrases ("is it
// going to rain tomorrow" and "weather forecast") with no network, no key
// and no native library. Texts are embedded in parallel, one per CPU; the
// weights are loaded once per process, on first use.
type Embedder struct{}

// Model returns Model.
func (Embedder) Model() string { return Model }

// Dimensions returns Dimensions.
func (Embedder) Dimensions() int { return Dimensions }

// Embed returns one unit vector per text; a blank text is an error
// wrapping ErrEmptyText.
func (Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	for i, t := range texts {
		if strings.TrimSpace(t) == "" {
			return nil, fmt.Errorf("text %d: %w", i, ErrEmptyText)
		}
	}
	m, err := load()
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
				return fmt.Errorf("text %d: %w", i, err)
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
