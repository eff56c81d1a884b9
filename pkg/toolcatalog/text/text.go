// Package text splits names and prose into comparable words, the same way
// for embedding, search and query generation.
package text

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
	"golang.org/x/text/unicode/norm"
)

// Words splits text into lower-case words: NFKC-normalised runs of letters,
// digits and combining marks, with camelCase, snake_case and kebab-case
// names split into their parts ("getWeather" → "get", "weather"). Text
// without any letter or digit falls back to its space-separated fields, so
// emoji and symbols still yield tokens.
func Words(text string) []string {
	text = norm.NFKC.String(text)
	var out []string
	// The current word is text[start:i], -1 when there is none; a word
	// is kept when it holds a letter or digit (a run of combining marks
	// alone, an emoji's variation selector say, is no word).
	start, kept := -1, false
	flush := func(end int) {
		if start >= 0 && kept {
			out = append(out, strings.ToLower(text[start:end]))
		}
		start, kept = -1, false
	}
	var prev rune
	for i, r := range text {
		letterOrDigit := unicode.IsLetter(r) || unicode.IsDigit(r)
		switch {
		case !letterOrDigit && !unicode.IsMark(r):
			flush(i)
		case start < 0:
			start = i
		case unicode.IsUpper(r):
			// A lower-to-upper change starts a new word (camelCase),
			// as does the last upper of an acronym followed by a lower
			// (HTTPServer).
			next, _ := utf8.DecodeRuneInString(text[i+utf8.RuneLen(r):])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && unicode.IsLower(next)) {
				flush(i)
				start = i
			}
		}
		if start >= 0 && letterOrDigit {
			kept = true
		}
		prev = r
	}
	flush(len(text))
	if len(out) == 0 {
		for _, f := range strings.Fields(text) {
			out = append(out, strings.ToLower(f))
		}
	}
	return out
}

// Stopwords are frequent English words that say nothing about a tool.
var Stopwords = map[string]bool{
	"a": true, "an": true, "the": true, "and": true, "or": true, "of": true, "to": true, "in": true,
	"on": true, "for": true, "with": true, "by": true, "at": true, "from": true, "is": true, "are": true,
	"be": true, "it": true, "its": true, "this": true, "that": true, "as": true, "into": true, "i": true,
	"me": true, "my": true, "you": true, "your": true, "we": true, "our": true, "can": true, "do": true,
	"does": true, "please": true, "will": true, "would": true, "what": true, "how": true, "some": true,
}

// Stem reduces an English word to its Snowball (Porter 2) stem, so that
// "issues", "issued" and "issuing" share a feature. Words of other
// languages pass through mostly unchanged.
func Stem(w string) string { return english.Stem(w, false) }
