package gateway

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/net/http/httpguts"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/egress"
	"github.com/toolcatalog/tool-catalog-operator/internal/kube/crkube"
	"github.com/toolcatalog/tool-catalog-operator/internal/mcpsource"
	"github.com/toolcatalog/tool-catalog-operator/internal/serverref"
	"github.com/toolcatalog/tool-catalog-operator/internal/toolschema"
	"github.com/toolcatalog/tool-catalog-operator/pkg/clip"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// upstreams holds one client session per upstream server and settings,
// and the compiled argument schemas of the tools called.
type upstreams struct {
	// kube reads ToolSources (cached); secrets reads their Secrets.
	kube, secrets client.Reader
	// servers follows sources' serverRef.
	servers *serverref.Resolver
	// egress decides which servers may be reached.
	egress  *egress.Policy
	timeout time.Duration
	// maxResult and maxValues bound an upstream answer, in bytes and in
	// JSON values.
	maxResult, maxValues int64
	log                  logr.Logger
	// resolveTTL is how long a ToolSource's resolved settings are reused.
	resolveTTL time.Duration

	mu       sync.Mutex
	pool     map[string]*pooled // by settings fingerprint
	resolved map[client.ObjectKey]resolvedSource
	schemas  map[string]*compiled // by spec hash
}

type pooled struct {
	mu      sync.Mutex // one connection attempt at a time
	session *mcpsource.Session
	used    time.Time // under upstreams.mu
}

type compiled struct {
	args *toolschema.Arguments
	used time.Time
}

type resolvedSource struct {
	cfg   mcpsource.Config
	at    time.Time
	rv    string
	error error
}

func newUpstreams(kube, secrets client.Reader, servers *serverref.Resolver, policy *egress.Policy, timeout time.Duration, limits Limits, log logr.Logger) *upstreams {
	return &upstreams{kube: kube, secrets: secrets, servers: servers, egress: policy, timeout: timeout, maxResult: limits.UpstreamResultBytes, maxValues: limits.UpstreamResultValues, log: log, resolveTTL: 30 * time.Second,
		pool: map[string]*pooled{}, resolved: map[client.ObjectKey]resolvedSource{}, schemas: map[string]*compiled{}}
}

// callError is a call's failure as the model sees it, with its outcome
// for metrics.
type callError struct {
	outcome, message string
}

func (e *callError) Error() string { return e.message }

// arguments checks a call's arguments against the tool's schema, compiled
// once per spec hash.
func (u *upstreams) arguments(tool contract.Tool, args json.RawMessage) error {
	u.mu.Lock()
	c := u.schemas[tool.SpecHash]
	if c != nil {
		c.used = time.Now()
	}
	u.mu.Unlock()
	if c == nil {
		a, err := toolschema.CompileArguments(tool.Parameters)
		if err != nil {
			return &callError{OutcomeInvalid, fmt.Sprintf("the parameters schema of %s cannot be used: %v", tool.Name, err)}
		}
		c = &compiled{args: a, used: time.Now()}
		u.mu.Lock()
		u.schemas[tool.SpecHash] = c
		u.mu.Unlock()
	}
	if err := c.args.Validate(args); err != nil {
		return &callError{OutcomeInvalid, fmt.Sprintf("the arguments of %s do not match its parameters: %v; use tool_describe for its schema", tool.Name, err)}
	}
	return nil
}

// config returns how to reach a tool's server: its ToolSource's settings,
// only for a tool that source imports, or its bare URL (no credentials)
// for a tool written by hand.
func (u *upstreams) config(ctx context.Context, namespace string, tool contract.Tool, caller Principal) (mcpsource.Config, error) {
	src := tool.Source
	if src.ToolSource == "" {
		return mcpsource.Config{URL: src.MCPURL, Header: http.Header{}, Egress: u.egress, MaxResponseBytes: u.maxResult, MaxResponseValues: u.maxValues}, nil
	}
	key := client.ObjectKey{Namespace: namespace, Name: src.ToolSource}
	ts := &v1alpha1.ToolSource{}
	if err := u.kube.Get(ctx, key, ts); err != nil {
		u.log.Error(err, "Reading a ToolSource", "toolSource", key.String())
		return mcpsource.Config{}, &callError{OutcomeDenied, fmt.Sprintf("%s cannot be called: its ToolSource %s cannot be read", tool.Name, src.ToolSource)}
	}
	if err := mcpsource.Imports(ts, tool.Name, src.Tool); err != nil {
		return mcpsource.Config{}, &callError{OutcomeDenied, fmt.Sprintf("%s cannot be called: %v", tool.Name, err)}
	}
	u.mu.Lock()
	r, ok := u.resolved[key]
	u.mu.Unlock()
	if !ok || r.rv != ts.ResourceVersion || time.Since(r.at) >= u.resolveTTL {
		r.cfg, r.error = mcpsource.Resolve(ctx, crkube.Getter(u.secrets), ts)
		if r.error == nil {
			_, r.error = u.servers.Apply(ctx, ts, &r.cfg)
		}
		r.cfg.Egress, r.cfg.MaxResponseBytes, r.cfg.MaxResponseValues = u.egress, u.maxResult, u.maxValues
		r.at, r.rv = time.Now(), ts.ResourceVersion
		u.mu.Lock()
		u.resolved[key] = r
		u.mu.Unlock()
	}
	if refErr := (*serverref.Error)(nil); errors.As(r.error, &refErr) {
		return mcpsource.Config{}, &callError{OutcomeUpstreamError, fmt.Sprintf("%s cannot be called: the serverRef of its ToolSource %s cannot be followed: %s", tool.Name, src.ToolSource, refErr.Message)}
	}
	if r.error != nil {
		u.log.Error(r.error, "Resolving a ToolSource", "toolSource", key.String())
		return mcpsource.Config{}, &callError{OutcomeUpstreamError, fmt.Sprintf("%s cannot be called: the settings of its ToolSource %s cannot be resolved", tool.Name, src.ToolSource)}
	}
	return withCaller(r.cfg, ts.Spec.MCP.CallerIdentity, caller, tool.Name, src.ToolSource)
}

// withCaller adds to cfg what tells the server who calls, as the
// ToolSource's callerIdentity says. Sessions are pooled by the settings,
// so a caller's identity never rides on another caller's session.
func withCaller(cfg mcpsource.Config, id *v1alpha1.CallerIdentitySpec, caller Principal, tool, source string) (mcpsource.Config, error) {
	if id == nil || id.Mode == "" || id.Mode == v1alpha1.CallerIdentityNone {
		return cfg, nil
	}
	cfg.Header = cfg.Header.Clone()
	switch id.Mode {
	case v1alpha1.CallerIdentityHeaders:
		groups := strings.Join(caller.Groups, ",")
		if !validHeaderValue(caller.User) || !validHeaderValue(groups) {
			return mcpsource.Config{}, &callError{OutcomeDenied, fmt.Sprintf("%s cannot be called: the caller's name cannot be sent in a header", tool)}
		}
		cfg.Header.Set(cmp.Or(id.UserHeader, "X-Toolcatalog-User"), caller.User)
		cfg.Header.Set(cmp.Or(id.GroupsHeader, "X-Toolcatalog-Groups"), groups)
	case v1alpha1.CallerIdentityPassthrough:
		// Only a token issued for the server's audience goes there: one
		// meant for the gateway alone, a static token or none stays here.
		if id.Audience == "" || caller.token == "" || !slices.Contains(caller.audiences, id.Audience) || !validHeaderValue(caller.token) {
			return mcpsource.Config{}, &callError{OutcomeDenied, fmt.Sprintf("%s cannot be called with your credentials: ToolSource %s passes the caller's token on, and yours was not issued for its audience %q", tool, source, id.Audience)}
		}
		cfg.Header.Set("Authorization", "Bearer "+caller.token)
	default:
		return mcpsource.Config{}, &callError{OutcomeDenied, fmt.Sprintf("%s cannot be called: ToolSource %s has an unknown callerIdentity mode", tool, source)}
	}
	return cfg, nil
}

// validHeaderValue says s can be a header value as it is (no line breaks
// or other controls) and is bounded.
func validHeaderValue(s string) bool {
	return len(s) <= 8<<10 && httpguts.ValidHeaderFieldValue(s)
}

// call proxies a call to the tool's upstream server, with a timeout; a
// session that fails is replaced once. Its errors say what kind of
// failure it was and never carry the server's URL or credentials: a
// client learns nothing of the network behind the gateway, and cannot
// tell a refused port from a slow or foreign one.
func (u *upstreams) call(ctx context.Context, namespace string, tool contract.Tool, caller Principal, args json.RawMessage) (*mcp.CallToolResult, error) {
	src := tool.Source
	if src == nil || (src.MCPURL == "" && src.ToolSource == "") {
		return nil, &callError{OutcomeNoUpstream, fmt.Sprintf("%s has no upstream MCP server: the agent runtime must execute it itself", tool.Name)}
	}
	cfg, err := u.config(ctx, namespace, tool, caller)
	if err != nil {
		return nil, err
	}
	if checkURLErr := u.egress.CheckURL(cfg.URL); checkURLErr != nil {
		return nil, &callError{OutcomeDenied, fmt.Sprintf("%s cannot be called: its MCP server is outside the gateway's egress policy", tool.Name)}
	}
	ctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	fp := cfg.Fingerprint()
	u.mu.Lock()
	p := u.pool[fp]
	if p == nil {
		p = &pooled{}
		u.pool[fp] = p
	}
	p.used = time.Now()
	u.mu.Unlock()
	var res *mcp.CallToolResult
	connected, oversized := false, false
	for attempt := 0; attempt < 2; attempt++ {
		var s *mcpsource.Session
		if s, err = p.get(ctx, cfg); err != nil {
			break
		}
		connected = true
		cut := s.Oversized()
		if res, err = s.CallTool(ctx, src.Tool, args); err == nil {
			return res, nil
		}
		oversized = s.Oversized() > cut
		var rpcErr *jsonrpc.Error
		if (errors.As(err, &rpcErr) && rpcErr.Code != codeRejectedByTransport) || ctx.Err() != nil || oversized {
			break // the server answered with an error or too much, or time is up
		}
		p.drop(s)
	}
	u.log.V(1).Info("Upstream call failed", "tool", tool.Name, "error", cfg.Redact(err))
	var rpcErr *jsonrpc.Error
	switch {
	case errors.Is(err, egress.ErrDenied):
		return nil, &callError{OutcomeDenied, fmt.Sprintf("%s cannot be called: its MCP server is outside the gateway's egress policy", tool.Name)}
	case oversized:
		return nil, &callError{OutcomeUpstreamError, fmt.Sprintf("the upstream MCP server of %s answered with more than %d bytes or %d JSON values, more than the gateway passes on", tool.Name, u.maxResult, u.maxValues)}
	case !connected:
		// Refused, slow, redirecting and non-MCP servers look alike.
		return nil, &callError{OutcomeUpstreamError, fmt.Sprintf("the upstream MCP server of %s could not be reached", tool.Name)}
	case errors.As(err, &rpcErr) && rpcErr.Code != codeRejectedByTransport:
		return nil, &callError{OutcomeUpstreamError, fmt.Sprintf("the upstream MCP server of %s answered with error %d: %s", tool.Name, rpcErr.Code, clip.Truncate(cfg.Redact(errors.New(rpcErr.Message)), 300))}
	case ctx.Err() != nil:
		return nil, &callError{OutcomeUpstreamError, fmt.Sprintf("the upstream MCP server of %s did not answer within %s", tool.Name, u.timeout)}
	default:
		return nil, &callError{OutcomeUpstreamError, fmt.Sprintf("the upstream MCP server of %s could not be reached", tool.Name)}
	}
}

// codeRejectedByTransport is the SDK's JSON-RPC code for a message its
// HTTP transport could not deliver: no answer of the server's.
const codeRejectedByTransport = -32005

func (p *pooled) get(ctx context.Context, cfg mcpsource.Config) (*mcpsource.Session, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.session != nil {
		return p.session, nil
	}
	// The SDK detaches the session from ctx once connected, so the call's
	// deadline bounds only the connection and initialization.
	s, err := mcpsource.Connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	p.session = s
	return s, nil
}

// drop closes a failed session, unless another caller replaced it.
func (p *pooled) drop(s *mcpsource.Session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.session == s {
		_ = s.Close()
		p.session = nil
	}
}

// sweep forgets what has not been used for idle: upstream sessions (closed),
// compiled schemas and resolved ToolSource settings, so what the gateway
// holds follows what its clients use, not everything they ever used.
func (u *upstreams) sweep(idle time.Duration) {
	u.mu.Lock()
	var stale []*pooled
	for fp, p := range u.pool {
		if time.Since(p.used) > idle {
			stale = append(stale, p)
			delete(u.pool, fp)
		}
	}
	for h, c := range u.schemas {
		if time.Since(c.used) > idle {
			delete(u.schemas, h)
		}
	}
	for k, r := range u.resolved {
		if time.Since(r.at) > u.resolveTTL {
			delete(u.resolved, k)
		}
	}
	u.mu.Unlock()
	for _, p := range stale {
		p.mu.Lock()
		if p.session != nil {
			_ = p.session.Close()
			p.session = nil
		}
		p.mu.Unlock()
	}
}

// sizes reports how many sessions, schemas and settings are held.
func (u *upstreams) sizes() (sessions, schemas, resolved int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.pool), len(u.schemas), len(u.resolved)
}

// close ends every pooled session.
func (u *upstreams) close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, p := range u.pool {
		p.mu.Lock()
		if p.session != nil {
			_ = p.session.Close()
		}
		p.mu.Unlock()
	}
}
