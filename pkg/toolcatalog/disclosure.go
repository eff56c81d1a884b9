package toolcatalog

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// Progressive disclosure: when the schemas of all tools would take too much
// of the model's context, only the core tools are sent, plus three bridge
// tools through which the model finds (tool_search), reads (tool_describe)
// and calls (tool_call) the deferred ones.

// Bridge tool names.
const (
	ToolSearch   = "tool_search"
	ToolDescribe = "tool_describe"
	ToolCall     = "tool_call"
)

// DisclosureMode says when to defer tools.
type DisclosureMode string

const (
	// DisclosureOff sends every tool.
	DisclosureOff DisclosureMode = "off"
	// DisclosureOn always defers non-core tools.
	DisclosureOn DisclosureMode = "on"
	// DisclosureAuto defers when the tools' schemas exceed Threshold of
	// the context window.
	DisclosureAuto DisclosureMode = "auto"
)

// DefaultDisclosureThreshold is the share of the context window the tool
// schemas may take before auto mode defers them.
const DefaultDisclosureThreshold = 0.10

// DisclosureConfig configures PlanDisclosure.
type DisclosureConfig struct {
	Mode DisclosureMode
	// ContextWindow is the model's context size in tokens.
	ContextWindow int
	// Threshold is a share of ContextWindow; DefaultDisclosureThreshold
	// when zero.
	Threshold float64
	// Principal, when set, hides tools the principal may not use.
	Principal string
}

// Disclosure is which tools to send to the model directly.
type Disclosure struct {
	// Active is true when tools are deferred behind the bridge tools.
	Active bool
	// Direct are the tools to send: every visible tool when inactive; the
	// core tools and the bridge tools when active.
	Direct []contract.Tool
	// Deferred names the tools reachable only through the bridge.
	Deferred []string
	// AllTokens estimates the schemas of every visible tool; DirectTokens
	// those of Direct.
	AllTokens, DirectTokens int
}

// EstimateTokens estimates what a tool's schema costs in a request: about
// one token per four bytes of its JSON function definition, the usual
// rule of thumb for English text and JSON with BPE tokenizers.
func EstimateTokens(t contract.Tool) int {
	raw, _ := json.Marshal(functionDefinition(t))
	return (len(raw) + 3) / 4
}

// PlanDisclosure decides which tools go to the model directly. Core
// (alwaysInclude) tools are never deferred.
func (c *Catalog) PlanDisclosure(cfg DisclosureConfig) (Disclosure, error) {
	threshold := cfg.Threshold
	if threshold == 0 {
		threshold = DefaultDisclosureThreshold
	}
	var d Disclosure
	var visible []contract.Tool
	for _, t := range c.Document.Tools {
		if cfg.Principal == "" || c.IsAllowed(t.Name, cfg.Principal) {
			visible = append(visible, t)
			d.AllTokens += EstimateTokens(t)
		}
	}
	switch cfg.Mode {
	case DisclosureOff, "":
	case DisclosureOn:
		d.Active = true
	case DisclosureAuto:
		if cfg.ContextWindow <= 0 {
			return d, fmt.Errorf("auto disclosure needs the model's context window")
		}
		d.Active = float64(d.AllTokens) > threshold*float64(cfg.ContextWindow)
	default:
		return d, fmt.Errorf("unknown disclosure mode %q: use off, on or auto", cfg.Mode)
	}
	core := map[string]bool{}
	for _, n := range c.always {
		core[n] = true
	}
	for _, t := range visible {
		if !d.Active || core[t.Name] {
			d.Direct = append(d.Direct, t)
		} else {
			d.Deferred = append(d.Deferred, t.Name)
		}
	}
	if d.Active {
		d.Direct = append(d.Direct, BridgeTools()...)
	}
	for _, t := range d.Direct {
		d.DirectTokens += EstimateTokens(t)
	}
	return d, nil
}

// BridgeTools returns the schemas of tool_search, tool_describe and
// tool_call.
func BridgeTools() []contract.Tool {
	return []contract.Tool{
		{Name: ToolSearch, Description: "Search the available tools by what you want to do. Returns the names and descriptions of the most relevant tools; use tool_describe for a tool's parameters.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"What you want to do, in plain words."},"top_k":{"type":"integer","minimum":1,"maximum":20,"description":"How many tools to return (default 5)."}},"required":["query"],"additionalProperties":false}`)},
		{Name: ToolDescribe, Description: "Return the full definition of a tool, including its parameters' JSON Schema.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","description":"The tool's name, as tool_search returned it."}},"required":["name"],"additionalProperties":false}`)},
		{Name: ToolCall, Description: "Call a tool found with tool_search, with arguments matching its parameters.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","description":"The tool to call."},"arguments":{"type":"object","description":"The tool's arguments."}},"required":["name","arguments"],"additionalProperties":false}`)},
	}
}

// IsBridgeTool reports whether a name is one of the bridge tools.
func IsBridgeTool(name string) bool {
	return name == ToolSearch || name == ToolDescribe || name == ToolCall
}

// functionDefinition is the OpenAI-style function tool a model receives.
func functionDefinition(t contract.Tool) map[string]any {
	return map[string]any{"type": "function", "function": map[string]any{
		"name": t.Name, "description": t.Description, "parameters": t.Parameters,
	}}
}

// BridgeError is an error to return to the model as the bridge tool's
// result: it says what was wrong with the call.
type BridgeError struct{ Message string }

func (e *BridgeError) Error() string { return e.Message }

// Call is a resolved tool_call for the caller to execute.
type Call struct {
	Name      string
	Arguments json.RawMessage
}

// Bridge dispatches bridge tool calls against a catalog.
type Bridge struct {
	// Catalog returns the catalog to use, e.g. Follower.Current.
	Catalog func() *Catalog
	// Principal, when set, limits the tools found and called.
	Principal string
	// Search are the options of tool_search (TopK is overridden by top_k).
	Search Options
}

// Handle runs a bridge call. arguments is the raw JSON string the model
// produced. tool_search and tool_describe return their JSON result;
// tool_call returns a resolved, validated Call and no result. A
// *BridgeError explains a bad call and is meant for the model.
func (b *Bridge) Handle(ctx context.Context, name, arguments string) (json.RawMessage, *Call, error) {
	c := b.Catalog()
	var args map[string]json.RawMessage
	if err := json.Unmarshal([]byte(arguments), &args); err != nil || args == nil {
		return nil, nil, &BridgeError{Message: fmt.Sprintf("%s: arguments must be a JSON object", name)}
	}
	str := func(key string) (string, error) {
		var s string
		if err := json.Unmarshal(args[key], &s); err != nil || strings.TrimSpace(s) == "" {
			return "", &BridgeError{Message: fmt.Sprintf("%s: %q must be a non-empty string", name, key)}
		}
		return s, nil
	}
	switch name {
	case ToolSearch:
		query, err := str("query")
		if err != nil {
			return nil, nil, err
		}
		opts := b.Search
		opts.Principal = b.Principal
		if raw, ok := args["top_k"]; ok {
			if err := json.Unmarshal(raw, &opts.TopK); err != nil || opts.TopK < 1 || opts.TopK > 20 {
				return nil, nil, &BridgeError{Message: "tool_search: top_k must be an integer from 1 to 20"}
			}
		}
		resp, err := c.Search(ctx, query, opts)
		if err != nil {
			return nil, nil, err
		}
		type hit struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		}
		hits := []hit{}
		for _, r := range resp.Results {
			hits = append(hits, hit{r.Tool.Name, r.Tool.Description})
		}
		out, err := json.Marshal(map[string]any{"tools": hits})
		return out, nil, err
	case ToolDescribe:
		tool, err := b.resolve(c, name, args)
		if err != nil {
			return nil, nil, err
		}
		out, err := json.Marshal(functionDefinition(tool)["function"])
		return out, nil, err
	case ToolCall:
		tool, err := b.resolve(c, name, args)
		if err != nil {
			return nil, nil, err
		}
		raw, ok := args["arguments"]
		var obj map[string]json.RawMessage
		if !ok || json.Unmarshal(raw, &obj) != nil || obj == nil {
			return nil, nil, &BridgeError{Message: fmt.Sprintf("tool_call: \"arguments\" for %s must be a JSON object", tool.Name)}
		}
		return nil, &Call{Name: tool.Name, Arguments: raw}, nil
	}
	return nil, nil, &BridgeError{Message: fmt.Sprintf("%s is not a bridge tool", name)}
}

// resolve finds the tool a bridge call names, refusing bridge tools,
// unknown tools and tools the principal may not use.
func (b *Bridge) resolve(c *Catalog, bridge string, args map[string]json.RawMessage) (contract.Tool, error) {
	var target string
	if err := json.Unmarshal(args["name"], &target); err != nil || target == "" {
		return contract.Tool{}, &BridgeError{Message: fmt.Sprintf("%s: \"name\" must be a tool name", bridge)}
	}
	if IsBridgeTool(target) {
		return contract.Tool{}, &BridgeError{Message: fmt.Sprintf("%s: %s is a bridge tool, not a catalog tool", bridge, target)}
	}
	tool, ok := c.Tool(target)
	if !ok || (b.Principal != "" && !c.IsAllowed(target, b.Principal)) {
		// Unknown and forbidden look alike, so names are not disclosed.
		return contract.Tool{}, &BridgeError{Message: fmt.Sprintf("%s: no tool named %q; use tool_search to find one", bridge, target)}
	}
	return tool, nil
}
