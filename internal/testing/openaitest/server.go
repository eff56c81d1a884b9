// Package openaitest is an in-process server speaking the OpenAI HTTP API
// (/v1/embeddings and /v1/chat/completions) for tests: every request is
// checked and decoded, answers use the API's own shapes (errors included),
// and requests are recorded so tests can prove how many calls were made.
package openaitest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"io"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unicode"
)

// EmbeddingsRequest is the body of POST /v1/embeddings.
type EmbeddingsRequest struct {
	Input          []string `json:"input"`
	Model          string   `json:"model"`
	Dimensions     *int     `json:"dimensions,omitempty"`
	EncodingFormat string   `json:"encoding_format"`
}

// Message is one chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ChatRequest is the part of POST /v1/chat/completions tests check.
type ChatRequest struct {
	Model    string    `json:"model"`
	Messages []Message `json:"messages"`
}

// Server is the fake API. Set the handlers before the first request.
type Server struct {
	t   testing.TB
	srv *httptest.Server

	// APIKeys are the accepted bearer tokens; empty accepts any.
	APIKeys []string
	// OnEmbeddings answers the n-th (0-based) embeddings request.
	OnEmbeddings func(w http.ResponseWriter, r *http.Request, n int, req EmbeddingsRequest)
	// OnChat answers the n-th (0-based) chat request.
	OnChat func(w http.ResponseWriter, r *http.Request, n int, req ChatRequest)
	// Hold, when set, runs while a request is counted in flight.
	Hold func()

	mu         sync.Mutex
	embeddings []EmbeddingsRequest
	chats      []ChatRequest
	refused    map[string]int
	inFlight   int
	peak       int
}

// New starts a server that is closed when the test ends.
func New(t testing.TB) *Server {
	s := &Server{t: t}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// BaseURL is what a user configures: the API root with /v1.
func (s *Server) BaseURL() string { return s.srv.URL + "/v1" }

// Close stops the server, so later requests fail to connect.
func (s *Server) Close() { s.srv.Close() }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.inFlight++
	s.peak = max(s.peak, s.inFlight)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	if r.Method != http.MethodPost {
		s.t.Errorf("openaitest: method %s, want POST", r.Method)
	}
	if len(s.APIKeys) > 0 {
		auth := r.Header.Get("Authorization")
		ok := false
		for _, k := range s.APIKeys {
			ok = ok || auth == "Bearer "+k
		}
		if !ok {
			s.mu.Lock()
			if s.refused == nil {
				s.refused = map[string]int{}
			}
			s.refused[r.URL.Path]++
			s.mu.Unlock()
			WriteError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Incorrect API key provided.")
			return
		}
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		s.t.Errorf("openaitest: Content-Type %q, want application/json", ct)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		// Only a client that went away mid-request (a killed process)
		// sends a body that cannot be read.
		return
	}
	if s.Hold != nil {
		s.Hold()
	}
	switch r.URL.Path {
	case "/v1/embeddings":
		var req EmbeddingsRequest
		if err := json.Unmarshal(body, &req); err != nil {
			s.t.Errorf("openaitest: embeddings body %s: %v", body, err)
		}
		s.mu.Lock()
		n := len(s.embeddings)
		s.embeddings = append(s.embeddings, req)
		s.mu.Unlock()
		if s.OnEmbeddings == nil {
			WriteEmbeddings(w, req, 16, nil)
			return
		}
		s.OnEmbeddings(w, r, n, req)
	case "/v1/chat/completions":
		var req ChatRequest
		if err := json.Unmarshal(body, &req); err != nil {
			s.t.Errorf("openaitest: chat body %s: %v", body, err)
		}
		s.mu.Lock()
		n := len(s.chats)
		s.chats = append(s.chats, req)
		s.mu.Unlock()
		if s.OnChat == nil {
			s.t.Errorf("openaitest: unexpected chat request")
			WriteError(w, http.StatusNotFound, "invalid_request_error", "unknown_url", "Unknown request URL")
			return
		}
		s.OnChat(w, r, n, req)
	default:
		s.t.Errorf("openaitest: unexpected path %s", r.URL.Path)
		WriteError(w, http.StatusNotFound, "invalid_request_error", "unknown_url", "Unknown request URL")
	}
}

// EmbeddingRequests returns the embeddings requests received so far.
func (s *Server) EmbeddingRequests() []EmbeddingsRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]EmbeddingsRequest(nil), s.embeddings...)
}

// Refused counts the requests refused for their API key, by path.
func (s *Server) Refused() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.refused)
}

// ChatRequests returns the chat requests received so far.
func (s *Server) ChatRequests() []ChatRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ChatRequest(nil), s.chats...)
}

// PeakInFlight is the most requests seen in flight at once.
func (s *Server) PeakInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// WordsVector is the normalised sum of the Vectors of text's words (the
// Vector of text when it has none): texts of many words in common lie
// close, as a real model would place them.
func WordsVector(text string, dims int) []float64 {
	sum := make([]float64, dims)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		for i, x := range Vector(w, dims) {
			sum[i] += x
		}
	}
	var norm float64
	for _, x := range sum {
		norm += x * x
	}
	if norm == 0 {
		return Vector(text, dims)
	}
	for i := range sum {
		sum[i] /= math.Sqrt(norm)
	}
	return sum
}

// Vector is the deterministic, normalised vector the server returns for a
// text by default.
func Vector(text string, dims int) []float64 {
	out := make([]float64, dims)
	var norm float64
	for i := range out {
		h := sha256.Sum256([]byte(text + "\x00" + string(rune('a'+i%26)) + string(rune(i))))
		x := float64(int32(binary.LittleEndian.Uint32(h[:4]))) / math.MaxInt32
		out[i] = x
		norm += x * x
	}
	norm = math.Sqrt(norm)
	for i := range out {
		out[i] /= norm
	}
	return out
}

// EmbeddingItem is one element of an embeddings response.
type EmbeddingItem struct {
	Object    string    `json:"object"`
	Index     int       `json:"index"`
	Embedding []float64 `json:"embedding"`
}

// WriteEmbeddings answers like the API with Vector of each input; order,
// when set, permutes the items (the API does not promise index order).
func WriteEmbeddings(w http.ResponseWriter, req EmbeddingsRequest, dims int, order func([]EmbeddingItem)) {
	WriteEmbeddingsWith(w, req, func(text string) []float64 { return Vector(text, dims) }, order)
}

// WriteEmbeddingsWith answers with the vectors vec computes.
func WriteEmbeddingsWith(w http.ResponseWriter, req EmbeddingsRequest, vec func(string) []float64, order func([]EmbeddingItem)) {
	items := make([]EmbeddingItem, len(req.Input))
	for i, text := range req.Input {
		items[i] = EmbeddingItem{Object: "embedding", Index: i, Embedding: vec(text)}
	}
	if order != nil {
		order(items)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"object": "list",
		"data":   items,
		"model":  req.Model,
		"usage":  map[string]int{"prompt_tokens": 8 * len(req.Input), "total_tokens": 8 * len(req.Input)},
	})
}

// WriteChat answers a chat completion with content.
func WriteChat(w http.ResponseWriter, model, content string) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id":      "chatcmpl-test",
		"object":  "chat.completion",
		"created": 1763800000,
		"model":   model,
		"choices": []map[string]any{{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": content, "refusal": nil},
			"logprobs":      nil,
			"finish_reason": "stop",
		}},
		"usage": map[string]int{"prompt_tokens": 50, "completion_tokens": 40, "total_tokens": 90},
	})
}

// QueriesJSON is a model answer holding the queries.
func QueriesJSON(qs ...string) string {
	b, _ := json.Marshal(map[string][]string{"queries": qs})
	return string(b)
}

// WriteError answers with the API's error envelope.
func WriteError(w http.ResponseWriter, status int, typ, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": message, "type": typ, "param": nil, "code": code}})
}
