package use

import (
	"testing"
	"unicode/utf8"
)

// Any text is tokenized into known pieces without panicking, however it
// mixes scripts, marks and invalid UTF-8.
func FuzzTokenizer(f *testing.F) {
	for _, s := range []string{"will it rain tomorrow", "日本語のテキスト", "ﬁ ligature and full-width Ｈｅｌｌｏ", "e\u0301\u0301\u0301", "\xff\xfe bad bytes", "🙂‍🙂", ""} {
		f.Add(s)
	}
	tok, err := NewTokenizer()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 1<<12 {
			return
		}
		ids := tok.Encode(s)
		for _, id := range ids {
			if id < 0 || id >= tok.VocabularySize() {
				t.Fatalf("%q: token id %d outside the vocabulary", s, id)
			}
		}
		if utf8.ValidString(s) && len(s) > 0 && len(ids) == 0 && hasVisible(s) {
			t.Fatalf("%q: no tokens", s)
		}
	})
}

func hasVisible(s string) bool {
	for _, r := range s {
		if r > ' ' {
			return true
		}
	}
	return false
}
