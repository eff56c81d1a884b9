// Package use holds Universal Sentence Encoder lite: its SentencePiece
// tokenizer (this file) and vocabulary, ported so that token ids equal the
// reference implementation's, quirks included.
package use

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf16"

	"golang.org/x/text/unicode/norm"
)

//go:embed vocab.json
var vocabJSON []byte

// separator replaces spaces and starts every input, as SentencePiece does.
const separator = "\u2581"

// reservedPieces are the first vocabulary entries (<unk>-like and control
// pieces) that input text never matches.
const reservedPieces = 6

// piece is a vocabulary entry.
type piece struct {
	text  string
	score float64
	// utf16Len is the piece's length in UTF-16 code units, which the
	// reference uses when it walks back over the best path.
	utf16Len int
}

// Tokenizer turns text into vocabulary ids by the highest-scoring
// segmentation (Viterbi over the pieces' log-probabilities).
type Tokenizer struct {
	pieces []piece
	root   *trieNode
}

type trieNode struct {
	children map[rune]*trieNode
	// id is the vocabulary id of the piece ending here, -1 for none.
	id int
	// length is the piece's length in code points.
	length int
}

// NewTokenizer builds the tokenizer of the embedded vocabulary.
func NewTokenizer() (*Tokenizer, error) {
	var raw [][2]any
	if err := json.Unmarshal(vocabJSON, &raw); err != nil {
		return nil, fmt.Errorf("parsing the vocabulary: %w", err)
	}
	t := &Tokenizer{root: newTrieNode()}
	for i, e := range raw {
		text, ok := e[0].(string)
		if !ok {
			return nil, fmt.Errorf("vocabulary entry %d is not a string", i)
		}
		// A null score counts as 0, as it does in JavaScript arithmetic.
		score, _ := e[1].(float64)
		t.pieces = append(t.pieces, piece{text: text, score: score, utf16Len: len(utf16.Encode([]rune(text)))})
		if i >= reservedPieces {
			t.insert(text, i)
		}
	}
	return t, nil
}

func newTrieNode() *trieNode { return &trieNode{children: map[rune]*trieNode{}, id: -1} }

func (t *Tokenizer) insert(text string, id int) {
	n := t.root
	runes := []rune(text)
	for _, r := range runes {
		next, ok := n.children[r]
		if !ok {
			next = newTrieNode()
			n.children[r] = next
		}
		n = next
	}
	// A later duplicate overwrites an earlier one, as in the reference.
	n.id, n.length = id, len(runes)
}

// VocabularySize is the number of pieces.
func (t *Tokenizer) VocabularySize() int { return len(t.pieces) }

// match is a piece found at a position: its id and length in code points.
type match struct {
	id, length int
}

// prefixes appends to out the pieces that start the symbols, shortest
// first, or the unknown piece (id 0, one symbol) when none does.
func (t *Tokenizer) prefixes(out []match, symbols []rune) []match {
	out = out[:0]
	n := t.root
	for i, r := range symbols {
		next, ok := n.children[r]
		if !ok {
			break
		}
		n = next
		if n.id >= 0 {
			out = append(out, match{id: n.id, length: i + 1})
		}
	}
	if len(out) == 0 {
		out = append(out, match{id: 0, length: 1})
	}
	return out
}

// Encode returns the token ids of text. The text is NFKC-normalised,
// spaces become ▁ and a ▁ is put in front; the segmentation maximises the
// sum of piece scores; consecutive unknown pieces merge into one.
func (t *Tokenizer) Encode(text string) []int {
	text = norm.NFKC.String(text)
	if text == "" {
		return nil
	}
	symbols := []rune(separator + strings.ReplaceAll(text, " ", separator))

	// best[e] is the best score of a segmentation of symbols[:e] and
	// words[e] the piece that ends it. The pieces ending at e are visited
	// by start, ascending, as the reference visits them, keeping the last
	// of equal scores; a best of exactly 0 counts as unset. best[i] is
	// final when the pieces starting at i are visited: every piece that
	// ends at i starts before it.
	best := make([]float64, len(symbols)+1)
	words := make([]int, len(symbols)+1)
	var matches []match
	for i := range symbols {
		matches = t.prefixes(matches, symbols[i:])
		for _, m := range matches {
			end := i + m.length
			score := t.pieces[m.id].score + best[i]
			if m.id == 0 {
				score = best[i]
			}
			if best[end] == 0 || score >= best[end] {
				best[end] = score
				words[end] = m.id
			}
		}
	}

	// Walk back from the end over the chosen pieces.
	var ids []int
	for i := len(words) - 1; i > 0; i -= t.pieces[words[i]].utf16Len {
		ids = append(ids, words[i])
	}
	merged := make([]int, 0, len(ids))
	previousUnknown := false
	for _, id := range ids {
		if !(previousUnknown && id == 0) {
			merged = append(merged, id)
		}
		previousUnknown = id == 0
	}
	for i, j := 0, len(merged)-1; i < j; i, j = i+1, j-1 {
		merged[i], merged[j] = merged[j], merged[i]
	}
	return merged
}
