// Package clip bounds strings: by bytes before work that grows with them,
// by characters for what people read. It has no dependencies, so the Redis
// contract and every consumer can use it.
package clip

import "unicode/utf8"

// Cut shortens s to at most n bytes without cutting a rune in half and
// without copying it: a bound applied before any work that grows with s.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:max(n, 0)]
}

// Truncate shortens s to at most n characters (runes, never cutting one in
// half), ending it with "…" when anything was cut.
func Truncate(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
