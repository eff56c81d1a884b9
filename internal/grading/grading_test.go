package grading

import (
	"fmt"
	"slices"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/selfgrade"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The sample of tools a version grades, as a plain test: no API server,
// no Redis.
func TestGradingSample(t *testing.T) {
	stored := func(n int) catalog.Stored {
		s := catalog.Stored{Doc: &contract.Document{}, Tools: map[string]catalog.StoredTool{}}
		for i := range n {
			name := fmt.Sprintf("tool_%04d", i)
			s.Doc.Tools = append(s.Doc.Tools, contract.Tool{Name: name})
			queries := []string{"q1 " + name, "q2 " + name}
			if i%10 == 9 {
				queries = queries[:1] // too few queries to grade
			}
			s.Tools[name] = catalog.StoredTool{Metadata: &contract.Metadata{SyntheticQueries: queries}}
		}
		return s
	}
	t.Run("all gradable tools when they fit", func(t *testing.T) {
		got := gradingSample(stored(50), nil)
		if len(got) != 45 || slices.Contains(got, "tool_0009") {
			t.Fatalf("sample of 50 tools (5 with one query) = %d tools, %v", len(got), got)
		}
	})
	t.Run("changed tools first, then a stable sample", func(t *testing.T) {
		s := stored(1000)
		changed := map[string]bool{"tool_0777": true, "tool_0003": true}
		first := gradingSample(s, changed)
		if len(first) != MaxTools {
			t.Fatalf("sample of %d tools; want %d", len(first), MaxTools)
		}
		if !slices.Contains(first[:2], "tool_0777") || !slices.Contains(first[:2], "tool_0003") {
			t.Fatalf("changed tools are not graded first: %v", first[:2])
		}
		again := gradingSample(s, nil)
		if common := len(intersect(first[2:], again)); common < MaxTools-2-2 {
			t.Fatalf("consecutive versions share %d sampled tools; the sample must be stable", common)
		}
	})
}

func intersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// The grading states of all catalogs together stay within MaxBytes: past
// it the states graded least recently go, never the one just graded, and
// what is held is counted down as states go.
func TestGradingStatesAreBounded(t *testing.T) {
	gs := New(nil, nil, nil, nil)
	gs.MaxBytes = 100
	keys := []client.ObjectKey{{Namespace: "n", Name: "a"}, {Namespace: "n", Name: "b"}, {Namespace: "n", Name: "c"}}
	states := map[client.ObjectKey]*gradeState{}
	for i, k := range keys {
		st := &gradeState{}
		st.used.Store(int64(i + 1)) // a graded first, c last
		states[k] = st
		gs.state[k] = st
	}
	a, b, c := keys[0], keys[1], keys[2]
	gs.charge(a, states[a], 40)
	gs.charge(b, states[b], 40)
	if gs.heldBytes() != 80 || !gs.Holds(a) || !gs.Holds(b) {
		t.Fatalf("held %d within the bound, a %v, b %v", gs.heldBytes(), gs.Holds(a), gs.Holds(b))
	}
	gs.charge(c, states[c], 40)
	if gs.heldBytes() != 80 || gs.Holds(a) || !gs.Holds(b) || !gs.Holds(c) {
		t.Fatalf("past the bound: held %d, a %v (graded least recently), b %v, c %v", gs.heldBytes(), gs.Holds(a), gs.Holds(b), gs.Holds(c))
	}
	// One state past the bound alone is kept; every other goes.
	gs.charge(c, states[c], 200)
	if gs.heldBytes() != 200 || gs.Holds(b) || !gs.Holds(c) {
		t.Fatalf("one large state: held %d, b %v, c %v", gs.heldBytes(), gs.Holds(b), gs.Holds(c))
	}
	// A state dropped while it graded is not charged.
	gs.charge(a, states[a], 40)
	gs.Forget(c)
	if gs.heldBytes() != 0 || gs.Holds(a) {
		t.Fatalf("held %d after every state went", gs.heldBytes())
	}
}

// A state's size follows its vectors: the index's and every query's.
func TestGradingStateSize(t *testing.T) {
	st := &gradeState{sets: map[string]selfgrade.QuerySet{
		"a": {Queries: []string{"q1", "q2"}, Vectors: [][]float32{{1, 0}, {0, 1}}, IntentVectors: map[int][][]float32{1: {{1, 0}, {0, 1}}}},
	}}
	// 3 tools indexed at 2 dimensions, as int8 with a scale and a bound;
	// one set of 4 float vectors.
	want := int64(3*(2+8+512) + 4*2*4 + 2*256)
	if got := st.size(3, 2); got != want {
		t.Fatalf("size %d, want %d", got, want)
	}
}
