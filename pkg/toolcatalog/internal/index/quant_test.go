package index

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/internal/linalg"
)

// A catalog whose semantic search scans int8 rows first returns what the
// float scan returns, to the bit, for every method, depth, threshold and
// principal: on tools in tight clusters, whose cosines differ by less than
// int8 rounding, and on exact duplicates, ordered by name. So do its next
// versions, whose int8 rows are taken from the last one, or moved and
// written over with the float ones. A principal allowed few tools has every row scored exactly.
func TestInt8ScanRanksAsTheFloatScan(t *testing.T) {
	t.Logf("kernel: %s", linalg.KernelName(linalg.Best))
	r := rand.New(rand.NewPCG(21, 22))
	const n, dims = 4200, 64 // past concurrentArms: the arms are ranked side by side
	words := strings.Fields("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon")
	centres := make([][]float32, 60)
	for i := range centres {
		centres[i] = gaussian(r, dims, 1)
	}
	near := func(c []float32, spread float64) []float32 {
		v := gaussian(r, dims, spread)
		for i := range v {
			v[i] += c[i]
		}
		return v
	}
	doc := &contract.Document{Version: 1, Catalog: "test/int8",
		Embedding:   contract.EmbeddingInfo{Model: embedding.BuiltinLexicalModel, Dimensions: dims},
		Search:      contract.SearchDefaults{Method: "hybrid", TopK: 5},
		Permissions: map[string][]string{}}
	raw := map[string][]byte{}
	var vec []float32
	for i := range n {
		desc := make([]string, 6)
		for j := range desc {
			desc[j] = words[r.IntN(len(words))]
		}
		tool, _ := contract.NormalizeTool(contract.Tool{Name: fmt.Sprintf("tool_%04d", i), Description: strings.Join(desc, " "), Parameters: []byte(`{"type":"object"}`)})
		doc.Tools = append(doc.Tools, tool)
		if i%7 != 3 || vec == nil { // every seventh tool shares the last one's vector
			vec = near(centres[i%len(centres)], 0.01)
		}
		raw[tool.Name] = contract.EncodeVector(vec)
		switch {
		case i%3 == 0:
			doc.Permissions[tool.Name] = []string{"group:a"}
		case i%250 == 1:
			doc.Permissions[tool.Name] = []string{"group:few"}
		}
	}
	if err := doc.Seal(); err != nil {
		t.Fatal(err)
	}
	queries := embeddedQueries{}
	var texts []string
	for i := range 40 {
		q := fmt.Sprintf("%s %s request %d", words[r.IntN(len(words))], words[r.IntN(len(words))], i)
		queries[q] = near(centres[r.IntN(len(centres))], 0.02)
		texts = append(texts, q)
	}
	build := func(quantized bool) *Catalog {
		defer func(b int) { quantizeBytes = b }(quantizeBytes)
		if quantized {
			quantizeBytes = 0
		} else {
			quantizeBytes = 1 << 40
		}
		c, err := New(doc, raw)
		if err != nil {
			t.Fatal(err)
		}
		if (c.quant != nil) != quantized {
			t.Fatalf("int8 rows: %v, want %v", c.quant != nil, quantized)
		}
		return c
	}
	float, quant, spent := build(false), build(true), build(true)
	compare := func(version string, float, quant *Catalog) {
		t.Helper()
		for _, m := range []Method{Semantic, Hybrid, RRF} {
			for _, o := range []Options{
				{TopK: 5}, {TopK: 40}, {TopK: 10, Threshold: new(0.99)}, {TopK: 10, Principal: "group:b"}, {TopK: 10, Principal: "group:few"},
			} {
				o.Method, o.Embedder, o.MinLexicalEvidence = m, queries, new(0.0)
				for _, q := range texts {
					want, err := float.Search(context.Background(), q, o)
					if err != nil {
						t.Fatal(err)
					}
					got, err := quant.Search(context.Background(), q, o)
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("%s, %s, top %d, threshold %v, %q: the int8 scan returns\n%s\nthe float scan\n%s",
							version, m, o.TopK, o.Threshold != nil, q, resultsOf(got), resultsOf(want))
					}
				}
			}
		}
	}
	compare("version 1", float, quant)

	// Version 2 moves four tools' vectors within their clusters and
	// removes every tenth tool: written over the int8 rows in place.
	next := *doc
	next.Version = 2
	next.Tools = nil
	changed := map[string][]byte{}
	for i, tool := range doc.Tools {
		if i%10 == 9 {
			continue
		}
		next.Tools = append(next.Tools, tool)
		if i%750 == 5 {
			changed[tool.Name] = contract.EncodeVector(near(centres[r.IntN(len(centres))], 0.01))
			raw[tool.Name] = changed[tool.Name]
		}
	}
	if err := next.Seal(); err != nil {
		t.Fatal(err)
	}
	quant2 := quant.Next(&next, changed)
	if quant2.quant == nil || quant2.quant.Rows() != len(quant2.vecNames) {
		t.Fatalf("version 2 kept no int8 rows, or not one per tool")
	}
	float2, err := New(&next, raw)
	if err != nil {
		t.Fatal(err)
	}
	compare("version 2", float2, quant2)
	// The grader writes version 2 over version 1's rows.
	over, _ := overwrite(&next, changed, spent)
	if over == nil || over.quant == nil {
		t.Fatal("version 2 was not written over version 1, or has no int8 rows")
	}
	compare("version 2 written over 1", float2, over)
}

// gaussian is dims normally distributed floats of standard deviation sd.
func gaussian(r *rand.Rand, dims int, sd float64) []float32 {
	v := make([]float32, dims)
	for i := range v {
		v[i] = float32(r.NormFloat64() * sd)
	}
	return v
}

func resultsOf(resp *Response) string {
	var b strings.Builder
	for _, res := range resp.Results {
		fmt.Fprintf(&b, "  %s %s %.9g", res.Tool.Name, res.Why, res.Score)
		if res.Semantic != nil {
			fmt.Fprintf(&b, " semantic %.9g #%d", res.Semantic.Score, res.Semantic.Rank)
		}
		b.WriteString("\n")
	}
	return b.String()
}
