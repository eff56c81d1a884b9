package gateway

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolcatalog/tool-catalog-operator/internal/gateway/request"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// Any replica serves any client. Every request is answered by the MCP
// SDK's stateless handler: clients of protocol 2026-07-28 send what a
// request needs with the request, and the gateway's own state (catalogs,
// views) is rebuilt from Redis and the API server by whichever replica a
// request reaches. Clients of 2025-11-25 and older open a session with
// initialize; the gateway gives it an ID and keeps who opened it, and
// when, in the catalog's Redis (P:gateway:session:<id>), so every replica
// checks the same binding, the same idle timeout and lifetime and the
// same count of a principal's sessions. What a session adds to requests
// is served by the gateway too: the stream of notifications/tools/list_changed
// (GET) and the cancellation of a request by notifications/cancelled,
// passed to the replica running it over the catalog's Redis.

// sessionID is the form of the IDs the gateway gives (crypto/rand.Text);
// anything else names no session.
var sessionID = regexp.MustCompile(`^[A-Z2-7]{26}$`)

// sessionRecord is what Redis keeps of a session.
type sessionRecord struct {
	// UID is the ToolCatalog's: a catalog deleted and created again under
	// its name serves none of the old one's sessions.
	UID string `json:"uid"`
	// View hashes the principal and context window that opened it.
	View string `json:"view"`
	// Opened is when, in Unix milliseconds.
	Opened int64 `json:"opened"`
}

// hashOf is how principals and views are named in Redis: never in clear.
func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}

// sessionStore keeps a catalog's sessions in its Redis.
type sessionStore struct {
	rc       redis.UniversalClient
	keys     contract.Keys
	idle     time.Duration
	lifetime time.Duration
	max      int
	// known are the sessions this replica has seen, for a Redis that
	// does not answer (knownsessions.go).
	known knownSessions
}

// openScript opens a session unless its principal already holds max:
// KEYS session, principal's set; ARGV record, idle ms, now ms, max, id.
var openScript = redis.NewScript(`
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[3])
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], tonumber(ARGV[3]) + tonumber(ARGV[2]), ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
`)

// touchScript returns a session's record and, when the caller's view is
// the one that opened it, starts its idle timeout again: KEYS session,
// principal's set; ARGV idle ms, now ms, id, view.
var touchScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then return false end
local ok, rec = pcall(cjson.decode, v)
if not ok or type(rec) ~= 'table' or rec.view ~= ARGV[4] then return v end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], 'XX', tonumber(ARGV[2]) + tonumber(ARGV[1]), ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return v
`)

// errTooManySessions is a principal at its share of sessions.
var errTooManySessions = errors.New("too many sessions")

func (st *sessionStore) open(ctx context.Context, id, principal string, rec sessionRecord) error {
	raw, _ := json.Marshal(rec)
	ok, err := openScript.Run(ctx, st.rc, []string{st.keys.GatewaySession(id), st.keys.GatewaySessions(principal)},
		raw, st.idle.Milliseconds(), rec.Opened, st.max, id).Int()
	switch {
	case err != nil:
		return fmt.Errorf("opening a session: %w", err)
	case ok == 0:
		return errTooManySessions
	}
	st.known.remember(id, knownSession{rec: rec, principal: principal, view: rec.View, used: time.UnixMilli(rec.Opened)}, st.idle)
	return nil
}

// touch returns a session's record, nil when there is none; the idle
// timeout starts again when view is the one that opened it. While Redis
// does not answer, a session this replica has seen is answered from what
// it saw, and one it has not waits briefly for Redis.
func (st *sessionStore) touch(ctx context.Context, id, principal, view string, now time.Time) (*sessionRecord, error) {
	deadline := time.Now().Add(sessionWait)
	for {
		patience := time.Until(deadline)
		if st.known.has(id) {
			// Redis answers within milliseconds, or it is failing over.
			patience = min(patience, knownSessionPatience)
		}
		rctx, cancel := context.WithTimeout(ctx, max(patience, sessionWaitStep))
		rec, err := st.touchRedis(rctx, id, principal, view, now)
		cancel()
		if err == nil || !contract.TopologyError(err) {
			return rec, err
		}
		if known, ok := st.known.recall(id, principal, now, st.idle); ok {
			return known, nil
		}
		if time.Until(deadline) < sessionWaitStep || pause(ctx, sessionWaitStep) != nil {
			return nil, err
		}
	}
}

// touchRedis is touch as Redis answers it.
func (st *sessionStore) touchRedis(ctx context.Context, id, principal, view string, now time.Time) (*sessionRecord, error) {
	raw, err := touchScript.Run(ctx, st.rc, []string{st.keys.GatewaySession(id), st.keys.GatewaySessions(principal)},
		st.idle.Milliseconds(), now.UnixMilli(), id, view).Text()
	switch {
	case errors.Is(err, redis.Nil):
		st.known.forget(id)
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading a session: %w", err)
	}
	var rec sessionRecord
	if len(raw) > 1024 || json.Unmarshal([]byte(raw), &rec) != nil {
		st.known.forget(id)
		return nil, nil // not a record of the gateway's: no session
	}
	if rec.View == view {
		st.known.remember(id, knownSession{rec: rec, principal: principal, view: view, used: now}, st.idle)
	}
	return &rec, nil
}

// exists reports whether a session is still open.
func (st *sessionStore) exists(ctx context.Context, id string) (bool, error) {
	n, err := st.rc.Exists(ctx, st.keys.GatewaySession(id)).Result()
	return n == 1, err
}

func (st *sessionStore) close(ctx context.Context, id, principal string) error {
	st.known.forget(id)
	_, err := st.rc.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, st.keys.GatewaySession(id))
		p.ZRem(ctx, st.keys.GatewaySessions(principal), id)
		return nil
	})
	return err
}

// openSession answers an initialize without a session: it opens one,
// named in the answer's Mcp-Session-Id, within the principal's share.
func (s *served) openSession(w http.ResponseWriter, r *http.Request, c caller, msgs []request.Message) {
	ctx := r.Context()
	id := rand.Text()
	principal := hashOf(c.principal.key())
	err := s.sessions.open(ctx, id, principal, sessionRecord{UID: string(s.uid), View: hashOf(c.viewKey()), Opened: time.Now().UnixMilli()})
	switch {
	case errors.Is(err, errTooManySessions):
		s.g.reject(w, http.StatusTooManyRequests, "rate_limited", fmt.Sprintf("at most %d open sessions per principal: close one (HTTP DELETE) or let it expire", s.sessions.max))
		return
	case err != nil:
		s.g.opts.Log.Error(err, "Opening a session", "catalog", s.id)
		s.g.reject(w, http.StatusServiceUnavailable, "unavailable", "the session could not be opened; retry")
		return
	}
	w.Header().Set("Mcp-Session-Id", id)
	sw := &statusWriter{ResponseWriter: w}
	s.serveStateless(sw, r, id, msgs)
	if sw.code != 0 && sw.code != http.StatusOK {
		// A refused initialize opens nothing.
		_ = s.sessions.close(context.WithoutCancel(ctx), id, principal)
	}
}

// serveSession answers a request in a session: the session must be open
// and the caller's, whichever replica opened it.
func (s *served) serveSession(w http.ResponseWriter, r *http.Request, c caller, id string, msgs []request.Message) {
	ctx := r.Context()
	if !sessionID.MatchString(id) {
		http.Error(w, "session not found: open a new one with initialize", http.StatusNotFound)
		return
	}
	principal, view := hashOf(c.principal.key()), hashOf(c.viewKey())
	now := time.Now()
	rec, err := s.sessions.touch(ctx, id, principal, view, now)
	if err != nil {
		s.g.opts.Log.Error(err, "Reading a session", "catalog", s.id)
		w.Header().Set("Retry-After", "1")
		s.g.reject(w, http.StatusServiceUnavailable, "unavailable", "the session could not be read; retry")
		return
	}
	if rec == nil || rec.UID != string(s.uid) {
		http.Error(w, "session not found: open a new one with initialize", http.StatusNotFound)
		return
	}
	if rec.View != view {
		s.g.reject(w, http.StatusForbidden, "forbidden", "this MCP session belongs to another principal")
		return
	}
	if now.After(time.UnixMilli(rec.Opened).Add(s.sessions.lifetime)) {
		// Past its lifetime, however busy: the client opens a new one and
		// is authenticated again.
		_ = s.sessions.close(ctx, id, principal)
		http.Error(w, "session expired: open a new one with initialize", http.StatusNotFound)
		return
	}
	switch r.Method {
	case http.MethodDelete:
		if err := s.sessions.close(ctx, id, principal); err != nil {
			s.g.reject(w, http.StatusServiceUnavailable, "unavailable", "the session could not be closed; retry")
			return
		}
		s.streams.end(id)
		w.WriteHeader(http.StatusNoContent)
	case http.MethodGet:
		s.listChanges(w, r, c, id, time.UnixMilli(rec.Opened).Add(s.sessions.lifetime))
	case http.MethodPost:
		for _, m := range msgs {
			if m.Method == "notifications/cancelled" && m.Params.RequestID != nil {
				s.cancels.cancel(ctx, id, m.Params.RequestID)
			}
		}
		s.serveStateless(w, r, id, msgs)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
	}
}

// statusWriter notes the status of an answer.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// sessionKey holds the session a request came in, when it did.
type sessionKey struct{}

// requestContextKey holds the context of the HTTP request a JSON-RPC
// request came in: the SDK runs handlers of older protocols apart from it,
// so the gateway ends them itself when it ends (the client went away, or
// cancelled the request).
type requestContextKey struct{}

// serveStateless hands a request to the SDK's stateless handler. In a
// session, its requests can be cancelled by notifications/cancelled on
// any replica. Long-lived requests (subscriptions/listen) end when the
// gateway drains.
func (s *served) serveStateless(w http.ResponseWriter, r *http.Request, session string, msgs []request.Message) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	for _, m := range msgs {
		switch {
		case m.Method == "subscriptions/listen":
			c, _ := callerOf(ctx)
			release, ok := s.g.listens.acquire(c.principal.key())
			if !ok {
				w.Header().Set("Retry-After", "10")
				s.g.reject(w, http.StatusTooManyRequests, "rate_limited", fmt.Sprintf(
					"too many subscriptions/listen streams open: at most %d per principal and %d in all; close one", s.g.listens.perPrincipal, s.g.listens.total))
				return
			}
			defer release()
			stop := context.AfterFunc(s.g.draining, cancel)
			defer stop()
		case session != "" && m.ID != nil:
			defer s.cancels.add(session, m.ID, cancel)()
		}
	}
	if session != "" {
		ctx = context.WithValue(ctx, sessionKey{}, session)
	}
	s.handler.ServeHTTP(w, r.WithContext(context.WithValue(ctx, requestContextKey{}, ctx)))
}

// withRequestContext ends a handler's ctx when the HTTP request it came in
// ends.
func withRequestContext(ctx context.Context) (context.Context, context.CancelFunc) {
	rc, ok := ctx.Value(requestContextKey{}).(context.Context)
	if !ok {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(rc, cancel)
	return ctx, func() { stop(); cancel() }
}

// cancels are the requests in sessions this replica runs, by session and
// request ID.
type cancels struct {
	s  *served
	mu sync.Mutex
	m  map[string]context.CancelFunc
}

func cancelKey(session string, id json.RawMessage) string { return session + "\x00" + string(id) }

// add keeps a request's cancel until the returned func is called.
func (c *cancels) add(session string, id json.RawMessage, cancel context.CancelFunc) func() {
	k := cancelKey(session, id)
	c.mu.Lock()
	c.m[k] = cancel
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.m, k)
		c.mu.Unlock()
	}
}

// local cancels a request this replica runs.
func (c *cancels) local(session string, id json.RawMessage) bool {
	c.mu.Lock()
	cancel := c.m[cancelKey(session, id)]
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	return cancel != nil
}

// cancelNotice is what replicas tell each other on P:gateway:cancel.
type cancelNotice struct {
	Session string          `json:"session"`
	Request json.RawMessage `json:"request"`
}

// cancel cancels a session's request here, or tells the other replicas.
func (c *cancels) cancel(ctx context.Context, session string, id json.RawMessage) {
	if c.local(session, id) {
		return
	}
	raw, _ := json.Marshal(cancelNotice{Session: session, Request: id})
	if err := c.s.redis.Publish(ctx, c.s.keys.GatewayCancel(), raw).Err(); err != nil {
		c.s.g.opts.Log.Error(err, "Passing on a cancellation", "catalog", c.s.id)
	}
}

// follow cancels the requests other replicas are asked to cancel, until
// ctx ends.
func (c *cancels) follow(ctx context.Context) {
	sub := c.s.redis.Subscribe(ctx, c.s.keys.GatewayCancel())
	defer func() { _ = sub.Close() }()
	for msg := range sub.Channel() {
		var n cancelNotice
		if len(msg.Payload) > 512 || json.Unmarshal([]byte(msg.Payload), &n) != nil || !sessionID.MatchString(n.Session) {
			continue // not a notice of the gateway's
		}
		c.local(n.Session, n.Request)
	}
}

// streams are the list-changed streams this replica serves: one per
// session.
type streams struct {
	mu sync.Mutex
	m  map[string]chan struct{} // closed to end the session's stream
}

// open registers the stream of a session, ending the one it had on this
// replica (a client reconnecting, or one opening streams to hold the
// gateway's resources).
func (st *streams) open(session string) (done chan struct{}, release func()) {
	done = make(chan struct{})
	st.mu.Lock()
	if old := st.m[session]; old != nil {
		close(old)
	}
	st.m[session] = done
	st.mu.Unlock()
	return done, func() {
		st.mu.Lock()
		if st.m[session] == done {
			delete(st.m, session)
		}
		st.mu.Unlock()
	}
}

// end ends the stream of a closed session.
func (st *streams) end(session string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if done := st.m[session]; done != nil {
		close(done)
		delete(st.m, session)
	}
}

// listChangedEvent is the one message a session's GET stream carries.
const listChangedEvent = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n"

// listChanges serves a session's GET stream: notifications/tools/list_changed
// whenever the tools its view lists change, until the client goes, the
// session ends (closed on any replica, idle, or at its lifetime) or the
// gateway drains. Event IDs name the tools listed (and are each new, so a
// client that reconnects sees progress): a client that reconnects, to any
// replica, with the ID of a list that is no longer the one listed is told
// at once, so no change made while it was away is missed.
func (s *served) listChanges(w http.ResponseWriter, r *http.Request, c caller, id string, end time.Time) {
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		http.Error(w, "Accept must contain 'text/event-stream' for GET requests", http.StatusBadRequest)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported", http.StatusInternalServerError)
		return
	}
	v := s.view(c)
	v.streams.Add(1)
	defer v.streams.Add(-1)
	done, release := s.streams.open(id)
	defer release()
	listing, changed := v.changes()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	event := func(data string) bool {
		_, err := fmt.Fprintf(w, "id: %s.%s\n%s\n", listing, rand.Text()[:10], data)
		flusher.Flush()
		return err == nil
	}
	if !event(fmt.Sprintf("retry: %d\ndata:\n", streamRetry.Milliseconds())) {
		return
	}
	if seen, _, _ := strings.Cut(r.Header.Get("Last-Event-ID"), "."); seen != "" && seen != listing && !event(listChangedEvent) {
		return
	}
	lifetime := time.NewTimer(time.Until(end))
	defer lifetime.Stop()
	check := time.NewTicker(min(max(s.sessions.idle/4, 10*time.Millisecond), time.Minute))
	defer check.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.g.draining.Done():
			return
		case <-s.ctx.Done():
			return
		case <-done:
			return
		case <-lifetime.C:
			return
		case <-check.C:
			// Closed on another replica, or idle past its timeout.
			if ok, err := s.sessions.exists(r.Context(), id); err == nil && !ok {
				return
			}
			continue
		case <-changed:
		}
		listing, changed = v.changes()
		if !event(listChangedEvent) {
			return
		}
	}
}

// streamRetry is the reconnection delay a GET stream asks of its client.
const streamRetry = 500 * time.Millisecond

// searchMemory keeps the last tool_search of a session, or of a view for
// clients without one, in the catalog's Redis (P:gateway:search:<hash>),
// so that a tool_call on any replica knows the request behind it; only
// while the catalog learns from use.
type searchMemory struct {
	s *served
	// view hashes the view's key.
	view string
	ttl  time.Duration
}

// key is where the last search of the request's session or view is kept.
func (m *searchMemory) key(ctx context.Context) string {
	if id, ok := ctx.Value(sessionKey{}).(string); ok {
		return m.s.keys.LastSearch(hashOf("session\x00" + id))
	}
	return m.s.keys.LastSearch(m.view)
}

// lastSearch is what searchMemory keeps.
type lastSearch struct {
	Query string   `json:"query"`
	Found []string `json:"found"`
}

// maxLastSearch bounds what is read back of a last search.
const maxLastSearch = 16 << 10

func (m *searchMemory) learning() bool {
	cat := m.s.follower.Current()
	return cat != nil && cat.Document.Search.LearnFromRequests
}

// Remember implements toolcatalog.SearchMemory.
func (m *searchMemory) Remember(ctx context.Context, query string, found []string) {
	if !m.learning() {
		return
	}
	raw, _ := json.Marshal(lastSearch{Query: query, Found: found})
	if len(raw) > maxLastSearch {
		return
	}
	if err := m.s.redis.Set(ctx, m.key(ctx), raw, m.ttl).Err(); err != nil {
		m.s.g.opts.Log.Error(err, "Keeping the last search", "catalog", m.s.id)
	}
}

// Recall implements toolcatalog.SearchMemory.
func (m *searchMemory) Recall(ctx context.Context) (string, []string) {
	if !m.learning() {
		return "", nil
	}
	raw, err := m.s.redis.Get(ctx, m.key(ctx)).Bytes()
	if err != nil {
		if !errors.Is(err, redis.Nil) {
			m.s.g.opts.Log.Error(err, "Reading the last search", "catalog", m.s.id)
		}
		return "", nil
	}
	var last lastSearch
	if len(raw) > maxLastSearch || json.Unmarshal(raw, &last) != nil {
		return "", nil
	}
	return last.Query, last.Found
}
