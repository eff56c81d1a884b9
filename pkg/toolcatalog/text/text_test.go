package text

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kljensen/snowball/english"
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

// A number skips the stemmer and gets what the stemmer would give it.
func TestStemKeepsNumbersAsTheStemmerDoes(t *testing.T) {
	for _, w := range []string{"0", "7", "42", "007", "2024", "00037", "123456789012345678901234567890"} {
		if got, want := Stem(w), english.Stem(w, false); got != want || got != w {
			t.Errorf("Stem(%q) = %q, the stemmer %q", w, got, want)
		}
	}
	for i := range 100000 {
		if w := strconv.Itoa(i); english.Stem(w, false) != w {
			t.Fatalf("the stemmer changes %q", w)
		}
	}
}

func TestPartsSplitsDigitsFromWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"v2query", []string{"v2", "query"}},
		{"convert2pdf", []string{"convert", "2", "pdf"}},
		{"sha256", []string{"sha", "256"}},
		{"SHA-256", []string{"sha", "256"}},
		{"base64Encode", []string{"base", "64", "encode"}},
		{"v2_convert", []string{"v2", "convert"}},
		{"getPowerOutput", []string{"get", "power", "output"}},
		{"mp3 h264 3d v2 2022", []string{"mp3", "h264", "3d", "v2", "2022"}},
		{"größe2liter", []string{"größe", "2", "liter"}},
		{"ĳ2ĳĳ", []string{"ij2", "ijij"}},
		{"\xff2abc", []string{"2", "abc"}},
	}
	for _, tt := range tests {
		if got := Parts(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("Parts(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	// A word's parts, put together, are the word, whatever its runes.
	for _, in := range []string{"abc123def", "日本2語", "x\u0301y2zz", "a\xffb9cc", "٣abc"} {
		for _, w := range Words(in) {
			if got := strings.Join(Parts(w), ""); got != w {
				t.Errorf("the parts of %q join to %q", w, got)
			}
		}
	}
	// Words, which the lexical embedder's vectors depend on, is unchanged.
	if got := Words("convert2pdf sha256"); !slices.Equal(got, []string{"convert2pdf", "sha256"}) {
		t.Errorf("Words split digits: %q", got)
	}
}
