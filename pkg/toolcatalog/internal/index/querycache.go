package index

import (
	"context"

	lru "github.com/hashicorp/golang-lru/v2"
)

// DefaultQueryCacheSize is how many query vectors CacheQueries keeps when
// not told: about 2 MiB of 512-dimension vectors.
const DefaultQueryCacheSize = 1024

// CacheQueries returns emb remembering the vectors of the size queries it
// embedded last (DefaultQueryCacheSize when size ≤ 0), so a request seen
// before costs no embedding: agents repeat their requests, and a gateway
// serves many agents. The vectors returned are shared: read them, never
// change them (Search does not). It is safe for concurrent use when emb
// is.
func CacheQueries(emb QueryEmbedder, size int) QueryEmbedder {
	if size <= 0 {
		size = DefaultQueryCacheSize
	}
	cache, _ := lru.New[string, []float32](size) // only a size ≤ 0 fails
	return &cachedQueries{emb: emb, cache: cache}
}

type cachedQueries struct {
	emb   QueryEmbedder
	cache *lru.Cache[string, []float32]
}

func (c *cachedQueries) Model() string { return c.emb.Model() }

// Embed returns the kept vectors and embeds the other texts in one call.
func (c *cachedQueries) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	var missing []string
	var at []int
	for i, t := range texts {
		if v, ok := c.cache.Get(t); ok {
			out[i] = v
		} else {
			missing = append(missing, t)
			at = append(at, i)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	vecs, err := c.emb.Embed(ctx, missing)
	if err != nil {
		return nil, err
	}
	for j, v := range vecs {
		out[at[j]] = v
		c.cache.Add(missing[j], v)
	}
	return out, nil
}
