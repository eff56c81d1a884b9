package index

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// A selection keeps exactly the best d entries offered, in the order a
// sort of everything offered gives them: on scores that tie often, keys
// that tie often, and every depth from one past the number offered.
func TestSelectionKeepsTheBestOffered(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for round := range 200 {
		n := 1 + r.IntN(300)
		offered := make([]ranked, n)
		for i := range offered {
			offered[i] = ranked{name: fmt.Sprintf("tool-%03d", r.IntN(1000)), score: float64(r.IntN(20)) / 4, key: int32(r.IntN(8))}
		}
		want := slices.Clone(offered)
		sortRanked(want)
		for _, d := range []int{1, 2, 5, 100, n, n + 1} {
			s := newSelection(d)
			for _, e := range offered {
				if s.wants(e) != (len(s.h) < d || better(e, s.h[0])) {
					t.Fatalf("round %d, depth %d: wants disagrees with the kept worst", round, d)
				}
				s.offer(e)
			}
			got := s.sorted()
			if !slices.Equal(got, want[:min(d, n)]) {
				t.Fatalf("round %d, depth %d of %d: kept %v, want %v", round, d, n, got, want[:min(d, n)])
			}
		}
	}
}

// Rankings sort by score (higher first), then key, then name.
func TestSortRankedOrdersByScoreKeyName(t *testing.T) {
	got := []ranked{
		{name: "b", score: 2, key: 1}, {name: "a", score: 2, key: 1}, {name: "a", score: 2, key: 0},
		{name: "z", score: 3, key: 9}, {name: "a", score: 1, key: 0}, {name: "a", score: 2, key: 1},
	}
	sortRanked(got)
	want := []ranked{{name: "z", score: 3, key: 9}, {name: "a", score: 2, key: 0}, {name: "a", score: 2, key: 1}, {name: "a", score: 2, key: 1}, {name: "b", score: 2, key: 1}, {name: "a", score: 1, key: 0}}
	if !slices.Equal(got, want) {
		t.Fatalf("sorted %v, want %v", got, want)
	}
}
