package grading

import (
	"fmt"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// BenchmarkGradingSample picks the tools one version of 100,000 grades.
func BenchmarkGradingSample(b *testing.B) {
	s, tools := catalog.Stored{Doc: &contract.Document{}}, map[string]catalog.StoredTool{}
	for i := range 100000 {
		name := fmt.Sprintf("tool_%06d", i)
		s.Doc.Tools = append(s.Doc.Tools, contract.Tool{Name: name})
		tools[name] = catalog.StoredTool{Metadata: &contract.Metadata{SyntheticQueries: []string{"a", "b"}}}
	}
	s.Tools = catalog.StoredToolsOf(tools)
	changed := map[string]bool{"tool_000777": true}
	b.ReportAllocs()
	for b.Loop() {
		gradingSample(s, changed)
	}
}
