package index

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/text"
)

// Remembered stems are the stemmer's: many more words than the cache
// holds, stemmed three times each from two goroutines at once, in an
// order that makes words evict one another, always give what text.Stem
// gives, numbers and a word too long to remember included.
func TestQueryStemRemembersTheStemmersStems(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	base := strings.Fields("issues issued issuing running runs weather forecasts sending emails translated translations 2024 generously happily")
	words := slices.Clone(base)
	for range 3 * stemCacheSize {
		w := base[r.IntN(len(base))]
		words = append(words, w+string(rune('a'+r.IntN(26)))+string(rune('a'+r.IntN(26)))+"ing")
	}
	words = append(words, strings.Repeat("running", 10))
	var g errgroup.Group
	for range 2 {
		order := slices.Concat(words, words, words)
		r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		g.Go(func() error {
			for _, w := range order {
				if got, want := queryStem(w), text.Stem(w); got != want {
					return fmt.Errorf("queryStem(%q) = %q, text.Stem gives %q", w, got, want)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}
