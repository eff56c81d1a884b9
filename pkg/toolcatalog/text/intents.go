package text

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxIntents bounds the intents Intents returns: the rest of a longer
// request joins the last one.
const MaxIntents = 6

// minIntentWords is how many content words a piece of a request needs to
// stand as an intent of its own; a shorter one ("Can you help me with
// that?") joins its neighbour.
const minIntentWords = 2

// Intents splits a request that asks for several things into its intents,
// each a piece of the request as written: sentences and lines, and
// clauses joined by a sequence word (", then", "and also",
// "additionally"). A piece with fewer than two content words is no intent
// of its own and joins the one before it (or after it, when first), so a
// request that asks for one thing is never split. It returns nil for such
// a request, and never more than MaxIntents. The split depends on the
// text alone: the same request always splits alike.
func Intents(request string) []string {
	var spans [][2]int
	for _, s := range pieces(request) {
		if len(spans) > 0 && (contentWords(request[s[0]:s[1]]) < minIntentWords || len(spans) == MaxIntents) {
			spans[len(spans)-1][1] = s[1]
			continue
		}
		if len(spans) == 1 && contentWords(request[spans[0][0]:spans[0][1]]) < minIntentWords {
			spans[0][1] = s[1]
			continue
		}
		spans = append(spans, s)
	}
	if len(spans) < 2 {
		return nil
	}
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = trimPiece(request[s[0]:s[1]])
	}
	return out
}

// pieces are the spans of request between boundaries, each non-empty
// once trimmed.
func pieces(request string) [][2]int {
	var out [][2]int
	start := 0
	cut := func(end, next int) {
		if strings.TrimFunc(request[start:end], isTrim) != "" {
			out = append(out, [2]int{start, end})
		}
		start = next
	}
	for i := 0; i < len(request); {
		r, size := utf8.DecodeRuneInString(request[i:])
		switch {
		case r == '\n' || r == ';':
			cut(i, i+size)
		case (r == '?' || r == '!' || r == '.') && sentenceEnds(request, i, r):
			cut(i+size, i+size)
		case r == ',' || r == ' ':
			// The joining words belong to neither clause; a clause
			// needs words of its own before another can start
			// ("Then, check").
			if n := sequenceWord(request[i:]); n > 0 && contentWords(request[start:i]) >= minIntentWords {
				cut(i, i+n)
				i += n
				continue
			}
		}
		i += size
	}
	cut(len(request), len(request))
	return out
}

// sentenceEnds reports whether the mark at i ends a sentence: it is
// followed by the end of the text or by white space (after any closing
// quotes or brackets), and a full stop also by no lower-case letter and
// not after a one-letter word or an abbreviation ("e.g. this", "J. Smith",
// "Dr. Lee"; "3.5" has no space).
func sentenceEnds(s string, i int, mark rune) bool {
	j := i + 1
	for j < len(s) && strings.ContainsRune(`"')]`, rune(s[j])) {
		j++
	}
	if j == len(s) {
		return true
	}
	r, _ := utf8.DecodeRuneInString(s[j:])
	if !unicode.IsSpace(r) {
		return false
	}
	if mark != '.' {
		return true
	}
	next, _ := utf8.DecodeRuneInString(strings.TrimLeftFunc(s[j:], unicode.IsSpace))
	if unicode.IsLower(next) {
		return false
	}
	// A one-letter word before the stop is an initial or abbreviation; a
	// closing quote or bracket before it ends a sentence.
	word := s[:i]
	if k := strings.LastIndexFunc(word, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }); k >= 0 {
		word = word[k+1:]
	}
	return word == "" || utf8.RuneCountInString(word) > 1 && !abbreviations[strings.ToLower(word)]
}

// abbreviations end in a full stop that ends no sentence.
var abbreviations = map[string]bool{
	"mr": true, "mrs": true, "ms": true, "dr": true, "prof": true, "st": true, "jr": true, "sr": true,
	"vs": true, "etc": true, "inc": true, "ltd": true, "co": true, "no": true, "approx": true, "dept": true,
}

// sequenceWords start a new clause within a sentence when they follow a
// comma or "and".
var sequenceWords = []string{
	", and then ", ", then ", " and then ", " then also ",
	", and also ", " and also ", ", also ",
	", and additionally ", " and additionally ", ", additionally ",
	", and after that ", ", after that ", " and after that ",
	", and afterwards ", ", afterwards ", ", and finally ", ", finally ",
}

// sequenceWord is the length of the sequence word s starts with, 0 when
// it starts with none. A comma or "and" followed by a word that opens a
// request ("and can you", ", how", "and recommend") is one too.
func sequenceWord(s string) int {
	for _, w := range sequenceWords {
		if len(s) >= len(w) && strings.EqualFold(s[:len(w)], w) {
			return len(w)
		}
	}
	for _, join := range []string{", and ", " and ", ", "} {
		if len(s) > len(join) && strings.EqualFold(s[:len(join)], join) {
			rest := s[len(join):]
			end := strings.IndexFunc(rest, func(r rune) bool { return !unicode.IsLetter(r) })
			if end < 0 {
				end = len(rest)
			}
			if clauseOpeners[strings.ToLower(rest[:end])] {
				return len(join)
			}
			return 0
		}
	}
	return 0
}

// clauseOpeners open a request of their own after a comma or "and": a
// question word, a modal asking for something, or a verb that asks.
var clauseOpeners = map[string]bool{
	"can": true, "could": true, "would": true, "will": true, "please": true,
	"how": true, "what": true, "which": true, "where": true, "when": true, "who": true, "why": true,
	"provide": true, "recommend": true, "suggest": true, "show": true, "tell": true, "give": true,
	"find": true, "check": true, "search": true, "list": true, "book": true, "send": true,
	"create": true, "calculate": true, "convert": true, "translate": true, "explain": true,
	"compare": true, "estimate": true, "retrieve": true, "get": true, "fetch": true, "let": true,
	"help": true, "open": true, "add": true, "update": true, "delete": true, "remove": true,
	"schedule": true, "summarize": true, "analyze": true, "generate": true, "write": true,
	"download": true, "upload": true, "track": true, "monitor": true, "play": true, "buy": true,
	"identify": true, "assess": true, "validate": true, "verify": true, "deploy": true, "run": true,
}

// fillers are words that ask or join rather than say what is asked for.
var fillers = map[string]bool{
	"also": true, "then": true, "additionally": true, "finally": true, "lastly": true, "firstly": true,
	"secondly": true, "first": true, "second": true, "next": true, "after": true, "afterwards": true,
	"afterward": true, "moreover": true, "furthermore": true, "besides": true, "plus": true,
	"help": true, "need": true, "want": true, "like": true, "could": true, "should": true, "may": true,
	"might": true, "kindly": true, "just": true, "let": true, "there": true, "any": true, "if": true,
	"have": true, "has": true, "am": true, "was": true, "were": true, "all": true, "thanks": true, "thank": true,
}

// contentWords counts the words of s that say what is asked for.
func contentWords(s string) int {
	n := 0
	for _, w := range Words(s) {
		if utf8.RuneCountInString(w) > 1 && !Stopwords[w] && !fillers[w] {
			n++
		}
	}
	return n
}

func isTrim(r rune) bool {
	return unicode.IsSpace(r) || strings.ContainsRune(`"',;:-*•`, r)
}

// trimPiece trims a piece's surrounding space, quotes and list marks,
// and a closing full stop or exclamation mark (a question keeps its mark).
func trimPiece(s string) string {
	s = strings.TrimFunc(strings.TrimRightFunc(strings.TrimFunc(s, isTrim), func(r rune) bool { return r == '.' || r == '!' || isTrim(r) }), isTrim)
	// A numbered list's mark: "1." or "2)".
	if i := strings.IndexFunc(s, func(r rune) bool { return !unicode.IsDigit(r) }); i > 0 && i < len(s) && (s[i] == '.' || s[i] == ')') {
		s = strings.TrimFunc(s[i+1:], isTrim)
	}
	return s
}
