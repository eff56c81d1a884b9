package catalog

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// A build reads an unchanged tool's entry from the previous version's
// document (Build.from) rather than from the tool: through edits,
// additions, removals, renames, a failed embedding and permissions, every
// version is the one a build that reads each entry from its tool makes.
func TestABuildFromThePreviousVersionIsABuildFromScratch(t *testing.T) {
	for _, perms := range []bool{false, true} {
		t.Run(fmt.Sprintf("permissions=%v", perms), func(t *testing.T) {
			f := &fakeProviders{model: "m", dims: 8, failEmbed: map[string]error{}}
			tds := pointers(benchTools(40))
			if perms {
				tds[3].Spec.Permissions = &v1alpha1.ToolPermissions{AllowedPrincipals: []string{"group:ops", "ana"}}
			}
			sel, pl := &Selector{}, &Planner{}
			stored := ReadStored(&contract.Snapshot{})
			now := time.Unix(1700000000, 0)
			step := func(name string, changed ...*v1alpha1.ToolDefinition) {
				t.Helper()
				var s Selection
				var err error
				if len(changed) == 0 {
					s, err = sel.Select(tds, nil, Made{At: now})
				} else {
					var objects []string
					for _, td := range changed {
						objects = append(objects, td.Name)
					}
					var ok bool
					s, ok, err = sel.Update(objects, func(object string) *v1alpha1.ToolDefinition {
						if i := slices.IndexFunc(tds, func(td *v1alpha1.ToolDefinition) bool { return td.Name == object }); i >= 0 {
							return tds[i]
						}
						return nil
					}, nil)
					if !ok {
						t.Fatalf("%s: the selection would not update", name)
					}
				}
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				plans, _ := pl.Plan(PlanInput{Tools: s.Tools, Stored: stored.Tools, Lineage: stored.Lineage(), Model: f.model, QueriesPerTool: 2})
				now = now.Add(time.Minute)
				refreshed := Refresh(t.Context(), f.providers(), plans, now, Budget{})
				in := BuildInput{Catalog: "ns/c", Provider: "openai", Model: f.model, Plans: plans, Rejected: s.Rejected, Refreshed: refreshed, Stored: stored, Now: now}
				got, err := BuildDocument(in)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				in.Stored.from = nil
				want, err := BuildDocument(in)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if !reflect.DeepEqual(got.Document, want.Document) || !slices.Equal(got.Digests, want.Digests) || got.Changed != want.Changed {
					t.Fatalf("%s: the build from the previous version differs from the build from scratch:\n got %+v\nwant %+v", name, got.Document.Tools, want.Document.Tools)
				}
				if !got.Changed {
					t.Fatalf("%s: nothing to publish; the step tests nothing", name)
				}
				next, err := stored.Published(got, stored.Version+1)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				stored = next
			}
			step("first version")
			edit := func(td *v1alpha1.ToolDefinition, description string) *v1alpha1.ToolDefinition {
				td.Generation++
				td.Spec.Description = description
				return td
			}
			step("an edit", edit(tds[7], "Tool 7, edited, does one specific thing."))
			added := &benchTools(1)[0]
			added.Name, added.UID, added.Spec.Name = "tool_00007a", types.UID("uid-added"), "tool_00007a"
			tds = append(tds, added)
			step("an addition among the others", added)
			removed := tds[20]
			tds = slices.Delete(tds, 20, 21)
			step("a removal", removed)
			tds[30].Generation++
			tds[30].Spec.Name = "tool_00000z"
			step("a rename to another place in the order", tds[30])
			f.failEmbed["tool_00011"] = fmt.Errorf("the provider is down")
			step("a failed embedding keeps the previous entry", edit(tds[11], "Tool 11, edited, does one specific thing."), edit(tds[12], "Tool 12, edited."))
			delete(f.failEmbed, "tool_00011")
			tds[3].Generation++
			tds[3].Spec.Permissions = &v1alpha1.ToolPermissions{AllowedPrincipals: []string{"bo"}}
			step("a change of permissions and an edit", tds[3], edit(tds[11], "Tool 11, edited again."))
		})
	}
}
