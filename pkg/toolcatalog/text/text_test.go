package text

import (
	"slices"
	"testing"
	"unicode/utf8"
)

func TestWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"get_current_weather", []string{"get", "current", "weather"}},
		{"createGitHubIssue", []string{"create", "git", "hub", "issue"}},
		{"HTTPServer-status", []string{"http", "server", "status"}},
		{"run SQL v2query", []string{"run", "sql", "v2query"}},
		{"Ünïcödé, 東京!", []string{"ünïcödé", "東京"}},
		{"ﬁle", []string{"file"}}, // NFKC folds the ligature
		{"🌧️ ☔", []string{"🌧️", "☔"}},
	}
	for _, tt := range tests {
		if got := Words(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("Words(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

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

func TestStemJoinsInflections(t *testing.T) {
	for _, group := range [][]string{
		{"issue", "issues", "issued", "issuing"},
		{"search", "searches", "searching", "searched"},
		{"query", "queries"},
		{"run", "running", "runs"},
	} {
		want := Stem(group[0])
		for _, w := range group[1:] {
			if got := Stem(w); got != want {
				t.Errorf("Stem(%q) = %q, Stem(%q) = %q: want one stem", w, got, group[0], want)
			}
		}
	}
	if Stem("news") == Stem("new") {
		t.Error(`"news" and "new" share a stem`)
	}
	if got := Stem("天気"); got != "天気" {
		t.Errorf("Stem(天気) = %q, want it unchanged", got)
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
