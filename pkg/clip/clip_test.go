package clip

import (
	"testing"
	"unicode/utf8"
)

func TestTruncateNeverCutsACharacter(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"abcdefgh", 5, "abcd…"},
		{"日本語のテキスト", 4, "日本語…"},
		{"é🙂é🙂", 3, "é🙂…"},
		{"x", 0, ""},
	}
	for _, tt := range tests {
		got := Truncate(tt.in, tt.n)
		if got != tt.want || !utf8.ValidString(got) || utf8.RuneCountInString(got) > max(tt.n, 0) {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func TestCutNeverCutsACharacter(t *testing.T) {
	for _, tt := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 3, "abc"},
		{"日本語", 4, "日"},
		{"é🙂", 5, "é"},
		{"🙂", 3, ""},
		{"x", 0, ""},
	} {
		if got := Cut(tt.in, tt.n); got != tt.want || !utf8.ValidString(got) {
			t.Errorf("Cut(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
