package index

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/toolcatalog/tool-catalog-operator/pkg/clip"
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

// DefaultDisclosureThreshold is the share of the context window the
// deferrable tools' schemas may take before auto mode defers them.
const DefaultDisclosureThreshold = 0.10

// DefaultContextWindow is the context window auto mode assumes when the
// model's is unknown: 128,000 tokens, the common size of current models,
// so the default cutoff is 12,800 tokens of deferrable schemas.
const DefaultContextWindow = 128000

// Bridge result limits.
const (
	// DefaultBridgeTopK is how many tools tool_search returns by default;
	// MaxBridgeTopK is the most it returns.
	DefaultBridgeTopK = 5
	MaxBridgeTopK     = 20
	// BridgeDescriptionLength is where tool_search cuts a description, in
	// characters: enough to choose, short enough to keep results small.
	BridgeDescriptionLength = 300
)

// DisclosurePolicy is the catalog's published disclosure policy, with the
// defaults filled in for a catalog that publishes none: auto mode, the
// default threshold, window and bridge limits.
func (c *Catalog) DisclosurePolicy() contract.Disclosure {
	p := contract.Disclosure{}
	if d := c.Document.Search.Disclosure; d != nil {
		p = *d
	}
	if p.Mode == "" {
		p.Mode = string(DisclosureAuto)
	}
	if p.Threshold <= 0 {
		p.Threshold = DefaultDisclosureThreshold
	}
	if p.ContextWindow <= 0 {
		p.ContextWindow = DefaultContextWindow
	}
	if p.SearchMaxTopK <= 0 {
		p.SearchMaxTopK = MaxBridgeTopK
	}
	if p.SearchTopK <= 0 {
		p.SearchTopK = DefaultBridgeTopK
	}
	p.SearchTopK = min(p.SearchTopK, p.SearchMaxTopK)
	if p.DescriptionLength <= 0 {
		p.DescriptionLength = BridgeDescriptionLength
	}
	return p
}

// PlanPublished plans disclosure with the catalog's published policy, for
// a principal and its groups; contextWindow, when positive, is the
// client's own window and replaces the policy's. mostUsed are the most
// used tools (Follower.MostUsed), sent directly like the core ones.
func (c *Catalog) PlanPublished(principal string, groups []string, contextWindow int, mostUsed []string) (Disclosure, error) {
	p := c.DisclosurePolicy()
	if contextWindow > 0 {
		p.ContextWindow = contextWindow
	}
	return c.PlanDisclosure(DisclosureConfig{Mode: DisclosureMode(p.Mode), Threshold: p.Threshold, ContextWindow: p.ContextWindow, Principal: principal, Groups: groups, MostUsed: mostUsed})
}

// DisclosureConfig configures PlanDisclosure.
type DisclosureConfig struct {
	Mode DisclosureMode
	// ContextWindow is the model's context size in tokens;
	// DefaultContextWindow when zero.
	ContextWindow int
	// Threshold is a share of ContextWindow; DefaultDisclosureThreshold
	// when zero.
	Threshold float64
	// Principal and Groups, when set, hide tools the principal may not
	// use.
	Principal string
	Groups    []string
	// MostUsed names most used tools, never deferred (see
	// Follower.MostUsed).
	MostUsed []string
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
	// AllTokens estimates the schemas of every visible tool,
	// DeferrableTokens those of the visible non-core tools (what auto mode
	// measures) and DirectTokens those of Direct.
	AllTokens, DeferrableTokens, DirectTokens int
}

// EstimateTokens estimates what a tool's schema costs in a request: about
// one token per four bytes of its JSON function definition, the usual
// rule of thumb for English text and JSON with BPE tokenizers.
func EstimateTokens(t contract.Tool) int {
	raw, _ := json.Marshal(functionDefinition(t))
	return (len(raw) + 3) / 4
}

// PlanDisclosure decides which tools go to the model directly. Core
// (alwaysInclude) tools and the most used ones (MostUsed) are never
// deferred, and with nothing to defer
// disclosure changes nothing: no bridge tools are added. auto defers when
// the deferrable tools' schemas take at least Threshold of the context
// window.
func (c *Catalog) PlanDisclosure(cfg DisclosureConfig) (Disclosure, error) {
	threshold := cfg.Threshold
	if threshold == 0 {
		threshold = DefaultDisclosureThreshold
	}
	window := cfg.ContextWindow
	if window <= 0 {
		window = DefaultContextWindow
	}
	core := c.coreTools(cfg.MostUsed)
	allowed := c.visibleTo(cfg.Principal, cfg.Groups)
	var d Disclosure
	var visible []contract.Tool
	for _, t := range c.Document.Tools {
		if allowed(t.Name) {
			visible = append(visible, t)
			tokens := EstimateTokens(t)
			d.AllTokens += tokens
			if !core[t.Name] {
				d.DeferrableTokens += tokens
			}
		}
	}
	switch cfg.Mode {
	case DisclosureOff, "":
	case DisclosureOn:
		d.Active = true
	case DisclosureAuto:
		d.Active = float64(d.DeferrableTokens) >= threshold*float64(window)
	default:
		return d, fmt.Errorf("unknown disclosure mode %q: use off, on or auto", cfg.Mode)
	}
	d.Active = d.Active && d.DeferrableTokens > 0
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

// coreTools are the tools never deferred: the always-included ones and
// the most used ones.
func (c *Catalog) coreTools(mostUsed []string) map[string]bool {
	core := make(map[string]bool, len(c.always)+len(mostUsed))
	for _, n := range c.always {
		core[n] = true
	}
	for _, n := range mostUsed {
		core[n] = true
	}
	return core
}

// BridgeTools returns the schemas of tool_search, tool_describe and
// tool_call, with MCP annotations: searching and describing only read the
// catalog; a call may do anything the tool it names does.
func BridgeTools() []contract.Tool {
	yes, no := true, false
	readOnly := func(title string) *contract.Annotations {
		return &contract.Annotations{Title: title, ReadOnlyHint: &yes, DestructiveHint: &no, IdempotentHint: &yes, OpenWorldHint: &no}
	}
	tools := []contract.Tool{
		{Name: ToolSearch, Description: "Search the tools that are not listed directly by what you want to do. Returns the names, toolsets and descriptions of the most relevant ones and how many there are in all; use tool_describe for a tool's parameters.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"What you want to do, in plain words."},"top_k":{"type":"integer","minimum":1,"maximum":20,"description":"How many tools to return (default 5)."}},"required":["query"],"additionalProperties":false}`)},
		{Name: ToolDescribe, Description: "Return the full definition of a tool, including its parameters' JSON Schema and, when it declares one, the JSON Schema of its structured result (outputSchema).",
			Parameters: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","description":"The tool's name, as tool_search returned it."}},"required":["name"],"additionalProperties":false}`)},
		{Name: ToolCall, Description: "Call a tool found with tool_search, with arguments matching its parameters.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","description":"The tool to call."},"arguments":{"type":"object","description":"The tool's arguments (default {})."}},"required":["name"],"additionalProperties":false}`)},
	}
	tools[0].Annotations = readOnly("Search tools")
	tools[1].Annotations = readOnly("Describe a tool")
	tools[2].Annotations = &contract.Annotations{Title: "Call a tool", ReadOnlyHint: &no, OpenWorldHint: &yes}
	return tools
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
	// Request is the query of the last tool_search when it found the
	// tool: the request that led to the call. Once the call succeeded,
	// pass it to RecordRequest to let a learning catalog fold requests
	// many principals make into its tools' query sets.
	Request string
}

// Bridge dispatches bridge tool calls against a catalog.
type Bridge struct {
	// Catalog returns the catalog to use, e.g. Follower.Current.
	Catalog func() *Catalog
	// Principal and Groups, when set, limit the tools found, described
	// and called.
	Principal string
	Groups    []string
	// Search are the options of tool_search (TopK is overridden by top_k).
	// Search.MostUsed are sent directly (PlanPublished), so tool_search
	// leaves them out as it does the core tools.
	Search Options
	// TopK and MaxTopK are tool_search's default and largest top_k, and
	// DescriptionLength where it cuts descriptions; the package defaults
	// when zero (a catalog's policy: DisclosurePolicy).
	TopK, MaxTopK, DescriptionLength int
	// Memory, when set, keeps the last tool_search instead of the Bridge,
	// so that a service whose replicas each hold a Bridge knows the
	// request behind a tool_call whichever replica saw the search.
	Memory SearchMemory
	mu     sync.Mutex
	// lastQuery and lastFound are the last tool_search's query and hits,
	// without Memory.
	lastQuery string
	lastFound []string
}

// SearchMemory keeps a caller's last tool_search: its query and the tools
// it found (Call.Request). Failures are the memory's to report; a search
// or call does not fail with it.
type SearchMemory interface {
	Remember(ctx context.Context, query string, found []string)
	Recall(ctx context.Context) (query string, found []string)
}

// remember keeps the last search.
func (b *Bridge) remember(ctx context.Context, query string, found []string) {
	if b.Memory != nil {
		b.Memory.Remember(ctx, query, found)
		return
	}
	b.mu.Lock()
	b.lastQuery, b.lastFound = query, found
	b.mu.Unlock()
}

// recall returns the last search.
func (b *Bridge) recall(ctx context.Context) (string, []string) {
	if b.Memory != nil {
		return b.Memory.Recall(ctx)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastQuery, b.lastFound
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
		maxTopK := orDefault(b.MaxTopK, MaxBridgeTopK)
		topK := min(orDefault(b.TopK, DefaultBridgeTopK), maxTopK)
		if raw, ok := args["top_k"]; ok {
			var n float64
			if unmarshalErr := json.Unmarshal(raw, &n); unmarshalErr != nil {
				return nil, nil, &BridgeError{Message: "tool_search: top_k must be a number"}
			}
			topK = int(min(max(n, 1), float64(maxTopK)))
		}
		out, found, err := b.search(ctx, c, query, topK)
		if err == nil {
			b.remember(ctx, query, found)
		}
		return out, nil, err
	case ToolDescribe:
		tool, err := b.resolve(c, name, args)
		if err != nil {
			return nil, nil, err
		}
		def := functionDefinition(tool)["function"].(map[string]any)
		if len(tool.OutputSchema) > 0 {
			def["outputSchema"] = tool.OutputSchema
		}
		if a := tool.Annotations; a != nil {
			if a.Title != "" {
				def["title"] = a.Title
			}
			def["annotations"] = a
		}
		if icons := contract.SafeIcons(tool.Icons); len(icons) > 0 {
			def["icons"] = icons
		}
		out, err := json.Marshal(def)
		return out, nil, err
	case ToolCall:
		tool, err := b.resolve(c, name, args)
		if err != nil {
			return nil, nil, err
		}
		raw, err := callArguments(args["arguments"])
		if err != nil {
			return nil, nil, &BridgeError{Message: fmt.Sprintf("tool_call: \"arguments\" for %s %s", tool.Name, err)}
		}
		call := &Call{Name: tool.Name, Arguments: raw}
		if query, found := b.recall(ctx); slices.Contains(found, tool.Name) {
			call.Request = query
		}
		return nil, call, nil
	}
	return nil, nil, &BridgeError{Message: fmt.Sprintf("%s is not a bridge tool", name)}
}

// callArguments accepts a tool_call's arguments as an object, as a string
// holding a JSON object (some runtimes encode them twice), or absent ({}).
func callArguments(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`{}`), nil
	}
	var encoded string
	if json.Unmarshal(raw, &encoded) == nil {
		raw = json.RawMessage(encoded)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("must be a JSON object (or a string holding one)")
	}
	return raw, nil
}

// search runs tool_search over the deferred tools: the catalog's tools the
// principal may use, less the core ones, which the model already has.
func (b *Bridge) search(ctx context.Context, c *Catalog, query string, topK int) (json.RawMessage, []string, error) {
	core := c.coreTools(b.Search.MostUsed)
	allowed := c.visibleTo(b.Principal, b.Groups)
	total := 0
	for _, t := range c.Document.Tools {
		if !core[t.Name] && allowed(t.Name) {
			total++
		}
	}
	opts := b.Search
	opts.Principal, opts.Groups = b.Principal, b.Groups
	opts.TopK, opts.hide = topK, core
	resp, err := c.Search(ctx, query, opts)
	if err != nil {
		return nil, nil, err
	}
	type hit struct {
		Name        string `json:"name"`
		Toolset     string `json:"toolset,omitempty"`
		Description string `json:"description"`
		// Intent is the part of a request of several things the tool
		// answers.
		Intent string `json:"intent,omitempty"`
	}
	hits := []hit{}
	var found []string
	for _, r := range resp.Results {
		if len(hits) == topK {
			break
		}
		hits = append(hits, hit{r.Tool.Name, r.Tool.Toolset, clip.Truncate(r.Tool.Description, orDefault(b.DescriptionLength, BridgeDescriptionLength)), r.Intent})
		found = append(found, r.Tool.Name)
	}
	result := map[string]any{"tools": hits, "total_available": total}
	if len(hits) == 0 {
		// A short answer the model can act on, rather than weak hits.
		result["message"] = fmt.Sprintf("No tool matches %q well enough; try other words, or describe the task more plainly.", clip.Truncate(query, 100))
	}
	out, err := json.Marshal(result)
	return out, found, err
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
	if !ok || !c.visibleTo(b.Principal, b.Groups)(target) {
		// Unknown and forbidden look alike, so names are not disclosed.
		return contract.Tool{}, &BridgeError{Message: fmt.Sprintf("%s: no tool named %q; use tool_search to find one", bridge, target)}
	}
	return tool, nil
}

func orDefault(n, def int) int {
	if n > 0 {
		return n
	}
	return def
}
