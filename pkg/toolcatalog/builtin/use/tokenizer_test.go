package use

import (
	"encoding/json"
	"os"
	"slices"
	"testing"
)

type reference struct {
	Texts []struct {
		Text   string    `json:"text"`
		Tokens []int     `json:"tokens"`
		Vector []float64 `json:"vector"`
	} `json:"texts"`
}

func loadReference(t testing.TB) reference {
	t.Helper()
	raw, err := os.ReadFile("testdata/reference.json")
	if err != nil {
		t.Fatal(err)
	}
	var r reference
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Texts) < 50 {
		t.Fatalf("reference has %d texts, want at least 50", len(r.Texts))
	}
	return r
}

// TestTokenizerMatchesReference compares token ids with those of the Node
// reference implementation over every reference text: Unicode, emoji,
// punctuation, spacing, over-long inputs.
func TestTokenizerMatchesReference(t *testing.T) {
	tok, err := NewTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabularySize() != 8000 {
		t.Fatalf("vocabulary of %d pieces, want 8000", tok.VocabularySize())
	}
	for _, r := range loadReference(t).Texts {
		if got := tok.Encode(r.Text); !slices.Equal(got, r.Tokens) {
			t.Errorf("Encode(%q)\n got %v\nwant %v", r.Text, got, r.Tokens)
		}
	}
}

func TestTokenizerEmptyInput(t *testing.T) {
	tok, err := NewTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode(""); len(got) != 0 {
		t.Fatalf("Encode(\"\") = %v", got)
	}
}
