package index

import (
	"hash/maphash"
	"strings"
	"sync/atomic"

	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/text"
)

// queryStem is text.Stem remembering recent stems: a catalog's searches,
// and its gradings most of all, stem the same request words again and
// again, and stemming is the dearest step of tokenizing a request. An
// index's build has its own memo (stems) and does not come here.
func queryStem(w string) string {
	if len(w) > maxCachedWord {
		return text.Stem(w)
	}
	slot := &stemCache[maphash.String(stemSeed, w)%stemCacheSize]
	if e := slot.Load(); e != nil && e.word == w {
		return e.stem
	}
	stem := text.Stem(w)
	// The entry holds copies: w may be part of a long request, and the
	// stem part of w.
	slot.Store(&stemmed{word: strings.Clone(w), stem: strings.Clone(stem)})
	return stem
}

// stemCache holds recent stems, each word in the slot its hash picks, so
// a word evicts the one before it there: bounded (stemCacheSize entries
// of words of at most maxCachedWord bytes) whatever requests come, and
// safe for concurrent use, each slot one atomic pointer.
var stemCache [stemCacheSize]atomic.Pointer[stemmed]

// stemSeed hashes the words; per process, so no request can aim at a
// slot from outside.
var stemSeed = maphash.MakeSeed()

const (
	stemCacheSize = 8192
	maxCachedWord = 32
)

// stemmed is a word and its stem.
type stemmed struct{ word, stem string }
