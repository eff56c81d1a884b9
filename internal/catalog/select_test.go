package catalog

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
)

// A selection updated with the ToolDefinitions that changed is the one
// made whole from all of them, through any sequence of edits: tools
// created, edited, renamed into and out of conflicts, made invalid and
// valid, deleted, being deleted, recreated under the same name, and
// naming a ToolSource that did or did not create them. The tools that did
// not change keep their entries (the planner reuses their plans by
// pointer).
func TestSelectorUpdateIsTheWholeSelection(t *testing.T) {
	source := &v1alpha1.ToolSource{ObjectMeta: metav1.ObjectMeta{Name: "crm"}, Status: v1alpha1.ToolSourceStatus{Imported: &v1alpha1.ImportRecord{}}}
	sources := sourcesOf(source)
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(seed, 7))
			live := map[string]*v1alpha1.ToolDefinition{}
			uids := 0
			edit := func(object string) {
				old := live[object]
				switch rnd.IntN(8) {
				case 0:
					delete(live, object)
					return
				case 1:
					if old != nil {
						d := old.DeepCopy()
						d.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
						live[object] = d
						return
					}
				}
				d := td(object, fmt.Sprintf("name_%d", rnd.IntN(6)), okParams)
				switch rnd.IntN(6) {
				case 0:
					d.Spec.Parameters.Raw = []byte(`{"type":12}`)
				case 1:
					// Names the source, which did not create it.
					d.Spec.Source = &v1alpha1.ToolSourceReference{ToolSource: "crm", Tool: "x"}
				}
				d.Spec.Description = fmt.Sprintf("does %s, version %d", d.Spec.Name, rnd.IntN(1000))
				if old != nil && rnd.IntN(4) > 0 {
					d.UID, d.Generation = old.UID, old.Generation+1
				} else {
					uids++
					d.UID, d.Generation = types.UID(fmt.Sprint("uid-", uids)), 1
				}
				live[object] = &d
			}
			get := func(object string) *v1alpha1.ToolDefinition { return live[object] }
			all := func() []*v1alpha1.ToolDefinition {
				var out []*v1alpha1.ToolDefinition
				for _, d := range live {
					out = append(out, d)
				}
				rnd.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
				return out
			}
			s := &Selector{}
			if _, ok, _ := s.Update(nil, get, sources); ok {
				t.Fatal("Update without a selection made whole reported one")
			}
			for i := range 12 {
				edit(fmt.Sprint("td-", i))
			}
			before, err := s.Select(all(), sources, Made{At: time.Unix(1, 0)})
			if err != nil {
				t.Fatal(err)
			}
			for step := range 60 {
				var changed []string
				for range 1 + rnd.IntN(3) {
					object := fmt.Sprint("td-", rnd.IntN(14))
					edit(object)
					changed = append(changed, object)
				}
				got, ok, err := s.Update(changed, get, sources)
				if err != nil || !ok {
					t.Fatalf("step %d: Update = %v, %v", step, ok, err)
				}
				want, err := (&Selector{}).Select(all(), sources, Made{At: time.Unix(1, 0)})
				if err != nil {
					t.Fatal(err)
				}
				if d := selectionDiff(got, want); d != "" {
					t.Fatalf("step %d, after %v: %s", step, changed, d)
				}
				for _, tool := range got.Tools {
					if slices.Contains(changed, tool.Object) {
						continue
					}
					if i := slices.IndexFunc(before.Tools, func(b *Tool) bool { return b.Object == tool.Object }); i >= 0 && before.Tools[i] != tool {
						t.Fatalf("step %d: %s did not change and its entry was derived again", step, tool.Object)
					}
				}
				before = got
			}
		})
	}
}

// selectionDiff says how two selections differ, "" when they do not.
func selectionDiff(got, want Selection) string {
	summary := func(s Selection) []string {
		var out []string
		for _, t := range s.Tools {
			out = append(out, fmt.Sprintf("%s=%s %q", t.Entry.Name, t.Object, t.Entry.Description))
		}
		for _, f := range s.Rejected {
			out = append(out, fmt.Sprintf("rejected %s (%s): %s %s", f.Object, f.Tool, f.Reason, f.Message))
		}
		return out
	}
	if g, w := summary(got), summary(want); !slices.Equal(g, w) {
		return fmt.Sprintf("updated\n%v\nwhole\n%v", g, w)
	}
	return ""
}

// Changes name the ToolDefinitions changed since the last Take, and say
// everything changed before the first, past MaxChanges and when told.
func TestChanges(t *testing.T) {
	var c Changes
	c.Add("early")
	if objects, whole := c.Take(); !whole || objects != nil {
		t.Fatalf("first Take = %v, %v; want everything", objects, whole)
	}
	if objects, whole := c.Take(); whole || len(objects) != 0 {
		t.Fatalf("Take with nothing changed = %v, %v", objects, whole)
	}
	c.Add("b", "a")
	c.Add("b")
	if objects, whole := c.Take(); whole || !slices.Equal(objects, []string{"a", "b"}) {
		t.Fatalf("Take = %v, %v; want a and b", objects, whole)
	}
	for i := range MaxChanges + 1 {
		c.Add(fmt.Sprint(i))
	}
	if objects, whole := c.Take(); !whole || objects != nil {
		t.Fatalf("Take past MaxChanges = %d objects, whole %v; want everything", len(objects), whole)
	}
	c.Add("a")
	c.All()
	c.Add("b")
	if _, whole := c.Take(); !whole {
		t.Fatal("Take after All did not say everything")
	}
}
