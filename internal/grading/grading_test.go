package grading

import (
	"fmt"
	"slices"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
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
