package index

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/internal/testing/openaitest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/shapes"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/text"
)

// sharedTool is tool i of the shared shape (package shapes), named as
// its words say.
func sharedTool(i int) (name, description string) {
	v, n, _ := shapes.Words(i)
	return fmt.Sprintf("%s_%s_%d", strings.ToLower(v), n, i), shapes.Description(i)
}

// sharedFixture is a hybrid catalog of shared tools as the operator
// builds it: each tool's vector the centroid of its queries' (embedded by
// embedTexts), and the query sets of the 200 tools a grading samples,
// their intents embedded.
type sharedFixture struct {
	doc  *contract.Document
	raw  map[string][]byte
	sets map[string]QuerySet
}

// newSharedFixture is the fixture of n shared tools.
func newSharedFixture(b testing.TB, n int) *sharedFixture {
	b.Helper()
	f := &sharedFixture{raw: make(map[string][]byte, n), sets: map[string]QuerySet{}}
	f.doc = &contract.Document{Catalog: "bench/shared", CatalogUID: "shared",
		Embedding: contract.EmbeddingInfo{Model: "words", Dimensions: sharedDims},
		Search:    contract.SearchDefaults{Method: "hybrid", TopK: 5}}
	tools := make(map[string]string, n)
	for i := range n {
		name, desc := sharedTool(i)
		tools[name] = desc
	}
	// The 200 a grading samples: those first in an order fixed by a hash
	// of their names.
	names := slices.Collect(maps.Keys(tools))
	hash := func(s string) uint64 {
		h := fnv.New64a()
		h.Write([]byte(s))
		return h.Sum64()
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(hash(a), hash(b)) })
	for _, name := range names[:min(n, 200)] {
		f.sets[name] = QuerySet{}
	}
	f.change(b, tools, func(d string) string { return d })
	return f
}

// vectors embeds each distinct text once.
type vectors map[string][]float32

func (vs vectors) of(b testing.TB, text string) []float32 {
	if v, ok := vs[text]; ok {
		return v
	}
	v := embedTexts(b, []string{text})[0]
	vs[text] = v
	return v
}

// sharedVectors holds the vectors of the shared requests and intents.
var sharedVectors = vectors{}

// change makes the next version: each tool named in tools has its
// description made by describe from the one it had (or from the one
// tools gives, for a tool that comes), and its queries, vector and (when
// sampled) query set those of the new text; describe returning ""
// removes the tool.
func (f *sharedFixture) change(b testing.TB, tools map[string]string, describe func(string) string) {
	b.Helper()
	next := *f.doc
	next.Version++
	next.Tools = slices.Clone(f.doc.Tools)
	for _, name := range slices.Sorted(maps.Keys(tools)) {
		i, ok := slices.BinarySearchFunc(next.Tools, name, func(t contract.Tool, n string) int { return strings.Compare(t.Name, n) })
		t := contract.Tool{Name: name, Description: tools[name], Parameters: []byte(shapes.Parameters)}
		if ok {
			t = next.Tools[i]
		}
		t.Description = describe(t.Description)
		if t.Description == "" {
			next.Tools = slices.Delete(next.Tools, i, i+1)
			delete(f.raw, name)
			delete(f.sets, name)
			continue
		}
		t, err := contract.NormalizeTool(t)
		if err != nil {
			b.Fatal(err)
		}
		if ok {
			next.Tools[i] = t
		} else {
			next.Tools = slices.Insert(next.Tools, i, t)
		}
		qs := shapes.Queries(t.Description, 5)
		set := QuerySet{Queries: qs}
		centroid := make([]float32, sharedDims)
		for j, q := range qs {
			v := sharedVectors.of(b, q)
			set.Vectors = append(set.Vectors, v)
			for k, x := range v {
				centroid[k] += x / float32(len(qs))
			}
			for _, in := range text.Intents(q) {
				if set.IntentVectors == nil {
					set.IntentVectors = map[int][][]float32{}
				}
				set.IntentVectors[j] = append(set.IntentVectors[j], sharedVectors.of(b, in))
			}
		}
		f.raw[name] = contract.EncodeVector(centroid)
		if _, sampled := f.sets[name]; sampled {
			f.sets[name] = set
		}
	}
	if err := next.Seal(); err != nil {
		b.Fatal(err)
	}
	f.doc = &next
}

// index indexes the fixture's version in g, from the version g graded
// last when touched names the tools changed since.
func (f *sharedFixture) index(b testing.TB, g Grader, touched []string) {
	b.Helper()
	read := func(names []string) (map[string]string, error) {
		out := make(map[string]string, len(names))
		for _, name := range names {
			if v, ok := f.raw[name]; ok {
				out[name] = string(v)
			}
		}
		return out, nil
	}
	if err := g.Index(f.doc, 1000, func(name string) uint64 { return contract.VectorDigest(f.raw[name]) }, touched, read); err != nil {
		b.Fatal(err)
	}
}

// grade grades the version g indexed last with the fixture's query sets.
func (f *sharedFixture) grade(b testing.TB, g Grader) *Grading {
	b.Helper()
	got, left, err := g.Grade(context.Background(), f.sets)
	if err != nil || left != 0 {
		b.Fatalf("grade: %v, %d searches left", err, left)
	}
	return got
}

// embedTexts embeds texts as make bench-scale's provider embeds the
// shared shape (openaitest.WordsVector).
func embedTexts(_ testing.TB, texts []string) [][]float32 {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = make([]float32, sharedDims)
		for j, x := range openaitest.WordsVector(t, sharedDims) {
			out[i][j] = float32(x)
		}
	}
	return out
}

// sharedDims is the dimensions of the shared shape's vectors.
const sharedDims = 256

// BenchmarkGradeEdit grades the version after an edit of one tool's
// description in a catalog of the shared shape, from the grading of the
// version before, as the operator grades each version it publishes:
// searched/op is the queries the grade searched again of the 1,000 it
// grades.
func BenchmarkGradeEdit(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			f := newSharedFixture(b, n)
			g := NewGrader(-1, 0)
			f.index(b, g, nil)
			f.grade(b, g)
			searched, edit := 0, 0
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				name, _ := sharedTool(edit * 7919 % n)
				edit++
				f.change(b, map[string]string{name: ""}, func(d string) string { return d + shapes.Edit })
				b.StartTimer()
				f.index(b, g, []string{name})
				searched += f.grade(b, g).Searched
			}
			b.ReportMetric(float64(searched)/float64(b.N), "searched/op")
		})
	}
}
