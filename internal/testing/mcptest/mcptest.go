// Package mcptest serves MCP servers built with the official MCP Go SDK
// over Streamable HTTP on loopback, for tests of the code that imports,
// follows and calls their tools.
package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Server is an MCP server on a loopback HTTP endpoint.
type Server struct {
	*mcp.Server
	// URL is the Streamable HTTP endpoint.
	URL string

	http *httptest.Server

	mu sync.Mutex
	// token, when set, is the bearer token every request must carry.
	token string
	// headers are the request headers seen, last request last, and hosts
	// the Host each request named.
	headers []http.Header
	hosts   []string
	// calls counts the tool calls answered.
	calls int
	// connections counts the TCP connections accepted.
	connections int
}

// Options shape a test server.
type Options struct {
	// Name and Version are the server's implementation info.
	Name, Version string
	// PageSize is tools/list's page size (the SDK's default when 0).
	PageSize int
	// Token, when set, is the bearer token the server requires.
	Token string
	// Host is the loopback address it listens on, 127.0.0.1 when "".
	Host string
	// Instructions are the server's instructions to clients.
	Instructions string
}

// New starts a server, stopped when the test ends.
func New(t testing.TB, o Options) *Server {
	t.Helper()
	if o.Name == "" {
		o.Name = "test-server"
	}
	if o.Version == "" {
		o.Version = "1.0.0"
	}
	s := &Server{Server: mcp.NewServer(&mcp.Implementation{Name: o.Name, Version: o.Version}, &mcp.ServerOptions{PageSize: o.PageSize, Instructions: o.Instructions}), token: o.Token}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.Server }, nil)
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.headers = append(s.headers, r.Header.Clone())
		s.hosts = append(s.hosts, r.Host)
		token := s.token
		s.mu.Unlock()
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	hs.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			s.mu.Lock()
			s.connections++
			s.mu.Unlock()
		}
	}
	if o.Host != "" {
		l, err := net.Listen("tcp", net.JoinHostPort(o.Host, "0"))
		if err != nil {
			t.Fatalf("listening on %s: %v", o.Host, err)
		}
		_ = hs.Listener.Close()
		hs.Listener = l
	}
	hs.Start()
	s.http = hs
	// Clients may hold a stream open (the standalone SSE stream that
	// carries notifications): close them, or Close waits for them.
	t.Cleanup(s.Close)
	s.URL = hs.URL + "/mcp"
	return s
}

// Close stops the server: its URL no longer answers.
func (s *Server) Close() {
	s.http.CloseClientConnections()
	s.http.Close()
}

// Tool adds (or replaces) a tool that echoes its arguments.
func (s *Server) Tool(name, description string, schema any, annotations *mcp.ToolAnnotations) {
	if schema == nil {
		schema = map[string]any{"type": "object"}
	}
	s.AddTool(&mcp.Tool{Name: name, Description: description, InputSchema: schema, Annotations: annotations},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			s.mu.Lock()
			s.calls++
			s.mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " " + string(req.Params.Arguments)}}}, nil
		})
}

// StructuredTool adds (or replaces) a tool that declares the output
// schema output and answers every call with result as its structured
// content (and as JSON text).
func (s *Server) StructuredTool(name, description string, output, result any) {
	text, err := json.Marshal(result)
	if err != nil {
		panic(err)
	}
	s.AddTool(&mcp.Tool{Name: name, Description: description, InputSchema: map[string]any{"type": "object"}, OutputSchema: output},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			s.mu.Lock()
			s.calls++
			s.mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}, StructuredContent: result}, nil
		})
}

// Calls returns how many tool calls the server answered.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// Connections returns how many TCP connections the server accepted.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connections
}

// Headers returns the request headers the server saw.
func (s *Server) Headers() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.headers...)
}

// Hosts returns the Host of every request, last request last.
func (s *Server) Hosts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.hosts...)
}

// Trap is an HTTP server that must never be reached: a stand-in for a
// metadata service or an internal host. It counts requests and the
// Authorization headers it saw.
type Trap struct {
	// URL is its base URL.
	URL string

	mu       sync.Mutex
	requests int
	auth     []string
}

// NewTrap listens on host (a loopback address such as 127.0.0.2) until
// the test ends; handler, when set, answers the requests it counts.
func NewTrap(t testing.TB, host string, handler http.HandlerFunc) *Trap {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("listening on %s: %v", host, err)
	}
	tr := &Trap{URL: "http://" + l.Addr().String()}
	hs := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tr.mu.Lock()
		tr.requests++
		if a := r.Header.Get("Authorization"); a != "" {
			tr.auth = append(tr.auth, a)
		}
		tr.mu.Unlock()
		if handler != nil {
			handler(w, r)
			return
		}
		http.Error(w, "trap", http.StatusTeapot)
	})}}
	hs.Start()
	t.Cleanup(hs.Close)
	return tr
}

// Requests returns how many requests reached the trap.
func (tr *Trap) Requests() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.requests
}

// Authorizations returns the Authorization headers the trap received.
func (tr *Trap) Authorizations() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.auth...)
}

// Redirect returns a handler answering every request with a redirect to
// target.
func Redirect(target string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target, http.StatusTemporaryRedirect)
	}
}

// Endless serves an MCP server (plain JSON-RPC over Streamable HTTP)
// whose tools/list never ends: every page holds ten new tools and points
// to the next. It counts the pages served.
type Endless struct {
	URL   string
	mu    sync.Mutex
	pages int
}

// NewEndless starts an Endless server, stopped when the test ends.
func NewEndless(t testing.TB) *Endless {
	t.Helper()
	e := &Endless{}
	e.URL = serveJSONRPC(t, "endless", func(method string) (json.RawMessage, bool) {
		if method != "tools/list" {
			return nil, false
		}
		e.mu.Lock()
		e.pages++
		page := e.pages
		e.mu.Unlock()
		tools := make([]any, 10)
		for i := range tools {
			tools[i] = map[string]any{"name": fmt.Sprintf("tool_%d_%d", page, i), "description": "One more tool.", "inputSchema": map[string]any{"type": "object"}}
		}
		raw, _ := json.Marshal(map[string]any{"tools": tools, "nextCursor": fmt.Sprintf("page-%d", page+1)})
		return raw, true
	})
	return e
}

// Pages returns how many tools/list pages were served.
func (e *Endless) Pages() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pages
}

// Canned is an MCP server (Streamable HTTP, answers as JSON) that answers
// each method with a result fixed in advance, sent as it is: a server
// whose answers cost nothing to make, for measuring what reading them
// costs a client.
type Canned struct {
	URL string
}

// NewCanned starts a Canned server answering the methods of results
// (tools/list, tools/call, ...) with them; initialize is answered, and
// other requests get "method not found". It stops when the test ends.
func NewCanned(t testing.TB, results map[string]json.RawMessage) *Canned {
	t.Helper()
	return &Canned{URL: serveJSONRPC(t, "canned", func(method string) (json.RawMessage, bool) {
		result, ok := results[method]
		return result, ok
	})}
}

// serveJSONRPC serves an MCP server named name over Streamable HTTP,
// answering each request as JSON: initialize itself, every other method
// with the result answer gives (sent as it is), "method not found" when
// it gives none. It returns the endpoint's URL and stops when the test
// ends.
func serveJSONRPC(t testing.TB, name string, answer func(method string) (json.RawMessage, bool)) string {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "no stream", http.StatusMethodNotAllowed)
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if len(req.ID) == 0 { // a notification
			w.WriteHeader(http.StatusAccepted)
			return
		}
		result, ok := answer(req.Method)
		if req.Method == "initialize" {
			result, _ = json.Marshal(map[string]any{"protocolVersion": req.Params.ProtocolVersion, "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": name, "version": "1"}})
			ok = true
		}
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32601, "message": "method not found"}})
			return
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":`, req.ID)
		_, _ = w.Write(result)
		_, _ = io.WriteString(w, "}")
	}))
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp"
}
