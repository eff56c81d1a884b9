package records

import (
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
)

func TestConfusableTools(t *testing.T) {
	q := &v1alpha1.CatalogQuality{ConfusablePairs: []v1alpha1.ConfusablePair{
		{Tools: []string{"a", "b"}, Similarity: "0.97"},
		{Tools: []string{"a", "c"}, Similarity: "0.91"},
		{Tools: []string{"broken"}, Similarity: "0.90"},
	}}
	got := ConfusableTools(q)
	if got["a"].Name != "b" || got["b"].Name != "a" || got["c"].Name != "a" || got["c"].Similarity != "0.91" || len(got) != 3 {
		t.Fatalf("ConfusableTools = %v; a tool names its most similar other tool", got)
	}
	if len(ConfusableTools(nil)) != 0 {
		t.Fatal("no grading, no confusable tools")
	}
}
