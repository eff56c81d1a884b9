package grading

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/selfgrade"
)

// The sample of tools a version grades, as a plain test: no API server,
// no Redis.
func TestGradingSample(t *testing.T) {
	stored := func(n int) catalog.Stored {
		s, tools := catalog.Stored{Doc: &contract.Document{}}, map[string]catalog.StoredTool{}
		for i := range n {
			name := fmt.Sprintf("tool_%04d", i)
			s.Doc.Tools = append(s.Doc.Tools, contract.Tool{Name: name})
			queries := []string{"q1 " + name, "q2 " + name}
			if i%10 == 9 {
				queries = queries[:1] // too few queries to grade
			}
			tools[name] = catalog.StoredTool{Metadata: &contract.Metadata{SyntheticQueries: queries}}
		}
		s.Tools = catalog.StoredToolsOf(tools)
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

// A state's estimated size bounds the heap it holds, from a small
// catalog to one that keeps its queries' rankings, so --grading-max-memory
// bounds what the states take: an estimate under the heap lets the
// states outgrow the budget they are dropped by.
func TestGradingStateSizeBoundsItsHeap(t *testing.T) {
	for _, c := range []struct{ tools, words int }{{200, 12}, {1000, 60}, {selfgrade.KeptMinTools + 500, 12}} {
		t.Run(fmt.Sprintf("%d tools of %d words", c.tools, c.words), func(t *testing.T) {
			stored, vectors := gradedCatalog(t, c.tools, c.words)
			queries := &catalog.QueryVectors{}
			job := &gradeJob{version: 1, stored: stored, emb: embedding.LexicalEmbedder{}, changed: map[string]bool{}, queries: queries,
				vectors: func(_ context.Context, names []string) (map[string]string, error) {
					out := make(map[string]string, len(names))
					for _, n := range names {
						out[n] = vectors[n]
					}
					return out, nil
				}}
			// A first grading fills what the process keeps for any
			// catalog (the bounded stem cache), which no state holds.
			warm := *job
			warm.queries = &catalog.QueryVectors{}
			if _, _, err := (&gradeState{grader: selfgrade.New(-1, 0)}).grade(t.Context(), &warm); err != nil {
				t.Fatal(err)
			}
			before := heapAlloc()
			st := &gradeState{grader: selfgrade.New(-1, 0)}
			if _, _, err := st.grade(t.Context(), job); err != nil {
				t.Fatal(err)
			}
			held := int64(heapAlloc()) - int64(before)
			estimate := st.size()
			t.Logf("%d tools: the state holds %d bytes, estimated %d", c.tools, held, estimate)
			if estimate < held || estimate > 2*held {
				t.Fatalf("%d tools: the state holds %d bytes of heap; its estimate %d must be at least that and at most twice", c.tools, held, estimate)
			}
			runtime.KeepAlive(st)
			runtime.KeepAlive(stored)
			runtime.KeepAlive(vectors)
		})
	}
}

// heapAlloc is the heap in use once the garbage is collected, and the
// scratch buffers pooled (which survive one collection) with it.
func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// gradedCatalog is a published catalog of n tools written as tools are
// (a description of the number of words given, three parameters, five
// queries), with their vectors as Redis holds them.
func gradedCatalog(t *testing.T, n, words int) (catalog.Stored, map[string]string) {
	t.Helper()
	// Words drawn from a vocabulary of 5,000 by Zipf's law, as the
	// words of tool descriptions are.
	rnd := rand.New(rand.NewPCG(uint64(n), 1))
	zipf := rand.NewZipf(rnd, 1.1, 2, 4999)
	syllables := strings.Fields("ka lo mi nu pe ra si to vu ze ba de fi go hu")
	word := func() string {
		w := zipf.Uint64()
		var b strings.Builder
		for ; ; w /= uint64(len(syllables)) {
			b.WriteString(syllables[w%uint64(len(syllables))])
			if w < uint64(len(syllables)) {
				return b.String()
			}
		}
	}
	emb := embedding.LexicalEmbedder{}
	stored := catalog.Stored{Doc: &contract.Document{Embedding: contract.EmbeddingInfo{Model: emb.Model(), Dimensions: emb.Dimensions()}}}
	tools, vectors := map[string]catalog.StoredTool{}, map[string]string{}
	for i := range n {
		name := fmt.Sprintf("%s_%s_%05d", word(), word(), i)
		desc := make([]string, words)
		for k := range desc {
			desc[k] = word()
		}
		stored.Doc.Tools = append(stored.Doc.Tools, contract.Tool{Name: name, Description: strings.Join(desc, " "),
			Parameters: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"%s":{"type":"string","description":"the %s %s"},"%s":{"type":"integer"},"limit":{"type":"integer"}}}`, word(), word(), word(), word()))})
		qs := make([]string, 5)
		for k := range qs {
			qs[k] = fmt.Sprintf("%s the %s of my %s", word(), word(), word())
		}
		vecs, err := emb.Embed(t.Context(), []string{strings.Join(desc, " ")})
		if err != nil {
			t.Fatal(err)
		}
		raw := contract.EncodeVector(vecs[0])
		vectors[name] = string(raw)
		tools[name] = catalog.StoredTool{HasVector: true, Vector: contract.VectorDigest(raw), Metadata: &contract.Metadata{Model: emb.Model(), Dimensions: emb.Dimensions(), SyntheticQueries: qs}}
	}
	stored.Tools = catalog.StoredToolsOf(tools)
	if err := stored.Doc.Seal(); err != nil {
		t.Fatal(err)
	}
	return stored, vectors
}

// touchRecorder is a Grader that keeps what each Index was told changed.
type touchRecorder struct {
	selfgrade.Grader
	told [][]string
}

func (r *touchRecorder) Index(doc *contract.Document, chunk int, digest func(string) uint64, touched []string, read func([]string) (map[string]string, error)) error {
	r.told = append(r.told, touched)
	return r.Grader.Index(doc, chunk, digest, touched, read)
}

// The grading of a version published from the one graded last tells its
// index which tools that publish changed, so only those are looked at;
// of any other version, nothing, so every tool is.
func TestGradingTellsTheIndexWhatChanged(t *testing.T) {
	base, vectors := gradedCatalog(t, 300, 12)
	all := func(stored catalog.Stored) catalog.Build {
		b := catalog.Build{Document: stored.Doc, Vectors: map[string][]byte{}, Metadata: map[string][]byte{}}
		for name, st := range stored.Tools.All() {
			b.Vectors[name] = []byte(vectors[name])
			m := *st.Metadata
			m.SpecHash = "h"
			b.Metadata[name], _ = m.Marshal()
		}
		return b
	}
	v1, err := catalog.ReadStored(&contract.Snapshot{}).Published(all(base), 1)
	if err != nil {
		t.Fatal(err)
	}
	// One tool's description and vector change in version 2.
	edited := base.Doc.Tools[7].Name
	doc2 := *v1.Doc
	doc2.Tools = slices.Clone(doc2.Tools)
	doc2.Tools[7].Description = "a description edited since"
	vec2 := contract.EncodeVector(append([]float32{1}, make([]float32, embedding.LexicalEmbedder{}.Dimensions()-1)...))
	m := *v1.Tools.Get(edited).Metadata
	raw2, _ := m.Marshal()
	v2, err := v1.Published(catalog.Build{Document: &doc2, Vectors: map[string][]byte{edited: vec2}, Metadata: map[string][]byte{edited: raw2}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	rec := &touchRecorder{Grader: selfgrade.New(-1, 0)}
	st := &gradeState{grader: rec}
	for _, v := range []catalog.Stored{v1, v2, v1} {
		job := &gradeJob{version: v.Version, stored: v, emb: embedding.LexicalEmbedder{}, changed: map[string]bool{}, queries: &catalog.QueryVectors{},
			vectors: func(_ context.Context, names []string) (map[string]string, error) {
				out := make(map[string]string, len(names))
				for _, n := range names {
					out[n] = vectors[n]
					if n == edited && v.Version == 2 {
						out[n] = string(vec2)
					}
				}
				return out, nil
			}}
		if _, _, err := st.grade(t.Context(), job); err != nil {
			t.Fatal(err)
		}
	}
	if len(rec.told) != 3 || rec.told[0] != nil || !slices.Equal(rec.told[1], []string{edited}) || rec.told[2] != nil {
		t.Fatalf("the indexes were told %q; want nothing for the first version, %s for the next, nothing for an older one", rec.told, edited)
	}
}

// The sample of a version published from the one sampled last is picked
// from the order kept of that one, with only the tools the publish
// changed moved, and is the sample a walk of every tool picks; a version
// of unknown descent is walked.
func TestGradingSampleFollowsThePublishes(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 9))
	meta := func(name string, queries int) []byte {
		qs := []string{"q1 " + name, "q2 " + name, "q3 " + name}[:queries]
		raw, _ := (&contract.Metadata{SpecHash: "h", Model: "m", SyntheticQueries: qs}).Marshal()
		return raw
	}
	names := map[string]bool{}
	b := catalog.Build{Document: &contract.Document{}, Metadata: map[string][]byte{}}
	for i := range 1000 {
		name := fmt.Sprintf("tool_%04d", i)
		names[name] = true
		b.Metadata[name] = meta(name, 2+i%2)
	}
	document := func() *contract.Document {
		d := &contract.Document{}
		for _, name := range slices.Sorted(maps.Keys(names)) {
			d.Tools = append(d.Tools, contract.Tool{Name: name, Description: "does " + name})
		}
		return d
	}
	b.Document = document()
	stored, err := catalog.ReadStored(&contract.Snapshot{}).Published(b, 1)
	if err != nil {
		t.Fatal(err)
	}
	var order sampleOrder
	check := func(step string, changed map[string]bool) []string {
		t.Helper()
		got, want := order.sample(stored, changed), gradingSample(stored, changed)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: sampled %d tools, %v...; a walk of every tool samples %d, %v...", step, len(got), got[:min(5, len(got))], len(want), want[:min(5, len(want))])
		}
		return got
	}
	check("first version", nil)
	for step := range 40 {
		next := catalog.Build{Metadata: map[string][]byte{}}
		changed := map[string]bool{}
		sorted := slices.Sorted(maps.Keys(names))
		for range 1 + rnd.IntN(20) {
			name := sorted[rnd.IntN(len(sorted))]
			switch rnd.IntN(4) {
			case 0: // gone
				delete(names, name)
				next.Removed = append(next.Removed, name)
			case 1: // come
				name = fmt.Sprintf("new_%02d_%s", step, name)
				names[name] = true
				next.Metadata[name] = meta(name, 2)
			default: // re-embedded, with one query or more
				next.Metadata[name] = meta(name, 1+rnd.IntN(3))
			}
			changed[name] = true
		}
		next.Document = document()
		if stored, err = stored.Published(next, int64(step+2)); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("step %d", step), changed)
	}
	// The sample is picked from the order kept, not by a walk: a tool
	// taken out of the order behind its back is not sampled after a
	// publish that did not change it, and is again once a version of
	// unknown descent is walked.
	lowest := order.list[0].name
	order.list = order.list[1:]
	edited := slices.Sorted(maps.Keys(names))[0]
	if edited == lowest {
		edited = slices.Sorted(maps.Keys(names))[1]
	}
	if stored, err = stored.Published(catalog.Build{Document: document(), Metadata: map[string][]byte{edited: meta(edited, 3)}}, 100); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(order.sample(stored, nil), lowest) {
		t.Fatal("the sample of a version published from the last one was picked by a walk of every tool")
	}
	all := map[string][]byte{}
	for name := range names {
		all[name] = meta(name, 2)
	}
	stored, err = catalog.ReadStored(&contract.Snapshot{}).Published(catalog.Build{Document: document(), Metadata: all}, 101)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(check("a version of unknown descent", nil), lowest) {
		t.Fatalf("%s, of lowest rank, is not sampled after a walk", lowest)
	}
}
