package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolcatalog/tool-catalog-operator/internal/mcpsource"
	"github.com/toolcatalog/tool-catalog-operator/internal/telemetry"
	"github.com/toolcatalog/tool-catalog-operator/pkg/clip"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
)

// view is what one principal (with one context window) sees of a
// catalog: an MCP server holding exactly the tools the disclosure plan
// sends it. A new version changes only the tools that changed, and the
// SDK tells the view's sessions with notifications/tools/list_changed.
type view struct {
	s      *served
	caller caller
	server *mcp.Server
	bridge *toolcatalog.Bridge
	// queries embeds the principal's search queries, remembering the
	// last viewQueryCache of them; nil without an embedder.
	queries toolcatalog.QueryEmbedder
	used    atomic.Int64
	// streams counts the session GET streams open on the view.
	streams atomic.Int64

	mu     sync.Mutex
	listed map[string]string // tool → what was added (its digest)
	plan   toolcatalog.Disclosure
	// changed is closed when the tools listed change, and listing
	// identifies what they are now.
	changed chan struct{}
	listing string
	// synced is the version the view was planned for last, popular the
	// most used tools it was planned with.
	synced  *toolcatalog.Catalog
	popular []string
}

// view returns the caller's view, creating it for the current version.
func (s *served) view(c caller) *view {
	k := c.viewKey()
	s.mu.Lock()
	v := s.views[k]
	if v == nil {
		v = s.newView(c)
		s.views[k] = v
	}
	s.mu.Unlock()
	v.touch()
	if cat := s.follower.Current(); cat != nil {
		if err := v.sync(cat); err != nil {
			s.g.opts.Log.Error(err, "Planning a view", "catalog", s.id, "principal", c.principal.User)
		}
	}
	return v
}

func (s *served) newView(c caller) *view {
	v := &view{s: s, caller: c, listed: map[string]string{}, changed: make(chan struct{})}
	v.server = mcp.NewServer(&mcp.Implementation{Name: "toolcatalog-gateway", Title: "Tool catalog " + s.id, Version: s.g.opts.Version},
		&mcp.ServerOptions{
			Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
			Instructions: "The tools of catalog " + s.id + ". When tool_search is listed, the catalog holds more tools than are listed: " +
				"find them with tool_search, read their parameters with tool_describe and call them with tool_call.",
			SetCacheable: s.g.cacheable,
		})
	v.server.AddReceivingMiddleware(v.countLists)
	v.bridge = &toolcatalog.Bridge{Catalog: s.follower.Current, Principal: c.principal.User, Groups: c.principal.Groups,
		Memory: &searchMemory{s: s, view: hashOf(c.viewKey()), ttl: s.g.opts.IdleViews}}
	if s.embedder != nil {
		// A cache per view, not per catalog: shared, how fast a search
		// answers would tell one principal what another asked.
		v.queries = toolcatalog.CacheQueries(countedEmbedder{s.embedder, s.g.opts.Metrics.QueryEmbeddings.WithLabelValues(s.id)}, viewQueryCache)
	}
	return v
}

// viewQueryCache is how many query vectors a view keeps: 1 MiB of
// 512-dimension vectors.
const viewQueryCache = 512

// countedEmbedder counts the texts it embeds.
type countedEmbedder struct {
	toolcatalog.QueryEmbedder
	texts prometheus.Counter
}

func (e countedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.texts.Add(float64(len(texts)))
	return e.QueryEmbedder.Embed(ctx, texts)
}

// changes identifies the tools the view lists now, and returns a channel
// closed when they change next.
func (v *view) changes() (string, <-chan struct{}) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.listing, v.changed
}

func (v *view) touch()              { v.used.Store(time.Now().UnixNano()) }
func (v *view) lastUsed() time.Time { return time.Unix(0, v.used.Load()) }
func (v *view) catalogID() string   { return v.s.id }
func (v *view) metrics() *Metrics   { return v.s.g.opts.Metrics }

// sync makes the view's tools those the plan sends for cat, once per
// version. What Redis holds is checked first: a malformed entry is left
// out (served.resync reports it), and a panic in planning is an error,
// not a crash.
func (v *view) sync(cat *toolcatalog.Catalog) (err error) {
	popular := v.s.follower.MostUsed()
	v.mu.Lock()
	current := v.synced == cat && slices.Equal(v.popular, popular)
	v.mu.Unlock()
	if current {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("planning the view of version %d panicked: %v", cat.Version(), r)
		}
	}()
	p := v.caller.principal
	plan, err := cat.PlanPublished(p.User, p.Groups, v.caller.window, popular)
	if err != nil {
		return err
	}
	policy := cat.DisclosurePolicy()
	v.mu.Lock()
	defer v.mu.Unlock()
	v.plan, v.synced, v.popular = plan, cat, popular
	v.bridge.TopK, v.bridge.MaxTopK, v.bridge.DescriptionLength = policy.SearchTopK, policy.SearchMaxTopK, policy.DescriptionLength
	v.bridge.Search = toolcatalog.Options{MostUsed: popular}
	if v.queries != nil {
		v.bridge.Search.Embedder = v.queries
	}
	want := map[string]bool{}
	changed := false
	defer func() {
		if changed {
			close(v.changed)
			v.changed = make(chan struct{})
			h := sha256.New()
			for _, name := range slices.Sorted(maps.Keys(v.listed)) {
				fmt.Fprintf(h, "%s\x00%s\x00", name, v.listed[name])
			}
			v.listing = hex.EncodeToString(h.Sum(nil)[:8])
		}
	}()
	for _, t := range plan.Direct {
		if !toolcatalog.IsBridgeTool(t.Name) && servable(t) != nil {
			continue // reported by served.resync
		}
		want[t.Name] = true
		tool := mcpTool(t)
		digest, _ := json.Marshal(tool)
		if v.listed[t.Name] == string(digest) {
			continue
		}
		v.server.AddTool(tool, v.handler(t.Name))
		v.listed[t.Name] = string(digest)
		changed = true
	}
	var gone []string
	for name := range v.listed {
		if !want[name] {
			gone = append(gone, name)
			delete(v.listed, name)
		}
	}
	if len(gone) > 0 {
		v.server.RemoveTools(gone...)
		changed = true
	}
	return nil
}

var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// servable says why a tool read from Redis cannot be listed: its name is
// not a tool name (or a bridge tool's), or its parameters or output schema
// are not a JSON Schema object, which MCP requires of both.
func servable(t contract.Tool) error {
	if !toolName.MatchString(t.Name) {
		return fmt.Errorf("%q is not a tool name the gateway serves", t.Name)
	}
	if !objectSchema(t.Parameters) {
		return fmt.Errorf("the parameters of %s are not a JSON Schema of type object", t.Name)
	}
	if len(t.OutputSchema) > 0 && !objectSchema(t.OutputSchema) {
		return fmt.Errorf("the output schema of %s is not a JSON Schema of type object", t.Name)
	}
	return nil
}

// objectSchema says whether raw is a JSON object whose type is "object".
func objectSchema(raw json.RawMessage) bool {
	var schema struct {
		Type any `json:"type"`
	}
	return json.Unmarshal(raw, &schema) == nil && schema.Type == "object"
}

// mcpTool is a catalog tool as MCP lists it.
func mcpTool(t contract.Tool) *mcp.Tool {
	tool := &mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: json.RawMessage(t.Parameters)}
	if len(t.OutputSchema) > 0 {
		tool.OutputSchema = json.RawMessage(t.OutputSchema)
	}
	// Redis is not trusted with what clients render: icons are checked
	// again, and those that fail are left out.
	for _, i := range contract.SafeIcons(t.Icons) {
		tool.Icons = append(tool.Icons, mcp.Icon{Source: i.Src, MIMEType: i.MIMEType, Sizes: i.Sizes, Theme: mcp.IconTheme(i.Theme)})
	}
	if a := t.Annotations; a != nil {
		tool.Title = a.Title
		tool.Annotations = &mcp.ToolAnnotations{Title: a.Title, DestructiveHint: a.DestructiveHint, OpenWorldHint: a.OpenWorldHint}
		if a.ReadOnlyHint != nil {
			tool.Annotations.ReadOnlyHint = *a.ReadOnlyHint
		}
		if a.IdempotentHint != nil {
			tool.Annotations.IdempotentHint = *a.IdempotentHint
		}
	}
	return tool
}

// countLists counts tools/list requests and the prompt tokens the plan
// saved for each. A listing is never older than the version Redis serves
// when it is asked for: with replicas, a client told of a change by the
// replica holding its stream may list on another, whose notice has not
// come yet (or was lost), and would otherwise keep the old list with no
// further notice. Checking costs one Redis round trip per listing; when
// Redis cannot say within knownSessionPatience (it is failing over), the
// version loaded is listed.
func (v *view) countLists(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "tools/list" {
			// Redis answers within milliseconds, or it is failing over.
			cctx, cancel := context.WithTimeout(ctx, knownSessionPatience)
			_, err := v.s.follower.Check(cctx)
			cancel()
			if err != nil {
				v.s.g.opts.Log.V(1).Info("Listing the version loaded; cannot check the one served", "catalog", v.s.id, "error", err.Error())
			}
		}
		res, err := next(ctx, method, req)
		if method == "tools/list" && err == nil {
			v.mu.Lock()
			saved := v.plan.AllTokens - v.plan.DirectTokens
			v.mu.Unlock()
			v.metrics().ToolLists.WithLabelValues(v.catalogID()).Inc()
			if saved > 0 {
				v.metrics().TokensSaved.WithLabelValues(v.catalogID()).Add(float64(saved))
			}
		}
		return res, err
	}
}

// handler answers calls of one listed tool: a bridge tool, or a catalog
// tool called directly.
func (v *view) handler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		v.touch()
		args := req.Params.Arguments
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage(`{}`)
		}
		// Who calls is who sent this request, with this request's token:
		// the view only says what that principal sees.
		c, ok := callerOf(ctx)
		if !ok || c.viewKey() != v.caller.viewKey() {
			return toolError("the caller of this request could not be told: send it again"), nil
		}
		p := c.principal
		ctx, done := withRequestContext(ctx)
		defer done()
		ctx = relayProgress(ctx, req)
		ctx, span := v.startCallSpan(ctx, name, req)
		defer span.End()
		if !toolcatalog.IsBridgeTool(name) {
			return v.call(ctx, p, name, args), nil
		}
		out, call, err := v.bridge.Handle(ctx, name, string(args))
		var be *toolcatalog.BridgeError
		switch {
		case errors.As(err, &be):
			if name == toolcatalog.ToolCall {
				// Refused before it could reach call: audited here.
				var asked struct {
					Name string `json:"name"`
				}
				_ = json.Unmarshal(args, &asked)
				v.s.g.audit(p, v.catalogID(), asked.Name, nil, args, OutcomeInvalid, time.Now())
			}
			return toolError(be.Message), nil
		case err != nil:
			return nil, err
		case call != nil:
			res := v.call(ctx, p, call.Name, call.Arguments)
			if !res.IsError && call.Request != "" {
				v.learn(ctx, p, call)
			}
			return res, nil
		}
		if name == toolcatalog.ToolSearch {
			v.metrics().Searches.WithLabelValues(v.catalogID()).Inc()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(out)}}, StructuredContent: json.RawMessage(out)}, nil
	}
}

// startCallSpan starts the span of a tools/call, a child of the trace the
// client sent: in _meta (traceparent), else in the HTTP request's headers.
func (v *view) startCallSpan(ctx context.Context, name string, req *mcp.CallToolRequest) (context.Context, trace.Span) {
	if req.Extra != nil {
		ctx = telemetry.ExtractHeader(ctx, req.Extra.Header)
	}
	ctx = telemetry.ExtractMeta(ctx, req.Params.Meta)
	return telemetry.Tracer().Start(ctx, "tools/call "+name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.tool.name", name),
			attribute.String("toolcatalog.catalog", v.catalogID())))
}

// relayProgress makes the upstream call's progress reach the client, under
// the client's own token, when the client asked for progress. Cancelling
// the client's request cancels ctx, which cancels the upstream call.
func relayProgress(ctx context.Context, req *mcp.CallToolRequest) context.Context {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return ctx
	}
	return mcpsource.WithProgress(ctx, func(progress, total float64, message string) {
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token, Progress: progress, Total: total, Message: clip.Truncate(message, maxProgressMessage),
		})
	})
}

// maxProgressMessage bounds the characters of a relayed progress message.
const maxProgressMessage = 500

// call checks that the caller may use the tool and that the arguments
// match its schema, then proxies the call upstream; failures are tool
// errors the model reads.
func (v *view) call(ctx context.Context, p Principal, name string, args json.RawMessage) *mcp.CallToolResult {
	cat := v.s.follower.Current()
	start := time.Now()
	tool, ok := cat.Tool(name)
	if !ok || !cat.IsAllowed(name, p.User, p.Groups...) {
		// Unknown and forbidden look alike.
		v.metrics().Calls.WithLabelValues(v.catalogID(), "", OutcomeDenied).Inc()
		v.s.g.audit(p, v.catalogID(), name, nil, args, OutcomeDenied, start)
		return toolError(fmt.Sprintf("no tool named %q; use tool_search to find one", name))
	}
	outcome := OutcomeOK
	defer func() {
		v.metrics().Calls.WithLabelValues(v.catalogID(), name, outcome).Inc()
		v.s.g.audit(p, v.catalogID(), name, tool.Source, args, outcome, start)
	}()
	_, check := telemetry.Tracer().Start(ctx, "check arguments")
	err := v.s.g.up.arguments(tool, args)
	check.End()
	if err != nil {
		outcome = OutcomeInvalid
		return toolError(err.Error())
	}
	upstart := time.Now()
	upctx, upspan := telemetry.Tracer().Start(ctx, "upstream tools/call "+name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("gen_ai.tool.name", name)))
	res, err := v.s.g.up.call(upctx, v.s.key.Namespace, tool, p, args)
	if err != nil {
		upspan.SetStatus(codes.Error, "upstream call failed")
	}
	upspan.End()
	var ce *callError
	switch {
	case errors.As(err, &ce):
		outcome = ce.outcome
		if ce.outcome == OutcomeUpstreamError {
			v.metrics().Upstream.WithLabelValues(v.catalogID()).Observe(time.Since(upstart).Seconds())
		}
		return toolError(ce.message)
	case err != nil:
		outcome = OutcomeUpstreamError
		return toolError(err.Error())
	}
	v.metrics().Upstream.WithLabelValues(v.catalogID()).Observe(time.Since(upstart).Seconds())
	if res.IsError {
		outcome = OutcomeToolError
	} else {
		v.recordUse(ctx, p, cat, name)
	}
	return res
}

// recordUse records a call that succeeded as a use of the tool, for a catalog
// that includes its most used tools; one principal's uses of a tool count
// at most contract.MaxUsesPerPrincipal a day, a tool is among the most
// used once contract.MinUsePrincipals used it, and anonymous calls do not
// count.
func (v *view) recordUse(ctx context.Context, p Principal, cat *toolcatalog.Catalog, name string) {
	// Anonymous callers are no one in particular: what they use decides
	// nothing for the principals the catalog serves.
	if cat.Document.Search.AlwaysIncludeTopNUsed <= 0 || p.User == Anonymous.User {
		return
	}
	if err := toolcatalog.RecordUsage(ctx, v.s.redis, v.s.keys, cat, p.User, name); err != nil {
		v.s.g.opts.Log.Error(err, "Recording a use", "catalog", v.s.id, "tool", name)
	}
}

// learn records the request behind a tool_call that succeeded, for a
// catalog that learns from use: never for anonymous clients, and at most
// at the principal's learning rate, so no one client can flood the log.
func (v *view) learn(ctx context.Context, p Principal, call *toolcatalog.Call) {
	cat := v.s.follower.Current()
	if cat == nil || !cat.Document.Search.LearnFromRequests || p.User == Anonymous.User || !v.s.g.rates.learn(p.key()) {
		return
	}
	if err := toolcatalog.RecordRequest(ctx, v.s.redis, v.s.keys, cat, p.User, call.Request, call.Name); err != nil {
		v.s.g.opts.Log.Error(err, "Recording a request", "catalog", v.s.id)
	}
}

func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: msg}}, IsError: true}
}

// cacheable says how a client may keep what a view answers (MCP
// 2026-07-28: server/discover and the lists): only for its own principal,
// since the principal's permissions and context window choose the tools,
// and for ListTTL unless notifications/tools/list_changed comes first.
func (g *Gateway) cacheable(_ context.Context, _ mcp.Request, c *mcp.Cacheable) {
	c.CacheScope = cacheScopePrivate
	c.TTLMs = int(g.opts.ListTTL.Milliseconds())
}

// cacheScopePrivate is MCP's cacheScope for an answer only its requester
// may keep.
const cacheScopePrivate = "private"
