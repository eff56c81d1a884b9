package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolcatalog/tool-catalog-operator/internal/testing/openaitest"
)

func TestEmbedSendsTheCatalogsModelAndKeepsInputOrder(t *testing.T) {
	srv := openaitest.New(t)
	srv.APIKeys = []string{"sk-test"}
	srv.OnEmbeddings = func(w http.ResponseWriter, _ *http.Request, _ int, req openaitest.EmbeddingsRequest) {
		// Answer in reverse order: the client must put them back.
		openaitest.WriteEmbeddings(w, req, *req.Dimensions, func(items []openaitest.EmbeddingItem) { slices.Reverse(items) })
	}
	e, err := New(Config{BaseURL: srv.BaseURL(), APIKey: "sk-test", Model: "text-embedding-3-small", Dimensions: 8})
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"weather in Lisbon", "send an email"}
	vecs, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	reqs := srv.EmbeddingRequests()
	if len(reqs) != 1 || reqs[0].Model != "text-embedding-3-small" || *reqs[0].Dimensions != 8 || !slices.Equal(reqs[0].Input, texts) {
		t.Fatalf("requests: %+v", reqs)
	}
	for i, text := range texts {
		want := openaitest.Vector(text, 8)
		for j := range want {
			if float32(want[j]) != vecs[i][j] {
				t.Fatalf("vector %d is not the one for %q", i, text)
			}
		}
	}
}

func TestEmbedReportsWrongLengthAndRejectedKey(t *testing.T) {
	srv := openaitest.New(t)
	srv.APIKeys = []string{"sk-test"}
	srv.OnEmbeddings = func(w http.ResponseWriter, _ *http.Request, _ int, req openaitest.EmbeddingsRequest) {
		openaitest.WriteEmbeddings(w, req, 4, nil)
	}
	e, _ := New(Config{BaseURL: srv.BaseURL(), APIKey: "sk-test", Model: "m", Dimensions: 8, Timeout: 5 * time.Second})
	if _, err := e.Embed(context.Background(), []string{"q"}); err == nil || !strings.Contains(err.Error(), "has 4 dimensions, want 8") {
		t.Fatalf("wrong length: %v", err)
	}
	bad, _ := New(Config{BaseURL: srv.BaseURL(), APIKey: "sk-wrong", Model: "m"})
	if _, err := bad.Embed(context.Background(), []string{"q"}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("rejected key: %v", err)
	}
	if _, err := New(Config{}); err == nil {
		t.Fatal("a config without a model is accepted")
	}
}

// A server that is busy or failing is asked again, at most twice, as soon
// as its Retry-After says; a request it refuses is not repeated.
func TestEmbedRetriesOnlyWhatMaySucceedLater(t *testing.T) {
	srv := openaitest.New(t)
	srv.OnEmbeddings = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.EmbeddingsRequest) {
		switch {
		case req.Input[0] == "refused":
			openaitest.WriteError(w, http.StatusBadRequest, "invalid_request_error", "bad", "This model does not take dimensions.")
		case n%3 == 0:
			w.Header().Set("Retry-After", "0")
			openaitest.WriteError(w, http.StatusTooManyRequests, "rate_limit_error", "rate_limited", "Slow down.")
		case n%3 == 1:
			w.Header().Set("Retry-After", "0")
			openaitest.WriteError(w, http.StatusServiceUnavailable, "server_error", "busy", "Try again.")
		default:
			openaitest.WriteEmbeddings(w, req, 8, nil)
		}
	}
	e, err := New(Config{BaseURL: srv.BaseURL() + "/", Model: "m", Dimensions: 8})
	if err != nil {
		t.Fatal(err)
	}
	if _, embedErr := e.Embed(t.Context(), []string{"weather"}); embedErr != nil {
		t.Fatalf("a request answered 429, 503, then 200: %v", embedErr)
	}
	if n := len(srv.EmbeddingRequests()); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}
	_, err = e.Embed(t.Context(), []string{"refused"})
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusBadRequest || se.Message != "This model does not take dimensions." {
		t.Fatalf("a refused request: %v", err)
	}
	if n := len(srv.EmbeddingRequests()); n != 4 {
		t.Fatalf("a refused request was sent %d times", n-3)
	}
}

// A server that streams an answer without end is read only up to the
// bound for the request's size.
func TestEmbedBoundsTheAnswer(t *testing.T) {
	srv := openaitest.New(t)
	written := make(chan int, 1)
	srv.OnEmbeddings = func(w http.ResponseWriter, _ *http.Request, _ int, _ openaitest.EmbeddingsRequest) {
		w.Header().Set("Content-Type", "application/json")
		n, _ := io.WriteString(w, `{"data":[{"index":0,"embedding":[`)
		chunk := strings.Repeat("0.125,", 1<<10)
		for n < 64<<20 {
			m, err := io.WriteString(w, chunk)
			n += m
			if err != nil {
				break
			}
		}
		written <- n
	}
	e, err := New(Config{BaseURL: srv.BaseURL(), Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Embed(t.Context(), []string{"weather"})
	var de *DecodeError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("an endless answer: %v", err)
	}
	if n := <-written; n >= 64<<20 {
		t.Fatalf("the client read the whole %d bytes", n)
	}
}

// Answers are read to their end, so one connection serves request after
// request: a client that closed each would pay a connection per request.
func TestEmbedReusesItsConnection(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req openaitest.EmbeddingsRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Error(err)
		}
		// An answer of many vectors is sent in chunks; the encoder ends it
		// with a newline, as most servers do.
		openaitest.WriteEmbeddings(w, req, 512, nil)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	e, err := New(Config{BaseURL: srv.URL + "/v1", Model: "m", Dimensions: 512, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	texts := make([]string, 64)
	for i := range texts {
		texts[i] = fmt.Sprintf("text %d", i)
	}
	for range 5 {
		if _, err := e.Embed(t.Context(), texts); err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 5 requests in a row; want 1", n)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		header map[string]string
		want   time.Duration
		ok     bool
	}{
		{map[string]string{"Retry-After": "1"}, time.Second, true},
		{map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond, true},
		{map[string]string{"Retry-After-Ms": "250", "Retry-After": "1"}, 250 * time.Millisecond, true},
		{map[string]string{"Retry-After": now.Add(3 * time.Second).Format(http.TimeFormat)}, 3 * time.Second, true},
		{map[string]string{"Retry-After": "soon"}, 0, false},
		{map[string]string{"Retry-After": "-1"}, 0, false},
		{map[string]string{}, 0, false},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.header {
			h.Set(k, v)
		}
		got, ok := RetryAfter(h, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("RetryAfter(%v) = %v, %v; want %v, %v", tt.header, got, ok, tt.want, tt.ok)
		}
	}
}
