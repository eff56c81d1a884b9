package catalog

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
)

// A StoredTools derived version after version holds what a map changed
// the same way would, through the folds, and each version stays as it
// was made while later ones are derived from it.
func TestStoredToolsHoldWhatAMapWould(t *testing.T) {
	const n = 500
	rng := rand.New(rand.NewPCG(1, 2))
	model := map[string]StoredTool{}
	for i := range n {
		model[fmt.Sprintf("t%04d", i)] = StoredTool{HasVector: true, Vector: uint64(i)}
	}
	type version struct {
		tools StoredTools
		want  map[string]StoredTool
	}
	versions := []version{{StoredToolsOf(maps.Clone(model)), maps.Clone(model)}}
	folds := 0
	for v := 1; v <= 300; v++ {
		set, remove := map[string]StoredTool{}, []string(nil)
		for range 1 + rng.IntN(3) {
			// Names past n are additions.
			name := fmt.Sprintf("t%04d", rng.IntN(n+50))
			if rng.IntN(4) == 0 {
				remove = append(remove, name)
				delete(set, name)
				continue
			}
			set[name] = StoredTool{HasVector: true, Vector: uint64(1000*v + rng.IntN(1000))}
		}
		want := maps.Clone(versions[len(versions)-1].want)
		maps.Copy(want, set)
		for _, name := range remove {
			delete(want, name)
		}
		next := versions[len(versions)-1].tools.with(set, remove)
		if next.over == nil {
			folds++
		}
		versions = append(versions, version{next, want})
	}
	if folds == 0 {
		t.Fatal("300 versions of 500 tools never folded their changes")
	}
	for i, v := range versions {
		got := map[string]StoredTool{}
		for name, st := range v.tools.All() {
			if _, twice := got[name]; twice {
				t.Fatalf("version %d yields %s twice", i, name)
			}
			got[name] = st
		}
		if !maps.Equal(got, v.want) || v.tools.Len() != len(v.want) {
			t.Fatalf("version %d holds %d tools (Len %d); want %d, as the map", i, len(got), v.tools.Len(), len(v.want))
		}
		for _, name := range []string{"t0000", "t0499", "t0520", "t9999"} {
			st, ok := v.tools.Lookup(name)
			want, wantOK := v.want[name]
			if ok != wantOK || st != want || v.tools.Get(name) != want {
				t.Fatalf("version %d: Lookup(%s) = %v, %t; want %v, %t", i, name, st, ok, want, wantOK)
			}
		}
	}
}
