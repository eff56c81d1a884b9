package catalog

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// A record names the version that published its embedding: kept while
// the embedding is the same, the new version once it is re-embedded and
// published, and every ToolDefinition of many is found, the others not.
func TestRecordsKeepTheVersionOfTheirEmbedding(t *testing.T) {
	f := &fakeProviders{model: "m", dims: 4}
	var tools []v1alpha1.ToolDefinition
	for i := range 40 {
		name := fmt.Sprintf("t%02d", 39-i) // not in name order
		tools = append(tools, td(name, name, okParams))
	}
	first := pass(t, f, tools, ReadStored(&contract.Snapshot{}), Request{})
	first.Version, first.Published = 1, true
	had := map[string]*v1alpha1.CatalogEmbeddingStatus{}
	for _, tool := range tools {
		rec, ok := first.Records(nil).For(tool.Name, nil)
		if !ok || rec.CatalogVersion != 1 || rec.SpecHash == "" || rec.Model != "m" || rec.QueryCount != 2 || rec.EmbeddedTime == nil || rec.Catalog != "c" {
			t.Fatalf("first record of %s: %v %+v", tool.Name, ok, rec)
		}
		had[tool.Name] = &rec
	}

	tools[5].Spec.Description = "edited"
	edited := tools[5].Name
	second := pass(t, f, tools, publishedState(t, first, 1), Request{})
	second.Version, second.Published = 2, true
	recs := second.Records(nil)
	for _, tool := range tools {
		rec, ok := recs.For(tool.Name, had[tool.Name])
		want := int64(1)
		if tool.Name == edited {
			want = 2
		}
		if !ok || rec.CatalogVersion != want {
			t.Errorf("%s: selected %v, version %d, want %d", tool.Name, ok, rec.CatalogVersion, want)
		}
	}
	// Without a record to keep, the record names the current version.
	if rec, _ := recs.For(tools[0].Name, nil); rec.CatalogVersion != 2 {
		t.Errorf("a ToolDefinition without a record gets version %d, want 2", rec.CatalogVersion)
	}
	for _, object := range []string{"", "t", "t00a", "zz"} {
		if _, ok := recs.For(object, nil); ok {
			t.Errorf("%q has a record", object)
		}
	}

	// What changed from the first records to the second is the edited
	// tool's record; from none, everything.
	if objects, all := recs.Changed(first.Records(nil)); all || len(objects) != 1 || objects[0] != edited {
		t.Errorf("changed from the first pass: %v, all %v; want %s alone", objects, all, edited)
	}
	// Records whose objects are at the same places as the last pass's
	// find them through its index, and find what their own would.
	firstRecs, again := first.Records(nil), second.Records(nil)
	again.Changed(firstRecs)
	if reflect.ValueOf(again.plans.at).Pointer() != reflect.ValueOf(firstRecs.plans.at).Pointer() {
		t.Error("records in step with the last pass's made an index of their own")
	}
	for _, tool := range tools {
		got, ok := again.For(tool.Name, had[tool.Name])
		want, _ := recs.For(tool.Name, had[tool.Name])
		if !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("%s through the last pass's index: %v %+v, want %+v", tool.Name, ok, got, want)
		}
	}
	if _, all := recs.Changed(nil); !all {
		t.Error("with no records before, not everything changed")
	}
	// A tool no longer selected has its record changed (removed).
	third := pass(t, f, tools[1:], publishedState(t, second, 2), Request{})
	third.Version, third.Published = 3, true
	if objects, _ := third.Records(nil).Changed(recs); len(objects) != 1 || objects[0] != tools[0].Name {
		t.Errorf("changed when %s left: %v", tools[0].Name, objects)
	}
	if objects := recs.Objects(map[string]bool{tools[7].Spec.Name: true, "nobody": true}); len(objects) != 1 || objects[0] != tools[7].Name {
		t.Errorf("objects of tool %s: %v", tools[7].Spec.Name, objects)
	}
}

// Records are found by object whatever order the objects' names run in
// against their tools', one per ToolDefinition, and a tool whose refresh
// failed has its failure's record, not its plan's.
func TestRecordsAreByObject(t *testing.T) {
	f := &fakeProviders{model: "m", dims: 4}
	var tools []v1alpha1.ToolDefinition
	for i := range 20 {
		tools = append(tools, td(fmt.Sprintf("obj-%02d", 19-i), fmt.Sprintf("tool_%02d", i), okParams))
	}
	stored := publishedState(t, pass(t, f, tools, ReadStored(&contract.Snapshot{}), Request{}), 1)
	failed := &tools[3]
	failed.Spec.Description = "edited"
	f.failGen = map[string]error{failed.Spec.Name: &embedding.Error{Kind: embedding.KindServer, Err: errors.New("500")}}
	recs := pass(t, f, tools, stored, Request{}).Records(nil)
	for _, tool := range tools {
		want := ""
		if tool.Name == failed.Name {
			want = v1alpha1.ReasonQueryGenerationFailed
		}
		if rec, ok := recs.For(tool.Name, nil); !ok || rec.Reason != want || rec.SpecHash == "" {
			t.Errorf("%s: selected %v, record %+v, want reason %q", tool.Name, ok, rec, want)
		}
	}
	if len(recs.plans.index()) != len(tools) {
		t.Errorf("%d records for %d ToolDefinitions", len(recs.plans.index()), len(tools))
	}
}

// checkRecords checks out's records, derived over last (the last pass's),
// against records derived from every plan, object by object, given had,
// the records the objects have; and that every record that changed is
// among those Changed names. It returns the records, the objects' records
// after them, and shared counted up when the records were derived over
// last's.
func checkRecords(t *testing.T, step string, out *Outcome, last *Records, had map[string]*v1alpha1.CatalogEmbeddingStatus, shared int) (*Records, map[string]*v1alpha1.CatalogEmbeddingStatus, int) {
	t.Helper()
	recs, whole := out.Records(last), out.Records(nil)
	if last != nil && recs.plans == last.plans {
		shared++
	}
	objects := map[string]bool{}
	for object := range had {
		objects[object] = true
	}
	whole.each(func(r *record) { objects[r.object] = true })
	named, all := recs.Changed(last)
	listed := map[string]bool{}
	for _, o := range named {
		listed[o] = true
	}
	now := map[string]*v1alpha1.CatalogEmbeddingStatus{}
	for object := range objects {
		got, ok := recs.For(object, had[object])
		want, wantOK := whole.For(object, had[object])
		if ok != wantOK || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: the record of %s derived over the last pass's is %v %+v; from every plan %v %+v", step, object, ok, got, wantOK, want)
		}
		changed := ok != (had[object] != nil) || ok && !SameRecord(got, *had[object])
		if changed && !all && !listed[object] {
			t.Fatalf("%s: the record of %s changed from %+v to %+v, and Changed did not name it (it named %v)", step, object, had[object], got, named)
		}
		if ok {
			now[object] = &got
		}
	}
	return recs, now, shared
}
