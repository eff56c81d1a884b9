// Package text splits names and prose into comparable words, the same way
// for embedding, search and query generation.
package text

import (
	"slices"
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
func Words(text string) []string { return AppendWords(nil, text) }

// AppendWords appends the words of text (see Words) to out, so a caller
// that splits many texts reuses one slice.
func AppendWords(out []string, text string) []string {
	text = norm.NFKC.String(text)
	first := len(out)
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
	if len(out) == first {
		for _, f := range strings.Fields(text) {
			out = append(out, strings.ToLower(f))
		}
	}
	return out
}

// Parts splits text as Words does, and also a word's letters from its
// digits where either side reads as a word of its own: before letters
// that follow digits ("v2query" → "v2", "query") and after three or more
// letters ("convert2pdf" → "convert", "2", "pdf"; "sha256" → "sha",
// "256"), so "SHA-256", "sha256" and "sha_256" share their parts. Short
// letter-digit names stay whole ("mp3", "h264", "3d", "v2"). Search and
// the builtin queries use it for names; the builtin lexical embedder keeps
// Words, so its vectors do not change.
func Parts(text string) []string { return AppendParts(nil, text) }

// AppendParts appends the parts of text (see Parts) to out, as
// AppendWords does its words.
func AppendParts(out []string, text string) []string {
	first := len(out)
	out = AppendWords(out, text)
	mixed := slices.IndexFunc(out[first:], lettersAndDigits)
	if mixed < 0 {
		return out // every word is one part, as most are
	}
	words := slices.Clone(out[first+mixed:])
	out = out[:first+mixed]
	for _, w := range words {
		out = appendParts(out, w)
	}
	return out
}

// lettersAndDigits reports whether w holds both letters and digits, so
// may be more than one part.
func lettersAndDigits(w string) bool {
	var letters, digits bool
	for _, r := range w {
		letters = letters || unicode.IsLetter(r)
		digits = digits || unicode.IsDigit(r)
	}
	return letters && digits
}

// appendParts appends w's parts (see Parts) to out: substrings of w, and
// w itself when it has one part, as a word without both letters and
// digits has.
func appendParts(out []string, w string) []string {
	if !lettersAndDigits(w) {
		return append(out, w)
	}
	// The runes of w, and where each starts in w.
	var rs []rune
	var offsets []int
	for at, r := range w {
		rs, offsets = append(rs, r), append(offsets, at)
	}
	start := 0 // where the part starts in w
	for i := 1; i < len(rs); i++ {
		prevDigit, digit := unicode.IsDigit(rs[i-1]), unicode.IsDigit(rs[i])
		if prevDigit == digit || !unicode.IsLetter(rs[i-1]) && !prevDigit || !unicode.IsLetter(rs[i]) && !digit {
			continue
		}
		var cut bool
		if prevDigit {
			cut = letterRun(rs[i:]) >= 2
		} else {
			cut = i-runStart(rs, i) >= 3
		}
		if cut {
			out = append(out, w[start:offsets[i]])
			start = offsets[i]
		}
	}
	return append(out, w[start:])
}

// letterRun is how many letters rs starts with.
func letterRun(rs []rune) int {
	n := 0
	for n < len(rs) && unicode.IsLetter(rs[n]) {
		n++
	}
	return n
}

// runStart is where the run of letters ending before i starts.
func runStart(rs []rune, i int) int {
	for i > 0 && unicode.IsLetter(rs[i-1]) {
		i--
	}
	return i
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
// languages pass through mostly unchanged, and numbers wholly, without
// the stemmer's work (a catalog's tools hold many: versions, codes, ids).
func Stem(w string) string {
	if isNumber(w) {
		return w
	}
	return english.Stem(w, false)
}

// isNumber reports whether w is ASCII digits only.
func isNumber(w string) bool {
	for i := range len(w) {
		if w[i] < '0' || w[i] > '9' {
			return false
		}
	}
	return w != ""
}
