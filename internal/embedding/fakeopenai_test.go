package embedding

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

const testAPIKey = "sk-test-0123456789SECRETKEY"

// embeddingsRequest is the body of POST /v1/embeddings as the API defines it.
type embeddingsRequest struct {
	Input          []string `json:"input"`
	Model          string   `json:"model"`
	Dimensions     *int     `json:"dimensions,omitempty"`
	EncodingFormat string   `json:"encoding_format"`
}

// chatRequest is the part of POST /v1/chat/completions the tests check.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
}

// fakeOpenAI is an in-process OpenAI-compatible server. Each request is
// checked for method, path, auth and content type, decoded strictly, and
// answered by the test's script with the API's own response shapes.
type fakeOpenAI struct {
	t   *testing.T
	srv *httptest.Server

	mu         sync.Mutex
	embeddings []embeddingsRequest
	chats      []chatRequest
	inFlight   int
	peak       int

	// onEmbeddings answers the n-th (0-based) embeddings request.
	onEmbeddings func(w http.ResponseWriter, r *http.Request, n int, req embeddingsRequest)
	// onChat answers the n-th (0-based) chat request.
	onChat func(w http.ResponseWriter, r *http.Request, n int, req chatRequest)
	// hold, when set, runs while a request is counted in flight.
	hold func()
}

func newFakeOpenAI(t *testing.T) *fakeOpenAI {
	f := &fakeOpenAI{t: t}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// baseURL is what a user would configure: the API root with /v1.
func (f *fakeOpenAI) baseURL() string { return f.srv.URL + "/v1" }

func (f *fakeOpenAI) config() OpenAIConfig {
	return OpenAIConfig{BaseURL: f.baseURL(), APIKey: testAPIKey, Timeout: 5 * time.Second, Retry: fastRetry(3)}
}

func (f *fakeOpenAI) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.inFlight++
	f.peak = max(f.peak, f.inFlight)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	if f.hold != nil {
		f.hold()
	}

	if r.Method != http.MethodPost {
		f.t.Errorf("method %s, want POST", r.Method)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+testAPIKey && !strings.HasPrefix(got, "Bearer fallback-") {
		f.t.Errorf("Authorization header %q, want the configured bearer key", got)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		f.t.Errorf("Content-Type %q, want application/json", ct)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		f.t.Errorf("reading body: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	switch r.URL.Path {
	case "/v1/embeddings":
		var req embeddingsRequest
		if err := dec.Decode(&req); err != nil {
			f.t.Errorf("embeddings body %s: %v", body, err)
		}
		f.mu.Lock()
		n := len(f.embeddings)
		f.embeddings = append(f.embeddings, req)
		f.mu.Unlock()
		f.onEmbeddings(w, r, n, req)
	case "/v1/chat/completions":
		var req chatRequest
		if err := dec.Decode(&req); err != nil {
			f.t.Errorf("chat body %s: %v", body, err)
		}
		f.mu.Lock()
		n := len(f.chats)
		f.chats = append(f.chats, req)
		f.mu.Unlock()
		f.onChat(w, r, n, req)
	default:
		f.t.Errorf("unexpected path %s", r.URL.Path)
		writeAPIError(w, http.StatusNotFound, "invalid_request_error", "unknown_url", "Unknown request URL")
	}
}

func (f *fakeOpenAI) embeddingRequests() []embeddingsRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]embeddingsRequest(nil), f.embeddings...)
}

func (f *fakeOpenAI) chatRequests() []chatRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]chatRequest(nil), f.chats...)
}

func (f *fakeOpenAI) peakInFlight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.peak
}

// testVector is the vector the fake server returns for a text: the builtin
// lexical embedding cut to dims, so expected results are easy to compute.
func testVector(text string, dims int) []float64 {
	v := embedLexical(text)
	out := make([]float64, dims)
	for i := range out {
		out[i] = float64(v[i%len(v)])
	}
	return out
}

type embeddingItem struct {
	Object    string    `json:"object"`
	Index     int       `json:"index"`
	Embedding []float64 `json:"embedding"`
}

// writeEmbeddings answers like the API; order permutes the items (the API
// does not promise index order).
func writeEmbeddings(w http.ResponseWriter, req embeddingsRequest, dims int, order func([]embeddingItem)) {
	items := make([]embeddingItem, len(req.Input))
	for i, text := range req.Input {
		items[i] = embeddingItem{Object: "embedding", Index: i, Embedding: testVector(text, dims)}
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

func writeChat(w http.ResponseWriter, model, content string) {
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

func queriesJSON(qs ...string) string {
	b, _ := json.Marshal(map[string][]string{"queries": qs})
	return string(b)
}

// writeAPIError answers with the API's error envelope.
func writeAPIError(w http.ResponseWriter, status int, typ, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": message, "type": typ, "param": nil, "code": code}})
}

// sleepRecorder is an injectable Sleep that records the delays asked for
// and, when real is set, actually waits.
type sleepRecorder struct {
	mu     sync.Mutex
	delays []time.Duration
	real   bool
}

func (s *sleepRecorder) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.delays = append(s.delays, d)
	s.mu.Unlock()
	if s.real {
		return sleepContext(ctx, d)
	}
	return ctx.Err()
}

func (s *sleepRecorder) recorded() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.delays...)
}

// fastRetry is a policy whose delays are recorded, not waited for.
func fastRetry(maxRetries int) RetryPolicy {
	p := DefaultRetryPolicy()
	p.MaxRetries = maxRetries
	p.Sleep = (&sleepRecorder{}).sleep
	return p
}

func mustf(t *testing.T, err error, format string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(format, args...), err)
	}
}
