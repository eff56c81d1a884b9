package catalog

import (
	"context"
	"fmt"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// benchTools are n ToolDefinitions shaped like real ones.
func benchTools(n int) []v1alpha1.ToolDefinition {
	tds := make([]v1alpha1.ToolDefinition, n)
	for i := range tds {
		name := fmt.Sprintf("tool_%05d", i)
		tds[i] = v1alpha1.ToolDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Generation: 1},
			Spec: v1alpha1.ToolDefinitionSpec{Name: name, Description: fmt.Sprintf("Tool %d does one specific thing for the users who ask for it.", i),
				Parameters: &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"query":{"type":"string","description":"what to look for"},"limit":{"type":"integer"}},"required":["query"]}`)}},
		}
	}
	return tds
}

// BenchmarkNoOpPass is a pass over a published catalog where nothing
// changed (a label-only edit): the CPU a pass spends before deciding to
// write nothing.
func BenchmarkNoOpPass(b *testing.B) {
	for _, n := range []int{1000, 10000, 50000} {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			f, sel, pl, tds, stored := publishedCatalog(b, n)
			for b.Loop() {
				o := noOpPass(b, f, sel, pl, tds, stored)
				if o.Build.Changed {
					b.Fatal("a pass with nothing to do would publish")
				}
			}
		})
	}
}

// publishedCatalog is a catalog of n tools published as version 1: its
// providers, selector, planner, ToolDefinitions and stored state. The
// timer starts after it.
func publishedCatalog(b testing.TB, n int) (*fakeProviders, *Selector, *Planner, []*v1alpha1.ToolDefinition, Stored) {
	f := &fakeProviders{model: "m", dims: 256}
	tds := pointers(benchTools(n))
	sel, pl := &Selector{}, &Planner{}
	empty := ReadStored(&contract.Snapshot{})
	first := noOpPass(b, f, sel, pl, tds, empty)
	stored, err := empty.Published(first.Build, 1)
	if err != nil {
		b.Fatal(err)
	}
	if b, ok := b.(*testing.B); ok {
		b.ResetTimer()
	}
	return f, sel, pl, tds, stored
}

func noOpPass(b testing.TB, f *fakeProviders, sel *Selector, pl *Planner, tds []*v1alpha1.ToolDefinition, stored Stored) *Outcome {
	s, err := sel.Select(tds, nil, Made{At: time.Now()})
	if err != nil {
		b.Fatal(err)
	}
	return passOver(b, f, pl, s, stored)
}

// passOver is the rest of a pass, after the selection s.
func passOver(b testing.TB, f *fakeProviders, pl *Planner, s Selection, stored Stored) *Outcome {
	plans, reuse := pl.Plan(PlanInput{Tools: s.Tools, Stored: stored.Tools, Lineage: stored.Lineage(), Model: f.model, QueriesPerTool: 2})
	now := time.Unix(1700000000, 0)
	refreshed := Refresh(context.Background(), f.providers(), plans, now, Budget{})
	build, err := BuildDocument(BuildInput{Catalog: "ns/c", Provider: "openai", Model: f.model, Plans: plans, Refreshed: refreshed, Stored: stored, Now: now})
	if err != nil {
		b.Fatal(err)
	}
	return &Outcome{Catalog: "c", Plans: plans, Reuse: reuse, Refreshed: refreshed, Build: build, Stored: stored, Version: stored.Version}
}

// An edit pass allocates for what changed, not for every tool: a
// catalog's passes at 50,000 tools would otherwise leave tens of
// megabytes of garbage each, which the collector's goal counts while it
// marks.
func TestAnEditPassAllocatesForWhatChanged(t *testing.T) {
	const n = 8000
	f, sel, pl, tds, stored := publishedCatalog(t, n)
	i := 0
	var recs *Records
	allocs := testing.AllocsPerRun(5, func() {
		i++
		stored, recs = editPass(t, f, sel, pl, tds, stored, recs, i)
	})
	t.Logf("%.0f allocations per edit pass over %d tools", allocs, n)
	if allocs > n/4 {
		t.Fatalf("an edit pass over %d tools made %.0f allocations; want far fewer than one per tool", n, allocs)
	}
}

// BenchmarkEditPass is the pass that follows one description edit in a
// published catalog: one tool is re-embedded and a version built and
// kept, the rest left as stored, and the records derived and compared
// with the last pass's.
func BenchmarkEditPass(b *testing.B) {
	for _, n := range []int{10000, 50000, 100000} {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			f, sel, pl, tds, stored := publishedCatalog(b, n)
			var recs *Records
			for i := 0; b.Loop(); i++ {
				stored, recs = editPass(b, f, sel, pl, tds, stored, recs, i)
			}
		})
	}
}

// editPass edits the description of one tool, picked by i, runs the pass
// that follows and returns the stored state it published and the
// records it derived over recs, the last pass's.
func editPass(b testing.TB, f *fakeProviders, sel *Selector, pl *Planner, tds []*v1alpha1.ToolDefinition, stored Stored, recs *Records, i int) (Stored, *Records) {
	td := tds[i*7919%len(tds)]
	td.Generation++
	td.Spec.Description = fmt.Sprintf("Tool %s, edited %d times, does one specific thing.", td.Name, td.Generation)
	// The watch named the object changed: the selection is updated with
	// it alone, as the manager's pass does.
	s, ok, err := sel.Update([]string{td.Name}, func(string) *v1alpha1.ToolDefinition { return td }, nil)
	if err != nil || !ok {
		b.Fatalf("the selection would not update (%v)", err)
	}
	o := passOver(b, f, pl, s, stored)
	if !o.Build.Changed {
		b.Fatal("an edit would not publish")
	}
	next, err := stored.Published(o.Build, stored.Version+1)
	if err != nil {
		b.Fatal(err)
	}
	o.Version, o.Published = next.Version, true
	derived := o.Records(recs)
	if objects, all := derived.Changed(recs); !all && len(objects) == 0 {
		b.Fatal("an edit changed no record")
	}
	return next, derived
}
