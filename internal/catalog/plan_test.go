package catalog

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

func stored(hash, model string, dims int, queries ...string) StoredTool {
	return StoredTool{HasVector: true, Metadata: &contract.Metadata{SpecHash: hash, Model: model, Dimensions: dims, SyntheticQueries: queries}}
}

var fiveQueries = []string{"q1", "q2", "q3", "q4", "q5"}

func TestPlanClassification(t *testing.T) {
	tests := []struct {
		name        string
		tool        *Tool
		stored      *StoredTool
		wantStale   string
		wantInvalid bool
		wantAction  Action
		wantGen     int
	}{
		{"up to date", tool("a", "h"), ptr(stored("h", "m", 8, fiveQueries...)), "", false, ActionNone, 0},
		{"new tool", tool("a", "h"), nil, StaleNew, true, ActionRegenerate, 5},
		{"unreadable metadata", tool("a", "h"), &StoredTool{MetadataErr: errors.New("bad json"), HasVector: true}, StaleUnreadable, true, ActionRegenerate, 5},
		{"spec changed", tool("a", "h2"), ptr(stored("h", "m", 8, fiveQueries...)), StaleSpecChanged, false, ActionRegenerate, 5},
		{"model changed keeps queries", tool("a", "h"), ptr(stored("h", "old-model", 8, fiveQueries...)), StaleModel, false, ActionEmbed, 0},
		{"dimensions changed", tool("a", "h"), ptr(stored("h", "m", 4, fiveQueries...)), StaleModel, false, ActionEmbed, 0},
		{"vector missing", tool("a", "h"), &StoredTool{Metadata: stored("h", "m", 8, fiveQueries...).Metadata}, StaleNoVector, false, ActionEmbed, 0},
		{"too few queries", tool("a", "h"), ptr(stored("h", "m", 8, "q1", "q2")), "", true, ActionRegenerate, 5},
		{"empty query", tool("a", "h"), ptr(stored("h", "m", 8, "q1", "q2", " ", "q4", "q5")), "", true, ActionRegenerate, 5},
		{"example kept, rest generated", tool("a", "h2", "ex1", "ex2"), ptr(stored("h", "m", 8, fiveQueries...)), StaleSpecChanged, true, ActionRegenerate, 3},
		{"new example makes the set invalid", tool("a", "h", "ex1"), ptr(stored("h", "m", 8, fiveQueries...)), "", true, ActionRegenerate, 4},
		{"examples above queriesPerTool all count", tool("a", "h", "1", "2", "3", "4", "5", "6"), ptr(stored("h", "m", 8, "1", "2", "3", "4", "5", "6")), "", false, ActionNone, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := PlanInput{Tools: []*Tool{tt.tool}, Model: "m", Dimensions: 8, QueriesPerTool: 5}
			if tt.stored != nil {
				in.Stored = StoredToolsOf(map[string]StoredTool{"a": *tt.stored})
			}
			p := Plan(in)[0]
			if p.StaleReason != tt.wantStale || p.Stale != (tt.wantStale != "") {
				t.Errorf("stale = %v (%q), want %q", p.Stale, p.StaleReason, tt.wantStale)
			}
			if p.Invalid != tt.wantInvalid {
				t.Errorf("invalid = %v (%q), want %v", p.Invalid, p.InvalidReason, tt.wantInvalid)
			}
			if p.Action != tt.wantAction || p.Generate != tt.wantGen {
				t.Errorf("action %s generate %d, want %s %d", p.Action, p.Generate, tt.wantAction, tt.wantGen)
			}
			if p.Action == ActionRegenerate && !slices.Equal(p.Queries, tt.tool.Examples) {
				t.Errorf("regenerate keeps %q, want the examples %q", p.Queries, tt.tool.Examples)
			}
			if p.Action == ActionEmbed && !slices.Equal(p.Queries, tt.stored.Metadata.SyntheticQueries) {
				t.Errorf("embed uses %q, want the stored set", p.Queries)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func tool(name, hash string, examples ...string) *Tool {
	return &Tool{Object: name, Entry: contract.Tool{Name: name, SpecHash: hash}, Examples: examples}
}

func TestPlanModes(t *testing.T) {
	tools := []*Tool{
		tool("fresh", "h"),
		tool("changed", "new"),
		tool("broken", "h"),
		tool("remodel", "h"),
	}
	st := map[string]StoredTool{
		"fresh":   stored("h", "m", 8, fiveQueries...),
		"changed": stored("old", "m", 8, fiveQueries...),
		"broken":  stored("h", "m", 8, "only one"),
		"remodel": stored("h", "other", 8, fiveQueries...),
	}
	tests := []struct {
		mode     v1alpha1.RefreshMode
		targets  []string
		want     map[string]Action
		deferred []string
	}{
		{modeNormal, nil, map[string]Action{"fresh": ActionNone, "changed": ActionRegenerate, "broken": ActionRegenerate, "remodel": ActionEmbed}, nil},
		{v1alpha1.RefreshModeForce, nil, map[string]Action{"fresh": ActionRegenerate, "changed": ActionRegenerate, "broken": ActionRegenerate, "remodel": ActionRegenerate}, nil},
		{v1alpha1.RefreshModeForce, []string{"fresh"}, map[string]Action{"fresh": ActionRegenerate, "changed": ActionRegenerate, "broken": ActionRegenerate, "remodel": ActionEmbed}, nil},
		{modeNormal, []string{"fresh"}, map[string]Action{"fresh": ActionRegenerate, "changed": ActionRegenerate, "broken": ActionRegenerate, "remodel": ActionEmbed}, nil},
		{v1alpha1.RefreshModeInvalidOnly, nil, map[string]Action{"fresh": ActionNone, "changed": ActionNone, "broken": ActionRegenerate, "remodel": ActionNone}, []string{"changed", "remodel"}},
		{v1alpha1.RefreshModeEmbedOnly, nil, map[string]Action{"fresh": ActionEmbed, "changed": ActionNone, "broken": ActionNone, "remodel": ActionEmbed}, []string{"changed", "broken"}},
		{v1alpha1.RefreshModeEmbedOnly, []string{"remodel"}, map[string]Action{"fresh": ActionNone, "changed": ActionNone, "broken": ActionNone, "remodel": ActionEmbed}, []string{"changed", "broken"}},
	}
	for _, tt := range tests {
		t.Run(string(tt.mode)+"/"+joinNames(tt.targets), func(t *testing.T) {
			plans := Plan(PlanInput{Tools: tools, Stored: StoredToolsOf(st), Model: "m", Dimensions: 8, QueriesPerTool: 5, Mode: tt.mode, Targets: tt.targets})
			var deferred []string
			for _, p := range plans {
				if p.Action != tt.want[p.Name] {
					t.Errorf("%s: action %s, want %s", p.Name, p.Action, tt.want[p.Name])
				}
				if p.Deferred {
					deferred = append(deferred, p.Name)
				}
			}
			if !slices.Equal(deferred, tt.deferred) {
				t.Errorf("deferred %v, want %v", deferred, tt.deferred)
			}
		})
	}
}

func joinNames(n []string) string {
	if len(n) == 0 {
		return "all"
	}
	return n[0]
}

// A Planner's plans are Plan's, pass after pass: after a publish, an
// edit, a tool gone and another come, a refresh request, a failed
// refresh and a model change. Between passes it looks up only what
// changed, so a stored entry changed behind the stored state's lineage
// goes unseen: the test shows that it did reuse. The records of the
// plans it repeats are the last pass's, shared, and every record is what
// records derived from every plan say.
func TestPlannerPlansAsPlanDoes(t *testing.T) {
	f := &fakeProviders{model: "m", dims: 8}
	tds := manyTDs(500)
	for i := range tds {
		tds[i].UID, tds[i].Generation = types.UID(tds[i].Name), 1
	}
	sel, planner := &Selector{}, &Planner{}
	stored := ReadStored(&contract.Snapshot{})
	var version int64
	// pass plans as a pass does, checks the planner against Plan, and
	// publishes what it built.
	var budget Budget
	var records *Records
	had := map[string]*v1alpha1.CatalogEmbeddingStatus{} // each object's record, as its status holds it
	shared := 0
	pass := func(step string, req Request) []ToolPlan {
		t.Helper()
		s, err := sel.Select(pointers(tds), nil, Made{At: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		in := PlanInput{Tools: s.Tools, Stored: stored.Tools, Lineage: stored.Lineage(), Model: f.model, QueriesPerTool: 2, Mode: req.Mode, Targets: req.Targets}
		got, reuse := planner.Plan(in)
		want := Plan(in)
		if !reflect.DeepEqual(got, want) {
			for i := range want {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Fatalf("%s: the planner planned %s as %+v; Plan as %+v", step, want[i].Name, got[i], want[i])
				}
			}
			t.Fatalf("%s: the planner planned %d tools; Plan %d", step, len(got), len(want))
		}
		now := time.Unix(1700000000, 0)
		refreshed := Refresh(context.Background(), f.providers(), want, now, budget)
		b, err := BuildDocument(BuildInput{Catalog: "ns/c", Provider: "openai", Model: f.model, Plans: want, Rejected: s.Rejected, Refreshed: refreshed, Stored: stored, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		out := &Outcome{Catalog: "c", Model: f.model, Plans: got, Reuse: reuse, Rejected: s.Rejected, Refreshed: refreshed, Build: b, Stored: stored, Version: version}
		switch {
		case b.Blocked != "" && len(b.Vectors) > 0:
			stored = stagedState(t, &Outcome{Build: b, Stored: stored})
		case b.Changed:
			version++
			if stored, err = stored.Published(b, version); err != nil {
				t.Fatal(err)
			}
			out.Version, out.Published = version, true
		}
		records, had, shared = checkRecords(t, step, out, records, had, shared)
		return want
	}
	pass("first", Request{})
	pass("after the first publish", Request{})
	pass("nothing changed", Request{})
	tds[7].Generation++
	tds[7].Spec.Description = "Edited."
	if plans := pass("an edit", Request{}); plans[slices.IndexFunc(plans, func(p ToolPlan) bool { return p.Tool.Object == tds[7].Name })].Action != ActionRegenerate {
		t.Fatal("the edited tool was not regenerated")
	}
	pass("after the edit's publish", Request{})
	tds = append(tds[1:], td("new", "new", okParams))
	tds[len(tds)-1].UID = "new"
	pass("a tool gone and another come", Request{})
	pass("after that publish", Request{})
	pass("a refresh of one tool", Request{Targets: []string{tds[3].Spec.Name}})
	pass("after the refresh", Request{})
	pass("nothing changed again", Request{})
	failing := &tds[20]
	failing.Generation++
	failing.Spec.Description = "Edited, and its queries fail."
	f.failGen = map[string]error{failing.Spec.Name: &embedding.Error{Kind: embedding.KindServer, Err: errors.New("500")}}
	if rec, _ := records.For(failing.Name, nil); rec.Reason != "" {
		t.Fatalf("%s failed before its refresh did: %+v", failing.Name, rec)
	}
	pass("a refresh that fails", Request{})
	if rec, _ := records.For(failing.Name, nil); rec.Reason != v1alpha1.ReasonQueryGenerationFailed {
		t.Fatalf("%s's refresh failed, its record says %+v", failing.Name, rec)
	}
	f.failGen = nil
	pass("the failed refresh done", Request{})
	pass("after the failed refresh", Request{})
	// A ToolDefinition rejected, then no longer selected: its record
	// comes and goes while the plans stay the last pass's.
	tds = append(tds, td("invalid", "invalid", `{"type":12}`))
	pass("a ToolDefinition rejected", Request{})
	if rec, ok := records.For("invalid", nil); !ok || rec.Reason != v1alpha1.ReasonInvalidSpec {
		t.Fatalf("the rejected ToolDefinition's record: %v %+v", ok, rec)
	}
	tds = tds[:len(tds)-1]
	pass("the rejected ToolDefinition gone", Request{})
	if _, ok := records.For("invalid", nil); ok {
		t.Fatal("the ToolDefinition no longer selected keeps its record")
	}
	// A tool renamed past three others, then back: the ToolDefinition's
	// record moves with its plan, and back.
	moving := &tds[slices.IndexFunc(tds, func(d v1alpha1.ToolDefinition) bool { return d.Name == "t100" })]
	for _, name := range []string{"t103a", "t100"} {
		moving.Generation++
		moving.Spec.Name = name
		pass("renamed to "+name, Request{})
		pass("after the rename to "+name, Request{})
		if rec, ok := records.For(moving.Name, nil); !ok || rec.SpecHash == "" {
			t.Fatalf("after the rename to %s, %s's record is %v %+v", name, moving.Name, ok, rec)
		}
	}
	if shared < 11 {
		t.Fatalf("%d passes derived their records over the last pass's; want the edits' and the quiet passes'", shared)
	}
	// An entry changed behind the lineage: Plan sees it, the planner,
	// which reuses the tool's last plan, does not.
	s, err := sel.Select(pointers(tds), nil, Made{At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	name := s.Tools[11].Entry.Name
	behind := stored.Tools.with(map[string]StoredTool{name: {}}, nil)
	in := PlanInput{Tools: s.Tools, Stored: behind, Lineage: stored.Lineage(), Model: f.model, QueriesPerTool: 2}
	if got, _ := planner.Plan(in); got[11].Action != ActionNone || Plan(in)[11].Action != ActionRegenerate {
		t.Fatalf("the planner planned %s as %v and Plan as %v; want the last plan reused", name, got[11].Action, Plan(in)[11].Action)
	}

	// Another model, in chunks: the first chunks are staged, the last
	// publishes them, and the staged tools' entries change with it.
	f.model = "m2"
	budget = Budget{Time: time.Nanosecond, Batch: 400}
	for i := range 3 {
		pass(fmt.Sprintf("chunk %d of another model", i+1), Request{})
	}
	if stored.Version != version || len(stored.StagedMetadata) != 0 || stored.Tools.Get(name).Metadata.Model != "m2" {
		t.Fatalf("the model's chunks left version %d (want %d), %d staged, %s's model %s", stored.Version, version, len(stored.StagedMetadata), name, stored.Tools.Get(name).Metadata.Model)
	}
	pass("after the model's publish", Request{})
	pass("nothing changed after the model", Request{})
}
