package catalog

import (
	"errors"
	"slices"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
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
			in := PlanInput{Tools: []*Tool{tt.tool}, Stored: map[string]StoredTool{}, Model: "m", Dimensions: 8, QueriesPerTool: 5}
			if tt.stored != nil {
				in.Stored["a"] = *tt.stored
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
			plans := Plan(PlanInput{Tools: tools, Stored: st, Model: "m", Dimensions: 8, QueriesPerTool: 5, Mode: tt.mode, Targets: tt.targets})
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
