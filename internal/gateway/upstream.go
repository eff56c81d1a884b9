package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/mcpsource"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// upstreams holds one client session per upstream server and settings,
// and the compiled argument schemas of the tools called.
type upstreams struct {
	// kube reads ToolSources (cached); secrets reads their Secrets.
	kube, secrets client.Reader
	timeout       time.Duration
	// resolveTTL is how long a ToolSource's resolved settings are reused.
	resolveTTL time.Duration

	mu       sync.Mutex
	pool     map[string]*pooled // by settings fingerprint
	resolved map[client.ObjectKey]resolvedSource
	schemas  map[string]*catalog.Arguments // by spec hash
}

type pooled struct {
	mu      sync.Mutex // one connection attempt at a time
	session *mcpsource.Session
}

type resolvedSource struct {
	cfg   mcpsource.Config
	at    time.Time
	rv    string
	error error
}

func newUpstreams(kube, secrets client.Reader, timeout time.Duration) *upstreams {
	return &upstreams{kube: kube, secrets: secrets, timeout: timeout, resolveTTL: 30 * time.Second,
		pool: map[string]*pooled{}, resolved: map[client.ObjectKey]resolvedSource{}, schemas: map[string]*catalog.Arguments{}}
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
	a := u.schemas[tool.SpecHash]
	u.mu.Unlock()
	if a == nil {
		var err error
		if a, err = catalog.CompileArguments(tool.Parameters); err != nil {
			return &callError{OutcomeInvalid, fmt.Sprintf("the parameters schema of %s cannot be used: %v", tool.Name, err)}
		}
		u.mu.Lock()
		u.schemas[tool.SpecHash] = a
		u.mu.Unlock()
	}
	if err := a.Validate(args); err != nil {
		return &callError{OutcomeInvalid, fmt.Sprintf("the arguments of %s do not match its parameters: %v; use tool_describe for its schema", tool.Name, err)}
	}
	return nil
}

// config returns how to reach a tool's server: its ToolSource's settings,
// or its bare URL for a tool written by hand.
func (u *upstreams) config(ctx context.Context, namespace string, src *contract.Source) (mcpsource.Config, error) {
	if src.ToolSource == "" {
		return mcpsource.Config{URL: src.MCPURL, Header: http.Header{}}, nil
	}
	key := client.ObjectKey{Namespace: namespace, Name: src.ToolSource}
	ts := &v1alpha1.ToolSource{}
	if err := u.kube.Get(ctx, key, ts); err != nil {
		return mcpsource.Config{}, fmt.Errorf("reading ToolSource %s: %w", src.ToolSource, err)
	}
	u.mu.Lock()
	r, ok := u.resolved[key]
	u.mu.Unlock()
	if ok && r.rv == ts.ResourceVersion && time.Since(r.at) < u.resolveTTL {
		return r.cfg, r.error
	}
	cfg, err := mcpsource.Resolve(ctx, u.secrets, ts)
	u.mu.Lock()
	u.resolved[key] = resolvedSource{cfg: cfg, at: time.Now(), rv: ts.ResourceVersion, error: err}
	u.mu.Unlock()
	return cfg, err
}

// call proxies a call to the tool's upstream server, with a timeout; a
// session that fails is replaced once.
func (u *upstreams) call(ctx context.Context, namespace string, tool contract.Tool, args json.RawMessage) (*mcp.CallToolResult, error) {
	src := tool.Source
	if src == nil || (src.MCPURL == "" && src.ToolSource == "") {
		return nil, &callError{OutcomeNoUpstream, fmt.Sprintf("%s has no upstream MCP server: the agent runtime must execute it itself", tool.Name)}
	}
	cfg, err := u.config(ctx, namespace, src)
	if err != nil {
		return nil, &callError{OutcomeUpstreamError, fmt.Sprintf("%s cannot be called: %v", tool.Name, err)}
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
	u.mu.Unlock()
	var res *mcp.CallToolResult
	for attempt := 0; attempt < 2; attempt++ {
		var s *mcpsource.Session
		if s, err = p.get(ctx, cfg); err != nil {
			break
		}
		if res, err = s.CallTool(ctx, src.Tool, args); err == nil {
			return res, nil
		}
		var rpcErr *jsonrpc.Error
		if errors.As(err, &rpcErr) || ctx.Err() != nil {
			break // the server answered with an error, or time is up
		}
		p.drop(s)
	}
	return nil, &callError{OutcomeUpstreamError, fmt.Sprintf("the upstream MCP server of %s failed: %s", tool.Name, cfg.Redact(err))}
}

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
