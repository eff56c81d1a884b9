package text

import (
	"slices"
	"testing"
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
