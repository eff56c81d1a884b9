package toolcatalog

import (
	"context"
	"encoding/json"
	"errors"
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

	// auto: the threshold share of the window decides.
	small, _ := c.PlanDisclosure(DisclosureConfig{Mode: DisclosureAuto, ContextWindow: all * 2, Threshold: 0.9})
	large, _ := c.PlanDisclosure(DisclosureConfig{Mode: DisclosureAuto, ContextWindow: all * 2, Threshold: 0.4})
	if small.Active || !large.Active {
		t.Fatalf("auto: %v below the threshold, %v above it; want false, true", small.Active, large.Active)
	}
	if _, err := c.PlanDisclosure(DisclosureConfig{Mode: DisclosureAuto}); err == nil {
		t.Fatal("auto without a context window accepted")
	}
	if _, err := c.PlanDisclosure(DisclosureConfig{Mode: "sometimes"}); err == nil {
		t.Fatal("unknown mode accepted")
	}

	// A principal's view excludes what it may not use.
	sales, _ := c.PlanDisclosure(DisclosureConfig{Mode: DisclosureOn, Principal: "group:sales"})
	for _, n := range sales.Deferred {
		if n == "run_sql" {
			t.Fatal("run_sql deferred for a principal that may not use it")
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

	out, call, err := b.Handle(ctx, ToolSearch, `{"query":"send an email to the team","top_k":2}`)
	if err != nil || call != nil {
		t.Fatalf("tool_search: %v %v", call, err)
	}
	var found struct {
		Tools []struct{ Name, Description string }
	}
	if err := json.Unmarshal(out, &found); err != nil || len(found.Tools) != 2 || found.Tools[1].Name != "send_email" {
		t.Fatalf("tool_search result %s", out)
	}

	out, _, err = b.Handle(ctx, ToolDescribe, `{"name":"create_issue"}`)
	if err != nil || !strings.Contains(string(out), `"parameters"`) || !strings.Contains(string(out), `"repo"`) {
		t.Fatalf("tool_describe: %s %v", out, err)
	}

	_, call, err = b.Handle(ctx, ToolCall, `{"name":"create_issue","arguments":{"repo":"a/b","title":"crash"}}`)
	if err != nil || call == nil || call.Name != "create_issue" || string(call.Arguments) != `{"repo":"a/b","title":"crash"}` {
		t.Fatalf("tool_call: %+v %v", call, err)
	}

	bad := []struct{ tool, args, want string }{
		{ToolCall, `{"name":"create_issue","arguments":"{\"repo\":1}"}`, "must be a JSON object"},
		{ToolCall, `{"name":"create_issue","arguments":[1,2]}`, "must be a JSON object"},
		{ToolCall, `{"name":"create_issue"}`, "must be a JSON object"},
		{ToolCall, `{"name":"create_issue","arguments":{}`, "arguments must be a JSON object"},
		{ToolCall, `not json`, "arguments must be a JSON object"},
		{ToolCall, `{"name":"launch_rockets","arguments":{}}`, `no tool named "launch_rockets"`},
		{ToolCall, `{"name":"tool_call","arguments":{}}`, "is a bridge tool"},
		{ToolCall, `{"name":"tool_search","arguments":{"query":"x"}}`, "is a bridge tool"},
		{ToolCall, `{"name":"run_sql","arguments":{"query":"select 1"}}`, `no tool named "run_sql"`}, // forbidden to group:sales
		{ToolDescribe, `{"name":"run_sql"}`, `no tool named "run_sql"`},
		{ToolDescribe, `{"name":7}`, `"name" must be a tool name`},
		{ToolSearch, `{"query":""}`, `"query" must be a non-empty string`},
		{ToolSearch, `{"query":"x","top_k":99}`, "top_k must be an integer from 1 to 20"},
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
