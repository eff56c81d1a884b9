// Package gateway serves published tool catalogs over MCP: one Streamable
// HTTP endpoint per catalog at /mcp/<namespace>/<catalog>, where a client
// lists the tools the catalog's disclosure policy sends it (the tools
// themselves, or the core tools plus tool_search, tool_describe and
// tool_call), searches and describes the others, and calls them: calls go
// to the tool's upstream MCP server (from its ToolSource) after its
// arguments are checked against its schema. Clients authenticate with a
// bearer token (a Kubernetes service-account token, checked by TokenReview,
// or a static token); their principal and groups filter everything they
// see and call. Catalogs are followed from Redis, so a new version reaches
// clients at once, with notifications/tools/list_changed when their list
// changes. Any replica serves any client: what a session needs is kept in
// the catalog's Redis (see sessions.go).
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/codes"
	"golang.org/x/sync/singleflight"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalogconfig"
	"github.com/toolcatalog/tool-catalog-operator/internal/egress"
	"github.com/toolcatalog/tool-catalog-operator/internal/gateway/request"
	"github.com/toolcatalog/tool-catalog-operator/internal/kube/crkube"
	"github.com/toolcatalog/tool-catalog-operator/internal/redisconn"
	"github.com/toolcatalog/tool-catalog-operator/internal/serverref"
	"github.com/toolcatalog/tool-catalog-operator/internal/telemetry"
	"github.com/toolcatalog/tool-catalog-operator/pkg/clip"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
)

// Defaults of Options.
const (
	DefaultCallTimeout = 30 * time.Second
	DefaultIdleViews   = 10 * time.Minute
	// DefaultListTTL is as long as a follower goes without checking its
	// catalog's version when a notice is lost (toolcatalog's recheck): a
	// list kept that long is no staler than the gateway's own.
	DefaultListTTL = 30 * time.Second
)

// Options configure a Gateway.
type Options struct {
	// Kube reads ToolCatalogs and ToolSources: a watch cache in the
	// binary, so requests do not reach the API server.
	Kube client.Reader
	// Secrets reads the Secrets catalogs and sources name (uncached).
	Secrets client.Reader
	// Auth authenticates bearer tokens.
	Auth *Authenticator
	// Metrics are recorded per catalog.
	Metrics *Metrics
	// Egress decides which upstream servers may be reached;
	// egress.Default() when nil.
	Egress *egress.Policy
	// Servers follows ToolSources' spec.mcp.serverRef to the Pods a call
	// is sent to; one reading through Secrets with the defaults when nil.
	Servers *serverref.Resolver
	// CallTimeout bounds each upstream call; DefaultCallTimeout when zero.
	CallTimeout time.Duration
	// IdleViews is how long a principal's view of a catalog is kept with
	// no session, and a catalog with no view left and no request followed;
	// DefaultIdleViews when zero.
	IdleViews time.Duration
	// UsageInterval is how often a catalog's most used tools are read
	// again (toolcatalog.DefaultUsageInterval when zero).
	UsageInterval time.Duration
	// ListTTL is how long a client may keep a list it was sent before
	// asking again (MCP 2026-07-28's ttlMs), unless
	// notifications/tools/list_changed tells it sooner; DefaultListTTL
	// when zero, and 0 (ask every time) when negative.
	ListTTL time.Duration
	// Limits bound what a client can make the gateway do; DefaultLimits
	// for the fields left zero.
	Limits Limits
	// Version is announced to clients.
	Version string
	// PublicURL is the scheme and host clients reach the gateway at, for
	// the protected resource metadata; the request's own when empty.
	PublicURL string
	// Log receives what goes wrong outside a request.
	Log logr.Logger
	// Audit receives one line per tool call (see audit); a zero Logger
	// discards them.
	Audit logr.Logger
}

// Gateway serves catalogs over MCP.
type Gateway struct {
	opts Options
	up   *upstreams
	// rates are each principal's search and call budgets.
	rates *rates
	// listens are the subscriptions/listen streams open.
	listens *listens
	// ctx bounds the followers.
	ctx context.Context
	// draining ends long-lived streams (Drain).
	draining context.Context
	drain    context.CancelFunc

	// redis holds one client per Redis and credentials, shared by the
	// catalogs followed there (redisconn.Pool), each follower one user of
	// it by its own ID (followers counts them).
	redis     *redisconn.Pool
	followers atomic.Uint64
	// notices holds one subscription per channel and client, shared by
	// the followers of that client's catalogs.
	notices sharedNotices

	mu       sync.Mutex
	catalogs map[client.ObjectKey]*served
	// building starts each catalog's follower once at a time.
	building singleflight.Group
}

// New returns a gateway whose catalog followers live until ctx ends.
func New(ctx context.Context, opts Options) *Gateway {
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.IdleViews <= 0 {
		opts.IdleViews = DefaultIdleViews
	}
	switch {
	case opts.ListTTL == 0:
		opts.ListTTL = DefaultListTTL
	case opts.ListTTL < 0:
		opts.ListTTL = 0
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.Egress == nil {
		opts.Egress = egress.Default()
	}
	if opts.Servers == nil {
		opts.Servers = &serverref.Resolver{Reader: opts.Secrets}
	}
	opts.Limits = opts.Limits.withDefaults()
	g := &Gateway{opts: opts, ctx: ctx, catalogs: map[client.ObjectKey]*served{}, rates: newRates(opts.Limits), listens: newListens(opts.Limits), redis: redisconn.NewPool(), notices: sharedNotices{m: map[redis.UniversalClient]*noticesUse{}, log: opts.Log},
		up: newUpstreams(opts.Kube, opts.Secrets, opts.Servers, opts.Egress, opts.CallTimeout, opts.Limits, opts.Log)}
	g.draining, g.drain = context.WithCancel(ctx)
	go g.dropIdleViews(ctx)
	context.AfterFunc(ctx, func() {
		// Open streams end with their sessions, so a shutdown does not
		// wait for them.
		g.mu.Lock()
		for key, s := range g.catalogs {
			s.stop()
			delete(g.catalogs, key)
		}
		g.followed()
		g.mu.Unlock()
		g.up.close()
	})
	return g
}

// Drain ends the streams that stay open (session GET streams and
// subscriptions/listen), so that a server shutting down waits only for the
// requests under way: their clients reconnect to another replica, which
// serves their sessions as well.
func (g *Gateway) Drain() { g.drain() }

// Handler serves /mcp/<namespace>/<catalog> and, with OpenID Connect
// issuers, its protected resource metadata.
func (g *Gateway) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp/{namespace}/{catalog}", g.serveMCP)
	mux.HandleFunc("GET "+resourceMetadataPrefix+"/mcp/{namespace}/{catalog}", g.serveResourceMetadata)
	return mux
}

// caller is who a request comes from, and the window it asked for.
type caller struct {
	principal Principal
	window    int
}

type callerKey struct{}

func (c caller) viewKey() string { return strconv.Itoa(c.window) + "/" + c.principal.key() }

// callerOf is the caller of the HTTP request a tool call came in: who
// calls, with the token of this request, not of the request that made
// the view.
func callerOf(ctx context.Context) (caller, bool) {
	c, ok := ctx.Value(callerKey{}).(caller)
	return c, ok
}

func (g *Gateway) reject(w http.ResponseWriter, code int, reason, message string) {
	g.opts.Metrics.Rejected.WithLabelValues(reason).Inc()
	http.Error(w, message, code)
}

// unauthorized answers 401 with the challenge: with OpenID Connect
// issuers, it names the catalog's protected resource metadata (RFC 9728),
// where MCP clients find the authorization servers.
func (g *Gateway) unauthorized(w http.ResponseWriter, r *http.Request, message string) {
	challenge := `Bearer realm="toolcatalog-gateway"`
	if u := g.resourceMetadataURL(r); u != "" && g.issuersConfigured() {
		challenge += `, resource_metadata="` + u + `"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	g.reject(w, http.StatusUnauthorized, "unauthenticated", message)
}

func (g *Gateway) serveMCP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	key := client.ObjectKey{Namespace: r.PathValue("namespace"), Name: r.PathValue("catalog")}
	c := caller{}
	var err error
	if c.window, err = request.ContextWindow(r.URL.Query().Get("contextWindow")); err != nil {
		g.reject(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	// Who asks comes first: a client learns nothing of a catalog before
	// it has authenticated, and then only of the catalogs it may open.
	//
	// This is not the SDK's auth.RequireBearerToken middleware, which
	// answers every failure 401 before the handler runs: a catalog may
	// admit clients without a token (spec.gateway.allowAnonymous, known
	// only once the catalog is read); a verifier saturated with token
	// reviews answers 429 with Retry-After and an unreachable one 503, so
	// clients back off instead of dropping their tokens; and the
	// principal, not a per-replica token cache, is what a session is
	// checked against, so a session opened on one replica goes on on
	// another.
	var tc *v1alpha1.ToolCatalog
	token, err := request.Bearer(r.Header.Get("Authorization"))
	switch {
	case errors.Is(err, request.ErrNoToken):
		tc = &v1alpha1.ToolCatalog{}
		if getErr := g.opts.Kube.Get(ctx, key, tc); getErr != nil || !tc.Spec.Gateway.AllowAnonymous {
			g.unauthorized(w, r, request.ErrNoToken.Error())
			return
		}
		c.principal = Anonymous
	case err != nil:
		g.unauthorized(w, r, err.Error())
		return
	default:
		actx, span := telemetry.Tracer().Start(telemetry.ExtractHeader(WithSource(ctx, clientAddress(r)), r.Header), "authenticate")
		p, authenticateErr := g.opts.Auth.Authenticate(actx, token)
		if authenticateErr != nil {
			span.SetStatus(codes.Error, "not authenticated")
		}
		span.End()
		switch {
		case errors.Is(authenticateErr, ErrUnauthenticated):
			g.unauthorized(w, r, "the bearer token is not valid")
			return
		case errors.Is(authenticateErr, ErrTooManyReviews):
			w.Header().Set("Retry-After", "1")
			g.reject(w, http.StatusTooManyRequests, "rate_limited", authenticateErr.Error())
			return
		case authenticateErr != nil:
			g.opts.Log.Error(authenticateErr, "Authenticating a client")
			g.reject(w, http.StatusServiceUnavailable, "unavailable", "the token could not be checked; retry")
			return
		}
		c.principal = p
	}
	if tc == nil {
		tc = &v1alpha1.ToolCatalog{}
		if getErr := g.opts.Kube.Get(ctx, key, tc); getErr != nil {
			if apierrors.IsNotFound(getErr) {
				g.forget(key)
				g.reject(w, http.StatusNotFound, "not_found", notServed(key))
				return
			}
			g.reject(w, http.StatusServiceUnavailable, "unavailable", "reading the catalog failed; retry")
			return
		}
	}
	if !mayOpen(tc, c.principal) {
		// Answered as a catalog that does not exist.
		g.reject(w, http.StatusNotFound, "forbidden", notServed(key))
		return
	}
	s, err := g.served(tc)
	if s != nil {
		defer s.release()
	}
	if err != nil {
		g.opts.Log.Error(err, "Serving a catalog", "catalog", key.String())
		w.Header().Set("Retry-After", "5")
		g.reject(w, http.StatusServiceUnavailable, "unavailable", fmt.Sprintf("catalog %s cannot be served now; retry", key))
		return
	}
	if s.follower.Current() == nil {
		w.Header().Set("Retry-After", "5")
		g.reject(w, http.StatusServiceUnavailable, "not_published", fmt.Sprintf("catalog %s is not published yet", key))
		return
	}
	msgs, ok := g.admit(w, r, c)
	if !ok {
		return
	}
	r = r.WithContext(context.WithValue(ctx, callerKey{}, c))
	switch id := r.Header.Get("Mcp-Session-Id"); {
	case id != "":
		s.serveSession(w, r, c, id, msgs)
	case r.Method == http.MethodPost && len(msgs) == 1 && msgs[0].Method == "initialize":
		s.openSession(w, r, c, msgs)
	default:
		// Protocol 2026-07-28, or a client that keeps no session.
		s.serveStateless(w, r, "", msgs)
	}
}

// clientAddress is the address a request comes from, without its port:
// the source whose unknown tokens share a review budget. An IPv6 client
// is its /64, which one host usually holds whole, so it cannot take a
// budget of its own per address. Behind a proxy it is the proxy's.
func clientAddress(r *http.Request) string {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	if a := ap.Addr().Unmap(); a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return ap.Addr().Unmap().String()
}

// admit applies the per-principal bounds to a request that passed
// authentication: its body is bounded and its tool calls are within its
// rates. It returns the JSON-RPC messages of the body.
func (g *Gateway) admit(w http.ResponseWriter, r *http.Request, c caller) ([]request.Message, bool) {
	limits := g.opts.Limits
	if r.Method != http.MethodPost {
		return nil, true
	}
	body, err := request.ReadBody(r, limits.RequestBytes)
	switch {
	case errors.Is(err, request.ErrTooLarge):
		g.reject(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("a request body may hold at most %d bytes", limits.RequestBytes))
		return nil, false
	case err != nil:
		g.reject(w, http.StatusBadRequest, "bad_request", "the request body could not be read")
		return nil, false
	}
	// One reading of the body: what is counted and limited here is what
	// the SDK runs, so a body two readers could read differently (a
	// member twice, or twice but for case), or one nested past 10,000
	// levels, is refused before anything is counted.
	msgs, err := request.Messages(body)
	if err != nil {
		g.reject(w, http.StatusBadRequest, "bad_request", "the request body is refused: "+clip.Truncate(err.Error(), 300))
		return nil, false
	}
	searches, calls := request.ToolCalls(msgs, toolcatalog.ToolSearch)
	for i := range searches + calls {
		if wait, ok := g.rates.reserve(c.principal.key(), i < searches); !ok {
			w.Header().Set("Retry-After", retryAfter(wait))
			g.reject(w, http.StatusTooManyRequests, "rate_limited", "too many tool calls: retry later")
			return nil, false
		}
	}
	return msgs, true
}

func notServed(key client.ObjectKey) string {
	return fmt.Sprintf("no catalog %s is served to you", key)
}

// mayOpen reports whether a principal may use a catalog's endpoint:
// spec.gateway.allowedPrincipals, by default the service accounts of the
// catalog's namespace; anonymous clients only where allowAnonymous.
func mayOpen(tc *v1alpha1.ToolCatalog, p Principal) bool {
	if p.User == Anonymous.User {
		return tc.Spec.Gateway.AllowAnonymous
	}
	allowed := tc.Spec.Gateway.AllowedPrincipals
	if allowed == nil {
		allowed = []string{DefaultAllowedPrincipals(tc.Namespace)}
	}
	return toolcatalog.Allows(allowed, p.User, p.Groups...)
}

// DefaultAllowedPrincipals is who may open a catalog of a namespace when
// spec.gateway.allowedPrincipals is unset: its service accounts.
func DefaultAllowedPrincipals(namespace string) string {
	return toolcatalog.GroupPrefix + "system:serviceaccounts:" + namespace
}

// served is one catalog the gateway follows.
type served struct {
	g     *Gateway
	key   client.ObjectKey
	id    string
	uid   types.UID
	where string
	// redis is the client of the catalog's Redis, shared with the other
	// catalogs there; redisUser is this follower's use of it.
	redis     redis.UniversalClient
	redisUser string
	keys      contract.Keys
	follower  *toolcatalog.Follower
	embedder  toolcatalog.QueryEmbedder
	// ctx ends when the catalog is no longer followed.
	ctx      context.Context
	cancel   context.CancelFunc
	handler  *mcp.StreamableHTTPHandler
	sessions *sessionStore
	cancels  *cancels
	streams  *streams

	mu    sync.Mutex
	views map[string]*view

	// inUse counts the requests under way (streams included); usedAt is
	// when the last began or ended, in Unix nanoseconds. A catalog no
	// request used for IdleViews, with no view left, is no longer
	// followed: its memory goes, and the next request follows it again.
	inUse  atomic.Int64
	usedAt atomic.Int64
}

// acquire counts a request in; under the gateway's lock, so a catalog is
// never dropped with a request that has it.
func (s *served) acquire() {
	s.inUse.Add(1)
	s.usedAt.Store(time.Now().UnixNano())
}

// release counts a request out.
func (s *served) release() {
	s.usedAt.Store(time.Now().UnixNano())
	s.inUse.Add(-1)
}

// served returns the catalog's follower, started or rebuilt when the
// ToolCatalog is new, where it is published changed or it was dropped
// idle, and counts the request in (the caller releases it). Building one
// reaches Redis, so it happens outside the gateway's lock, once per
// catalog however many requests wait for it.
func (g *Gateway) served(tc *v1alpha1.ToolCatalog) (*served, error) {
	key := client.ObjectKeyFromObject(tc)
	where := connectionOf(tc)
	// Disclosure, search and tools reach the follower with the next
	// version; only a new Redis, model or channel needs a new one, which
	// ends the catalog's sessions.
	current := func() *served {
		if s := g.catalogs[key]; s != nil && s.uid == tc.UID && s.where == where {
			return s
		}
		return nil
	}
	for {
		g.mu.Lock()
		s := current()
		if s != nil {
			s.acquire()
		}
		g.mu.Unlock()
		if s != nil {
			return s, nil
		}
		// Built (or found built), it is taken from the map like any
		// other: one dropped meanwhile is built again.
		if _, err := g.build(tc, key, where, current); err != nil {
			return nil, err
		}
	}
}

// build starts following a catalog and puts it in the gateway's map.
func (g *Gateway) build(tc *v1alpha1.ToolCatalog, key client.ObjectKey, where string, current func() *served) (*served, error) {
	v, err, _ := g.building.Do(key.String()+"\x00"+string(tc.UID)+"\x00"+where, func() (any, error) {
		g.mu.Lock()
		s := current()
		g.mu.Unlock()
		if s != nil {
			return s, nil
		}
		s, err := g.follow(tc, where)
		if err != nil {
			return nil, err
		}
		g.mu.Lock()
		old := g.catalogs[key]
		g.catalogs[key] = s
		g.followed()
		g.mu.Unlock()
		if old != nil {
			old.stop()
		}
		return s, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*served), nil
}

// follow resolves a catalog's configuration and starts following it.
func (g *Gateway) follow(tc *v1alpha1.ToolCatalog, where string) (*served, error) {
	key := client.ObjectKeyFromObject(tc)
	ctx, cancel := context.WithTimeout(g.ctx, 10*time.Second)
	defer cancel()
	resolver := &catalogconfig.Resolver{Reader: crkube.Getter(g.opts.Secrets)}
	cfg, err := resolver.Resolve(ctx, tc)
	if err != nil {
		return nil, fmt.Errorf("catalog %s cannot be served: %v", key, err)
	}
	user := fmt.Sprintf("%s#%d", key, g.followers.Add(1))
	s := &served{g: g, key: key, id: key.String(), uid: tc.UID, where: where, redis: g.redis.Get(user, cfg.Redis), redisUser: user, keys: cfg.Keys,
		views: map[string]*view{}, streams: &streams{m: map[string]chan struct{}{}}}
	s.usedAt.Store(time.Now().UnixNano())
	s.sessions = &sessionStore{rc: s.redis, keys: cfg.Keys, idle: g.opts.Limits.SessionIdle, lifetime: g.opts.Limits.SessionLifetime, max: g.opts.Limits.SessionsPerPrincipal}
	s.cancels = &cancels{s: s, m: map[string]context.CancelFunc{}}
	if p, buildProvidersErr := catalogconfig.BuildProviders(cfg.Providers, g.opts.Egress); buildProvidersErr == nil {
		s.embedder = p.Embedder
	} else {
		// Searches fall back to BM25 without a query embedder.
		g.opts.Log.Error(buildProvidersErr, "No query embedder: tool_search ranks by BM25", "catalog", s.id)
	}
	fctx, fcancel := context.WithCancel(g.ctx)
	s.ctx, s.cancel = fctx, fcancel
	// Redis is shared: only versions this ToolCatalog published are
	// served.
	s.follower, err = toolcatalog.Follow(fctx, s.redis, cfg.Keys, toolcatalog.FollowOptions{
		Channel: cfg.Channel, WaitForPublish: true, UsageInterval: g.opts.UsageInterval,
		Catalog: s.id, CatalogUID: string(tc.UID), Notices: g.notices.acquire(s.redis),
		OnUpdate: s.resync,
		// The most used tools are sent directly: views list them anew.
		OnMostUsed: s.resync,
		OnError: func(err error) {
			if errors.Is(err, toolcatalog.ErrForeignCatalog) {
				g.opts.Metrics.RefusedVersions.WithLabelValues(s.id, "foreign_catalog").Inc()
			}
			g.opts.Log.Error(err, "Following a catalog", "catalog", s.id)
		},
	})
	if err != nil {
		fcancel()
		g.notices.release(s.redis)
		g.redis.Forget(user)
		return nil, fmt.Errorf("catalog %s cannot be read from Redis: %v", key, err)
	}
	s.handler = mcp.NewStreamableHTTPHandler(s.serverFor, &mcp.StreamableHTTPOptions{
		// Any replica answers any request; sessions are the gateway's.
		Stateless: true,
		// A request of 2026-07-28 ends with its HTTP request.
		PropagateRequestCancellation: true,
		// The gateway serves behind Services and ingresses: the Host
		// header is not a loopback name there.
		DisableLocalhostProtection: true,
		// admit bounds bodies by the gateway's own limit first.
		MaxRequestBodyBytes: -1,
	})
	go s.cancels.follow(fctx)
	return s, nil
}

// connectionOf identifies what a catalog's follower is built from: where
// it is published and the model its queries are embedded with.
func connectionOf(tc *v1alpha1.ToolCatalog) string {
	raw, _ := json.Marshal([]any{tc.Spec.Redis, tc.Spec.Embedding, tc.Spec.Publish.Channel})
	return string(raw)
}

// forget stops following a catalog that no longer exists.
func (g *Gateway) forget(key client.ObjectKey) {
	g.mu.Lock()
	s := g.catalogs[key]
	delete(g.catalogs, key)
	g.followed()
	g.mu.Unlock()
	if s != nil {
		s.stop()
	}
}

// stop ends the catalog's streams and subscriptions; requests under way
// finish.
func (s *served) stop() {
	s.cancel()
	s.mu.Lock()
	var open []*mcp.ServerSession
	for _, v := range s.views {
		open = slices.AppendSeq(open, v.server.Sessions())
	}
	s.mu.Unlock()
	go func() {
		for _, ss := range open {
			_ = ss.Close()
		}
		s.g.notices.release(s.redis)
		s.g.redis.Forget(s.redisUser)
	}()
}

// serverFor is the MCP server of a new session: its caller's view.
func (s *served) serverFor(r *http.Request) *mcp.Server {
	c, ok := r.Context().Value(callerKey{}).(caller)
	if !ok {
		return nil
	}
	return s.view(c).server
}

// resync re-plans every view for a new version, after reporting the
// entries that cannot be served.
func (s *served) resync(cat *toolcatalog.Catalog) {
	for _, t := range cat.Tools() {
		if err := servable(t); err != nil {
			s.g.opts.Metrics.RefusedVersions.WithLabelValues(s.id, "malformed_entry").Inc()
			s.g.opts.Log.Error(err, "Leaving a malformed entry out", "catalog", s.id, "version", cat.Version())
		}
	}
	s.mu.Lock()
	views := slices.Collect(maps.Values(s.views))
	s.mu.Unlock()
	for _, v := range views {
		if err := v.sync(cat); err != nil {
			s.g.opts.Log.Error(err, "Planning a view", "catalog", s.id, "principal", v.caller.principal.User)
		}
	}
}

// dropIdleViews forgets views no request or stream used for IdleViews,
// the rate limiters of idle principals and the upstream sessions and
// caches no call used.
func (g *Gateway) dropIdleViews(ctx context.Context) {
	tick := time.NewTicker(max(g.opts.IdleViews/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		g.mu.Lock()
		all := slices.Collect(maps.Values(g.catalogs))
		g.mu.Unlock()
		for _, s := range all {
			s.dropIdle(g.opts.IdleViews)
		}
		g.dropIdleCatalogs(g.opts.IdleViews)
		g.rates.forget(g.opts.IdleViews)
		g.up.sweep(g.opts.IdleViews)
	}
}

// dropIdleCatalogs stops following the catalogs that have no view left
// and that no request used for idle.
func (g *Gateway) dropIdleCatalogs(idle time.Duration) {
	var dropped []*served
	g.mu.Lock()
	for key, s := range g.catalogs {
		if s.inUse.Load() == 0 && time.Since(time.Unix(0, s.usedAt.Load())) > idle && s.viewCount() == 0 {
			delete(g.catalogs, key)
			dropped = append(dropped, s)
		}
	}
	g.followed()
	g.mu.Unlock()
	for _, s := range dropped {
		s.stop()
	}
}

// followed counts the catalogs followed; g.mu is held.
func (g *Gateway) followed() { g.opts.Metrics.CatalogsFollowed.Set(float64(len(g.catalogs))) }

func (s *served) viewCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.views)
}

// Followed returns the catalogs the gateway follows now.
func (g *Gateway) Followed() []client.ObjectKey {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.SortedFunc(maps.Keys(g.catalogs), func(a, b client.ObjectKey) int { return strings.Compare(a.String(), b.String()) })
}

func (s *served) dropIdle(idle time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.views {
		if v.streams.Load() > 0 || hasSessions(v.server) {
			v.touch()
			continue
		}
		if time.Since(v.lastUsed()) > idle {
			delete(s.views, k)
		}
	}
}

// hasSessions says whether a view's server holds a session: a request
// under way, or a subscriptions/listen stream.
func hasSessions(server *mcp.Server) bool {
	for range server.Sessions() {
		return true
	}
	return false
}

// Views returns the users of a catalog's views, sorted.
func (g *Gateway) Views(key client.ObjectKey) []string {
	g.mu.Lock()
	s := g.catalogs[key]
	g.mu.Unlock()
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var users []string
	for _, v := range s.views {
		users = append(users, v.caller.principal.User)
	}
	slices.Sort(users)
	return users
}

// sharedNotices are the notice subscriptions of each Redis client the
// followers use (toolcatalog.Notices), shared as the client is: a gateway
// following hundreds of catalogs on one Redis holds one subscription per
// channel, and each notice is handed to its catalog's follower only.
type sharedNotices struct {
	log logr.Logger
	mu  sync.Mutex
	m   map[redis.UniversalClient]*noticesUse
}

type noticesUse struct {
	n     *toolcatalog.Notices
	users int
}

// acquire returns the client's subscriptions, counting a follower in.
func (sn *sharedNotices) acquire(c redis.UniversalClient) *toolcatalog.Notices {
	sn.mu.Lock()
	defer sn.mu.Unlock()
	u := sn.m[c]
	if u == nil {
		u = &noticesUse{n: toolcatalog.NewNotices(c, func(err error) { sn.log.Error(err, "Following the catalogs' notices") })}
		sn.m[c] = u
	}
	u.users++
	return u.n
}

// release counts a follower out; the subscriptions themselves end with
// their last follower.
func (sn *sharedNotices) release(c redis.UniversalClient) {
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if u := sn.m[c]; u != nil {
		if u.users--; u.users <= 0 {
			delete(sn.m, c)
		}
	}
}
