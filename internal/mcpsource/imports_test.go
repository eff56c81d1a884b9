package mcpsource

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
)

// A call goes out with a source's settings only for a tool its record
// lists: a tool it holds (whether or not status.pendingChanges still has
// room to say so) or a name another ToolDefinition took (skippedTools)
// is refused, however an entry in Redis names it.
func TestImportsIsAnAllowList(t *testing.T) {
	source := func(rec *v1alpha1.ImportRecord, pending ...v1alpha1.PendingChange) *v1alpha1.ToolSource {
		ts := &v1alpha1.ToolSource{Spec: v1alpha1.ToolSourceSpec{ToolNamePrefix: "crm_", Exclude: []string{"admin_*"}}}
		ts.Name = "crm"
		ts.Status.Imported, ts.Status.PendingChanges = rec, pending
		return ts
	}
	recorded := &v1alpha1.ImportRecord{UIDs: []types.UID{"a", "b"}, Specs: []string{"h1", "h2"}, Tools: []string{"crm_find", "crm_update"}}
	legacy := &v1alpha1.ImportRecord{UIDs: []types.UID{"a", "b"}}
	for _, tt := range []struct {
		name, tool, upstream string
		ts                   *v1alpha1.ToolSource
		ok                   bool
	}{
		{"recorded", "crm_find", "find", source(recorded), true},
		{"held, listed as pending", "crm_export", "export", source(recorded, v1alpha1.PendingChange{Tool: "crm_export", Change: v1alpha1.ChangeAdded}), false},
		{"held past what status lists", "crm_export", "export", source(recorded), false},
		{"a name another ToolDefinition took", "crm_delete", "delete", source(recorded), false},
		{"excluded", "crm_admin_wipe", "admin_wipe", source(&v1alpha1.ImportRecord{UIDs: []types.UID{"a"}, Specs: []string{"h"}, Tools: []string{"crm_admin_wipe"}}), false},
		{"another prefix", "find", "find", source(recorded), false},
		{"nothing imported", "crm_find", "find", source(&v1alpha1.ImportRecord{}), false},
		{"a record without names: held", "crm_export", "export", source(legacy, v1alpha1.PendingChange{Tool: "crm_export", Change: v1alpha1.ChangeAdded}), false},
		{"a record without names: until the next sync", "crm_find", "find", source(legacy), true},
	} {
		err := Imports(tt.ts, tt.tool, tt.upstream)
		if (err == nil) != tt.ok {
			t.Errorf("%s: %v, want allowed %v", tt.name, err, tt.ok)
		}
	}
}
