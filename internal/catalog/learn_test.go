package catalog

import (
	"fmt"
	"slices"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

func TestLearnPicksFrequentRequestsOfEachTool(t *testing.T) {
	rec := func(tool, req string, n int64) contract.Recorded {
		return contract.Recorded{Tool: tool, Request: req, Count: n}
	}
	got := Learn([]contract.Recorded{
		rec("book_room", "grab the fishbowl", 5),
		rec("book_room", "fishbowl at ten", 3),
		rec("book_room", "Grab  the fishbowl", 1), // the same, by case and spacing: counted apart, folded once
		rec("book_room", "once only", 1),          // under minCount
		rec("book_room", "reserve a room", 4),     // a curated example
		rec("book_room", "a fourth one", 2),       // beyond PerTool
		rec("create_issue", "open a ticket", 2),   // led to run_sql more often
		rec("run_sql", "open a ticket", 3),
		rec("send_email", "mail the team", 2),
		rec("send_email", "tie", 2), // ties: both tools keep it
		rec("get_weather", "tie", 2),
	}, map[string][]string{"book_room": {"Reserve a room"}}, LearnOptions{PerTool: 2, MinCount: 2})

	want := map[string][]string{
		"book_room":   {"grab the fishbowl", "fishbowl at ten"},
		"run_sql":     {"open a ticket"},
		"send_email":  {"tie", "mail the team"}, // equal counts: in draw order
		"get_weather": {"tie"},
	}
	if len(got) != len(want) {
		t.Fatalf("learned %v, want %v", got, want)
	}
	for tool, w := range want {
		if !slices.Equal(got[tool], w) {
			t.Errorf("%s learned %q, want %q", tool, got[tool], w)
		}
	}
}

// A tool is re-embedded when its learned requests change, from its stored
// queries, and not otherwise.
func TestPlanRelearnsOnlyChangedTools(t *testing.T) {
	tools := []*Tool{tool("a", "h"), tool("b", "h")}
	st := map[string]StoredTool{}
	for _, tl := range tools {
		s := stored("h", "m", 8, fiveQueries...)
		s.Metadata.LearnedQueries = []string{"old"}
		st[tl.Entry.Name] = s
	}
	plans := Plan(PlanInput{Tools: tools, Stored: StoredToolsOf(st), Model: "m", Dimensions: 8, QueriesPerTool: 5,
		Learned: map[string][]string{"a": {"new"}, "b": {"old"}}})
	for _, p := range plans {
		switch p.Name {
		case "a":
			if p.Action != ActionEmbed || !p.Relearn || !slices.Equal(p.Queries, fiveQueries) || !slices.Equal(p.Learned, []string{"new"}) {
				t.Errorf("a: %+v, want a re-embedding of the stored queries with the new learned request", p)
			}
		case "b":
			if p.Action != ActionNone {
				t.Errorf("b: action %s, want none (learned requests unchanged)", p.Action)
			}
		}
	}
}

// A request one principal repeats, even in several spellings, is not
// learned while two principals' is.
func TestLearnCountsPrincipals(t *testing.T) {
	got := Learn([]contract.Recorded{
		{Tool: "send_email", Request: "wire the payroll money to account 9999", Count: 40, Principals: 1},
		{Tool: "send_email", Request: "Wire the payroll money to account 9999", Count: 40, Principals: 1},
		{Tool: "book_room", Request: "grab the fishbowl", Count: 2, Principals: 2},
	}, nil, LearnOptions{PerTool: 5, MinCount: 2, MinPrincipals: 2})
	if len(got) != 1 || !slices.Equal(got["book_room"], []string{"grab the fishbowl"}) {
		t.Fatalf("learned %v", got)
	}
}

// Requests recorded equally often are a sample of them, the same whatever
// order they were recorded in, and not the alphabetically first, which
// are picked by how they open.
func TestLearnSamplesTiedRequests(t *testing.T) {
	var recorded []contract.Recorded
	for i := range 100 {
		recorded = append(recorded, contract.Recorded{Tool: "chart", Request: fmt.Sprintf("request %02d for a chart", i), Count: 1})
	}
	got := Learn(recorded, nil, LearnOptions{PerTool: 5, MinCount: 1})["chart"]
	if len(got) != 5 {
		t.Fatalf("learned %q, want 5 requests", got)
	}
	late := 0
	for _, r := range got {
		if r >= "request 10" {
			late++
		}
	}
	if late == 0 {
		t.Errorf("learned %q: all among the ten alphabetically first of 100 tied requests", got)
	}
	slices.Reverse(recorded)
	if again := Learn(recorded, nil, LearnOptions{PerTool: 5, MinCount: 1})["chart"]; !slices.Equal(again, got) {
		t.Errorf("recorded in another order, learned %q, want %q", again, got)
	}
}
