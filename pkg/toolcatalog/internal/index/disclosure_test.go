package index

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

func TestPlanDisclosure(t *testing.T) {
	c := buildFixture(t, fixture, contract.SearchDefaults{Method: "bm25", TopK: 3})
	all := 0
	for _, tool := range c.Tools() {
		all += EstimateTokens(tool)
	}
	if all <= 0 {
		t.Fatal("no token estimate")
	}

	off, err := c.PlanDisclosure(DisclosureConfig{Mode: DisclosureOff})
	if err != nil || off.Active || len(off.Direct) != len(fixture) || len(off.Deferred) != 0 || off.AllTokens != all {
		t.Fatalf("off: %+v, %v", off, err)
	}

	on, err := c.PlanDisclosure(DisclosureConfig{Mode: DisclosureOn})
	if err != nil || !on.Active {
		t.Fatalf("on: %+v, %v", on, err)
	}
	var direct []string
	for _, tool := range on.Direct {
		direct = append(direct, tool.Name)
	}
	// The core tool stays, the bridge tools join, everything else waits.
	if strings.Join(direct, ",") != "web_search,tool_search,tool_describe,tool_call" || len(on.Deferred) != len(fixture)-1 {
		t.Fatalf("on: direct %v deferred %v", direct, on.Deferred)
	}
	if on.DirectTokens >= all+1000 || on.DirectTokens <= 0 {
		t.Fatalf("direct tokens %d", on.DirectTokens)
	}

	// auto: the deferrable tools' share of the window decides, at or
	// above the threshold; the core tool's schema does not count.
	deferrable := on.DeferrableTokens
	if deferrable <= 0 || deferrable >= all {
		t.Fatalf("deferrable tokens %d of %d", deferrable, all)
	}
	at, _ := c.PlanDisclosure(DisclosureConfig{Mode: DisclosureAuto, ContextWindow: deferrable * 2, Threshold: 0.5})
	below, _ := c.PlanDisclosure(DisclosureConfig{Mode: DisclosureAuto, ContextWindow: deferrable*2 + 2, Threshold: 0.5})
	if !at.Active || below.Active {
		t.Fatalf("auto: %v at the threshold, %v just below it; want true, false", at.Active, below.Active)
	}
	// Measuring every tool would have crossed a threshold the deferrable
	// ones do not reach.
	if all >= deferrable*2+2 {
		t.Fatalf("the core tool is too small for this check: all %d, deferrable %d", all, deferrable)
	}
	// An unknown window takes the documented default cutoff.
	def, err := c.PlanDisclosure(DisclosureConfig{Mode: DisclosureAuto})
	if err != nil || def.Active != (float64(deferrable) >= DefaultDisclosureThreshold*DefaultContextWindow) {
		t.Fatalf("auto with the default window: %+v, %v", def, err)
	}
	if _, err := c.PlanDisclosure(DisclosureConfig{Mode: "sometimes"}); err == nil {
		t.Fatal("unknown mode accepted")
	}

	// A principal's view excludes what it may not use.
	// The most used tools are sent directly, never deferred.
	popular, _ := c.PlanDisclosure(DisclosureConfig{Mode: DisclosureOn, MostUsed: []string{"send_email"}})
	if slices.Contains(popular.Deferred, "send_email") || !slices.ContainsFunc(popular.Direct, func(t contract.Tool) bool { return t.Name == "send_email" }) ||
		len(popular.Deferred) != len(on.Deferred)-1 {
		t.Errorf("a popular tool deferred: direct %d, deferred %v", len(popular.Direct), popular.Deferred)
	}
	sales, _ := c.PlanDisclosure(DisclosureConfig{Mode: DisclosureOn, Principal: "group:sales"})
	for _, n := range sales.Deferred {
		if n == "run_sql" {
			t.Fatal("run_sql deferred for a principal that may not use it")
		}
	}
}

// With nothing deferrable (every visible tool is core) disclosure changes
// nothing, whatever the mode.
func TestDisclosureWithNothingToDeferAddsNoBridge(t *testing.T) {
	var names []string
	for _, ft := range fixture {
		names = append(names, ft.name)
	}
	c := buildFixture(t, fixture, contract.SearchDefaults{Method: "bm25", TopK: 3, AlwaysInclude: names})
	for _, mode := range []DisclosureMode{DisclosureOn, DisclosureAuto} {
		d, err := c.PlanDisclosure(DisclosureConfig{Mode: mode, ContextWindow: 1})
		if err != nil || d.Active || len(d.Direct) != len(fixture) || len(d.Deferred) != 0 || d.DeferrableTokens != 0 {
			t.Fatalf("%s: %+v, %v", mode, d, err)
		}
		for _, tool := range d.Direct {
			if IsBridgeTool(tool.Name) {
				t.Fatalf("%s added %s with nothing to defer", mode, tool.Name)
			}
		}
	}
}

func TestBridgeToolSchemasAreValid(t *testing.T) {
	for _, b := range BridgeTools() {
		var schema map[string]any
		if err := json.Unmarshal(b.Parameters, &schema); err != nil || schema["type"] != "object" {
			t.Errorf("%s: parameters %s", b.Name, b.Parameters)
		}
		if !IsBridgeTool(b.Name) {
			t.Errorf("%s not recognised as a bridge tool", b.Name)
		}
	}
}

func TestBridgeDispatch(t *testing.T) {
	c := buildFixture(t, fixture, contract.SearchDefaults{Method: "bm25", TopK: 3})
	b := &Bridge{Catalog: func() *Catalog { return c }, Principal: "group:sales"}
	ctx := context.Background()

	out, call, err := b.Handle(ctx, ToolSearch, `{"query":"send an email to the team or search the web","top_k":2}`)
	if err != nil || call != nil {
		t.Fatalf("tool_search: %v %v", call, err)
	}
	var found struct {
		Tools []struct {
			Name, Toolset, Description string
		}
		TotalAvailable int `json:"total_available"`
	}
	// Deferred tools only: the core web_search is already in the model's
	// list, and run_sql is not group:sales's to see.
	if unmarshalErr := json.Unmarshal(out, &found); unmarshalErr != nil || len(found.Tools) == 0 || found.Tools[0].Name != "send_email" || found.TotalAvailable != 4 {
		t.Fatalf("tool_search result %s", out)
	}
	for _, tool := range found.Tools {
		if tool.Name == "web_search" {
			t.Fatalf("tool_search returned the core tool: %s", out)
		}
	}
	// A request for two things: each hit says the intent it answers, and
	// the core tool takes no intent's place. (The fixture's few tools give
	// its intents little lexical evidence: every request's intents are
	// used here.)
	b.Search.MinIntentEvidence = ptr(0.0)
	out, _, err = b.Handle(ctx, ToolSearch, `{"query":"Send an email to the team. Then search the web for recent news and translate this paragraph to German.","top_k":2}`)
	var intents struct {
		Tools []struct{ Name, Intent string }
	}
	if err != nil || json.Unmarshal(out, &intents) != nil || len(intents.Tools) != 2 {
		t.Fatalf("tool_search of two intents: %s %v", out, err)
	}
	if got := intents.Tools; got[0].Name != "send_email" || got[0].Intent != "Send an email to the team" ||
		got[1].Name != "translate_text" || got[1].Intent != "translate this paragraph to German" {
		t.Errorf("tool_search of two intents: %s", out)
	}
	// The most used tools are sent directly: tool_search leaves them out.
	b.Search.MostUsed = []string{"send_email"}
	out, _, err = b.Handle(ctx, ToolSearch, `{"query":"send an email to the team or translate this paragraph","top_k":2}`)
	if err != nil || json.Unmarshal(out, &found) != nil || len(found.Tools) == 0 || found.TotalAvailable != 3 || slices.ContainsFunc(found.Tools, func(h struct{ Name, Toolset, Description string }) bool { return h.Name == "send_email" }) {
		t.Fatalf("tool_search found a popular tool: %s %v", out, err)
	}
	b.Search.MostUsed = nil
	// top_k is clamped to its range rather than refused.
	for _, topK := range []string{"0", "99", "2.7"} {
		out, _, err = b.Handle(ctx, ToolSearch, `{"query":"send an email","top_k":`+topK+`}`)
		if err != nil || json.Unmarshal(out, &found) != nil || len(found.Tools) < 1 || len(found.Tools) > MaxBridgeTopK {
			t.Fatalf("top_k %s: %s %v", topK, out, err)
		}
	}

	out, _, err = b.Handle(ctx, ToolDescribe, `{"name":"create_issue"}`)
	if err != nil || !strings.Contains(string(out), `"parameters"`) || !strings.Contains(string(out), `"repo"`) {
		t.Fatalf("tool_describe: %s %v", out, err)
	}

	// arguments as an object, as a string holding one, or absent ({}).
	for args, want := range map[string]string{
		`{"name":"create_issue","arguments":{"repo":"a/b","title":"crash"}}`:       `{"repo":"a/b","title":"crash"}`,
		`{"name":"create_issue","arguments":"{\"repo\":\"a/b\",\"title\":\"x\"}"}`: `{"repo":"a/b","title":"x"}`,
		`{"name":"create_issue"}`:                  `{}`,
		`{"name":"create_issue","arguments":null}`: `{}`,
	} {
		_, call, err = b.Handle(ctx, ToolCall, args)
		if err != nil || call == nil || call.Name != "create_issue" || string(call.Arguments) != want {
			t.Fatalf("tool_call %s: %+v %v", args, call, err)
		}
	}

	bad := []struct{ tool, args, want string }{
		{ToolCall, `{"name":"create_issue","arguments":"{\"repo\":1"}`, "must be a JSON object"},
		{ToolCall, `{"name":"create_issue","arguments":[1,2]}`, "must be a JSON object"},
		{ToolCall, `{"name":"create_issue","arguments":"plain words"}`, "must be a JSON object"},
		{ToolCall, `{"name":"create_issue","arguments":{}`, "arguments must be a JSON object"},
		{ToolCall, `not json`, "arguments must be a JSON object"},
		{ToolCall, `{"name":"launch_rockets","arguments":{}}`, `no tool named "launch_rockets"`},
		{ToolCall, `{"name":"tool_call","arguments":{}}`, "is a bridge tool"},
		{ToolCall, `{"name":"tool_search","arguments":{"query":"x"}}`, "is a bridge tool"},
		{ToolCall, `{"name":"run_sql","arguments":{"query":"select 1"}}`, `no tool named "run_sql"`}, // forbidden to group:sales
		{ToolDescribe, `{"name":"run_sql"}`, `no tool named "run_sql"`},
		{ToolDescribe, `{"name":7}`, `"name" must be a tool name`},
		{ToolSearch, `{"query":""}`, `"query" must be a non-empty string`},
		{ToolSearch, `{"query":"x","top_k":"many"}`, "top_k must be a number"},
		{"send_email", `{}`, "not a bridge tool"},
	}
	for _, tt := range bad {
		_, call, err := b.Handle(ctx, tt.tool, tt.args)
		var be *BridgeError
		if !errors.As(err, &be) || !strings.Contains(be.Message, tt.want) || call != nil {
			t.Errorf("%s %s: got %v, %v; want a BridgeError containing %q", tt.tool, tt.args, call, err, tt.want)
		}
	}

	// Search results respect the principal too.
	out, _, _ = b.Handle(ctx, ToolSearch, `{"query":"run a SQL query on the warehouse","top_k":5}`)
	if strings.Contains(string(out), "run_sql") {
		t.Fatalf("tool_search showed run_sql to group:sales: %s", out)
	}
}

// A catalog publishes its disclosure policy; one published before the
// policy existed gets the defaults.
func TestDisclosurePolicyAndPlanPublished(t *testing.T) {
	old := buildFixture(t, fixture, contract.SearchDefaults{Method: "bm25", TopK: 3})
	want := contract.Disclosure{Mode: "auto", Threshold: DefaultDisclosureThreshold, ContextWindow: DefaultContextWindow,
		SearchTopK: DefaultBridgeTopK, SearchMaxTopK: MaxBridgeTopK, DescriptionLength: BridgeDescriptionLength}
	if got := old.DisclosurePolicy(); got != want {
		t.Fatalf("defaults %+v, want %+v", got, want)
	}
	// Auto with the defaults: six small tools are far below 10 % of
	// 128,000 tokens, so the tools themselves are listed...
	d, err := old.PlanPublished("", nil, 0, nil)
	if err != nil || d.Active {
		t.Fatalf("auto with defaults: %+v %v", d, err)
	}
	// ...unless the client's own window is small.
	d, err = old.PlanPublished("", nil, d.DeferrableTokens*5, nil)
	if err != nil || !d.Active {
		t.Fatalf("auto with a small client window: %+v %v", d, err)
	}

	on := buildFixture(t, fixture, contract.SearchDefaults{Method: "bm25", TopK: 3,
		Disclosure: &contract.Disclosure{Mode: "on", SearchTopK: 50, SearchMaxTopK: 2, DescriptionLength: 40}})
	if p := on.DisclosurePolicy(); p.SearchTopK != 2 || p.Threshold != DefaultDisclosureThreshold {
		t.Fatalf("policy %+v: searchTopK is capped by searchMaxTopK, an unset threshold defaults", p)
	}
	// The principal's groups decide what it sees: run_sql is for
	// group:analysts.
	for _, tt := range []struct {
		principal string
		groups    []string
		deferred  int
	}{{"ana", nil, 4}, {"ana", []string{"analysts"}, 5}, {"", nil, 5}} {
		d, err := on.PlanPublished(tt.principal, tt.groups, 0, nil)
		if err != nil || !d.Active || len(d.Deferred) != tt.deferred {
			t.Errorf("%s %v: deferred %v, want %d", tt.principal, tt.groups, d.Deferred, tt.deferred)
		}
	}
}

func TestIsAllowedByGroup(t *testing.T) {
	c := buildFixture(t, fixture, contract.SearchDefaults{Method: "bm25", TopK: 3})
	for _, tt := range []struct {
		tool, principal string
		groups          []string
		want            bool
	}{
		{"run_sql", "ana", nil, false},
		{"run_sql", "ana", []string{"sales", "analysts"}, true},
		{"run_sql", "group:analysts", nil, true}, // a runtime's own naming, matched as is
		{"run_sql", "analysts", nil, false},      // a user is not a group
		{"translate_text", "anyone", nil, true},
		{"get_weather", "anyone", nil, true},
		{"launch", "ana", []string{"analysts"}, false},
	} {
		if got := c.IsAllowed(tt.tool, tt.principal, tt.groups...); got != tt.want {
			t.Errorf("IsAllowed(%s, %s, %v) = %v", tt.tool, tt.principal, tt.groups, got)
		}
	}
}

// The bridge takes its limits from the policy, cuts descriptions where it
// says, and answers a search nothing matches with a short message.
func TestBridgeLimitsAndNoMatch(t *testing.T) {
	threshold := 0.99
	c := buildFixture(t, fixture, contract.SearchDefaults{Method: "semantic", TopK: 3, SimilarityThreshold: &threshold})
	b := &Bridge{Catalog: func() *Catalog { return c }, Groups: []string{"analysts"}, TopK: 1, MaxTopK: 2, DescriptionLength: 12,
		Search: Options{Method: BM25}}
	ctx := context.Background()
	var found struct {
		Tools []struct {
			Name, Description string
		}
		TotalAvailable int    `json:"total_available"`
		Message        string `json:"message"`
	}
	for args, want := range map[string]int{`{"query":"sql query analytics warehouse orders"}`: 1, `{"query":"sql query email weather","top_k":20}`: 2} {
		out, _, err := b.Handle(ctx, ToolSearch, args)
		if err != nil || json.Unmarshal(out, &found) != nil || len(found.Tools) != want || found.TotalAvailable != 5 || found.Message != "" {
			t.Fatalf("%s: %s %v", args, out, err)
		}
		if len([]rune(found.Tools[0].Description)) > 12 {
			t.Errorf("description not cut at 12: %q", found.Tools[0].Description)
		}
	}
	if found.Tools[0].Name != "run_sql" {
		t.Errorf("the analysts group should find run_sql first: %+v", found.Tools)
	}
	out, _, err := b.Handle(ctx, ToolSearch, `{"query":"zzzz qqqq"}`)
	if err != nil || json.Unmarshal(out, &found) != nil || len(found.Tools) != 0 || !strings.HasPrefix(found.Message, `No tool matches "zzzz qqqq"`) {
		t.Fatalf("no match: %s %v", out, err)
	}
}

// tool_describe shows a tool's icons, leaving out any that fail
// contract.CheckIcon (a catalog read from Redis is not trusted with what
// clients render).
func TestDescribeShowsIcons(t *testing.T) {
	c := buildFixture(t, fixture, contract.SearchDefaults{Method: "bm25", TopK: 3})
	for i := range c.Document.Tools {
		if c.Document.Tools[i].Name == "create_issue" {
			c.Document.Tools[i].Icons = []contract.Icon{{Src: "javascript:alert(1)"}, {Src: "https://cdn.example.com/gh.png", Sizes: []string{"any"}}}
		}
	}
	b := &Bridge{Catalog: func() *Catalog { return c }}
	out, _, err := b.Handle(context.Background(), ToolDescribe, `{"name":"create_issue"}`)
	var def struct{ Icons []contract.Icon }
	if err != nil || json.Unmarshal(out, &def) != nil || len(def.Icons) != 1 || def.Icons[0].Src != "https://cdn.example.com/gh.png" || def.Icons[0].Sizes[0] != "any" {
		t.Fatalf("tool_describe: %s %v", out, err)
	}
	out, _, _ = b.Handle(context.Background(), ToolDescribe, `{"name":"send_email"}`)
	if strings.Contains(string(out), "icons") {
		t.Fatalf("a tool without icons is described with some: %s", out)
	}
}
