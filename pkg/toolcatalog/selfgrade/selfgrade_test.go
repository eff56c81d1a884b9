package selfgrade_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/selfgrade"
)

// dims is the number of tools and of dimensions: enough tools that a
// change cannot reach every query's top K.
const dims = 24

// oneHot is the unit vector of dimension i.
func oneHot(i int) []float32 {
	v := make([]float32, dims)
	v[i] = 1
	return v
}

// version is a catalog of tools, one direction each, and its raw vectors.
func version(n int64, vecs map[string][]float32) (*contract.Document, map[string][]byte) {
	doc := &contract.Document{Version: n, CatalogUID: "uid", Embedding: contract.EmbeddingInfo{Provider: "test", Model: "m", Dimensions: dims},
		Search: contract.SearchDefaults{Method: "semantic", TopK: 5}}
	raw := map[string][]byte{}
	for _, name := range slices.Sorted(maps.Keys(vecs)) {
		doc.Tools = append(doc.Tools, contract.Tool{Name: name, Description: name, SpecHash: name})
		raw[name] = contract.EncodeVector(vecs[name])
	}
	return doc, raw
}

// A Grader grades through package selfgrade alone, and indexes a later
// version reading only the vectors that changed.
func TestGraderIndexesWhatChanged(t *testing.T) {
	ctx := context.Background()
	g := selfgrade.New(-1, 1)
	if _, _, err := g.Grade(ctx, nil); err == nil {
		t.Fatal("Grade before any Index: no error")
	}
	vecs := map[string][]float32{}
	for i := range dims {
		vecs[fmt.Sprintf("tool%02d", i)] = oneHot(i)
	}
	sets := map[string]selfgrade.QuerySet{}
	for name, v := range vecs {
		sets[name] = selfgrade.QuerySet{Queries: []string{name + " one", name + " two"}, Vectors: [][]float32{v, v}}
	}
	var asked [][]string
	index := func(doc *contract.Document, raw map[string][]byte) {
		t.Helper()
		digest := func(name string) uint64 { return contract.VectorDigest(raw[name]) }
		read := func(names []string) (map[string]string, error) {
			asked = append(asked, slices.Clone(names))
			out := map[string]string{}
			for _, n := range names {
				out[n] = string(raw[n])
			}
			return out, nil
		}
		if err := g.Index(doc, 2, digest, nil, read); err != nil {
			t.Fatal(err)
		}
	}

	index(version(1, vecs))
	if len(asked) != dims/2 || !slices.Equal(asked[0], []string{"tool00", "tool01"}) {
		t.Fatalf("the first Index read %v; want every tool, two at a time", asked)
	}
	first, left, err := g.Grade(ctx, sets)
	if err != nil {
		t.Fatal(err)
	}
	if first.Tools != dims || first.Queries != 2*dims || first.Searched != 2*dims || first.SelfRecallAt5 != 1 || left != 0 {
		t.Fatalf("first grading %+v, %d left; want every tool and query searched and found", first, left)
	}

	asked = nil
	vecs["tool05"] = oneHot(6)
	index(version(2, vecs))
	if want := [][]string{{"tool05"}}; !slices.EqualFunc(asked, want, slices.Equal) {
		t.Fatalf("the second Index read %v; want only the changed vector %v", asked, want)
	}
	second, _, err := g.Grade(ctx, sets)
	if err != nil {
		t.Fatal(err)
	}
	if second.Tools != dims || second.Searched == 0 || second.Searched >= dims {
		t.Fatalf("second grading %+v; want the queries a change could move searched again, not all", second)
	}
	t.Logf("second grading searched %d of %d queries", second.Searched, second.Queries)
}
