package index

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/internal/testing/shapes"
)

// After each change of a catalog of the shared shape (requests repeated
// across tools, a third of them asking for two things), the grade that
// follows the change, searching only what it can move, grades as a
// grader of the version from scratch does: for an edit that brings a word
// of two requests into a tool, the rewording of a graded tool, a tool that
// comes and asks to be found by a request of two intents, and tools that
// go from the top of such requests. Every query kept ranks as from scratch.
func TestAGradeThatFollowsTheChangeGradesAsOneFromScratch(t *testing.T) {
	f := newSharedFixture(t, keptMinRows+500)
	queries := func() int {
		n := 0
		for _, set := range f.sets {
			n += len(set.Queries)
		}
		return n
	}
	g := &indexGrader{grader: grader{maxSearches: -1}}
	f.index(t, g, nil)
	f.grade(t, g)

	// The tools the requests of two intents rank first, graded or not.
	firsts := map[string]bool{}
	for _, gt := range g.tools {
		for _, o := range gt.outcomes {
			if o.intents != nil {
				firsts[o.first] = true
			}
		}
	}
	if len(firsts) < 2 {
		t.Fatalf("the requests of two intents rank %d tools first; the fixture needs more", len(firsts))
	}
	gone := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(firsts))[:2] {
		gone[name] = ""
	}
	graded := slices.Sorted(maps.Keys(f.sets))[3]
	steps := []struct {
		name     string
		tools    map[string]string
		describe func(string) string
	}{
		{"a word of two requests comes into a tool", map[string]string{"find_invoice_7": ""}, func(d string) string { return d + shapes.Edit }},
		{"a graded tool is reworded", map[string]string{graded: ""}, func(string) string {
			return "Refund the duplicate payment from yesterday and tell the customer by email."
		}},
		{"a tool comes", map[string]string{"refund_and_notify": "Refund a duplicate payment, then also tell the customer about it."}, func(d string) string { return d }},
		{"tools go", gone, func(string) string { return "" }},
	}
	for _, step := range steps {
		f.change(t, step.tools, step.describe)
		f.index(t, g, slices.Collect(maps.Keys(step.tools)))
		got := f.grade(t, g)
		fresh := &indexGrader{grader: grader{maxSearches: -1}}
		f.index(t, fresh, nil)
		whole := f.grade(t, fresh)
		t.Logf("%s: searched %d of %d queries, scanned %d", step.name, got.Searched, queries(), got.Scanned)
		if got.Searched >= queries()/2 {
			t.Errorf("%s: the grade searched %d of %d queries", step.name, got.Searched, queries())
		}
		got.Searched, got.Scanned, whole.Searched, whole.Scanned = 0, 0, 0, 0
		if !reflect.DeepEqual(got, whole) {
			t.Fatalf("%s: the grade that followed the change:\n%+v\nfrom scratch:\n%+v", step.name, got, whole)
		}
		for tn, gt := range g.tools {
			for i, o := range gt.outcomes {
				if w := fresh.tools[tn].outcomes[i]; !slices.Equal(o.top, w.top) {
					t.Fatalf("%s: %s's query %q ranks %s, from scratch %s", step.name, tn, gt.set.Queries[i], strings.Join(o.top, ","), strings.Join(w.top, ","))
				}
			}
		}
	}
}
