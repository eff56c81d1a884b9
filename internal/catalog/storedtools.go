package catalog

import (
	"iter"
	"maps"
	"math"
)

// StoredTools is what Redis holds for each tool, by name: a shared map
// with the changes of the versions since laid over it. A version's state
// is derived from the last one's (Stored.Published) by laying its
// changes over the same map rather than copying it: at 100,000 tools a
// copy per version was 10 MB and, while the collector marked, 60 ms. The
// changes are folded into a new map once they number about the square
// root of twice the tools, which keeps what a version copies (its
// changes, and that new map every so many versions) smallest. A
// StoredTools is never changed once made; the zero value holds nothing.
type StoredTools struct {
	base map[string]StoredTool
	// over holds the changes laid on base: an entry, or a removal.
	over map[string]storedChange
	n    int
}

// storedChange is what a version changed of a tool: its new entry, or
// gone when the tool's entry was removed.
type storedChange struct {
	tool StoredTool
	gone bool
}

// StoredToolsOf is tools, which nothing may change after.
func StoredToolsOf(tools map[string]StoredTool) StoredTools {
	return StoredTools{base: tools, n: len(tools)}
}

// Lookup is the tool's entry, and whether there is one.
func (t StoredTools) Lookup(name string) (StoredTool, bool) {
	if c, ok := t.over[name]; ok {
		return c.tool, !c.gone
	}
	st, ok := t.base[name]
	return st, ok
}

// Get is the tool's entry, the zero StoredTool when there is none.
func (t StoredTools) Get(name string) StoredTool {
	st, _ := t.Lookup(name)
	return st
}

// Len is how many tools have an entry.
func (t StoredTools) Len() int { return t.n }

// All yields each tool's name and entry, in no order.
func (t StoredTools) All() iter.Seq2[string, StoredTool] {
	return func(yield func(string, StoredTool) bool) {
		for name, st := range t.base {
			if _, changed := t.over[name]; !changed && !yield(name, st) {
				return
			}
		}
		for name, c := range t.over {
			if !c.gone && !yield(name, c.tool) {
				return
			}
		}
	}
}

// with is t with the entries of set laid over it and those of remove
// gone; t itself is not changed.
func (t StoredTools) with(set map[string]StoredTool, remove []string) StoredTools {
	over := make(map[string]storedChange, len(t.over)+len(set)+len(remove))
	maps.Copy(over, t.over)
	next := StoredTools{base: t.base, over: over, n: t.n}
	for name, st := range set {
		if _, ok := next.Lookup(name); !ok {
			next.n++
		}
		over[name] = storedChange{tool: st}
	}
	for _, name := range remove {
		if _, ok := next.Lookup(name); ok {
			next.n--
			over[name] = storedChange{gone: true}
		}
	}
	if len(over) > foldAt(len(t.base)) {
		next = next.folded()
	}
	return next
}

// foldAt is how many changes a StoredTools of n tools lays over them
// before folding them in: copying the changes with each version and the
// whole map every foldAt versions cost about as much then, and least.
func foldAt(n int) int {
	return int(math.Sqrt(2*float64(n))) + 16
}

// folded is t as one map.
func (t StoredTools) folded() StoredTools {
	base := make(map[string]StoredTool, t.n)
	for name, st := range t.All() {
		base[name] = st
	}
	return StoredToolsOf(base)
}
