// Package mcptest serves MCP servers built with the official MCP Go SDK
// over Streamable HTTP on loopback, for tests of the code that imports,
// follows and calls their tools.
package mcptest

import (
	"context"
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
	// headers are the request headers seen, last request last.
	headers []http.Header
	// calls counts the tool calls answered.
	calls int
}

// Options shape a test server.
type Options struct {
	// Name and Version are the server's implementation info.
	Name, Version string
	// PageSize is tools/list's page size (the SDK's default when 0).
	PageSize int
	// Token, when set, is the bearer token the server requires.
	Token string
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
	s := &Server{Server: mcp.NewServer(&mcp.Implementation{Name: o.Name, Version: o.Version}, &mcp.ServerOptions{PageSize: o.PageSize}), token: o.Token}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.Server }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.headers = append(s.headers, r.Header.Clone())
		token := s.token
		s.mu.Unlock()
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	}))
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

// Calls returns how many tool calls the server answered.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// Headers returns the request headers the server saw.
func (s *Server) Headers() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.headers...)
}
