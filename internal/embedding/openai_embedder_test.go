package embedding

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/toolcatalog/tool-catalog-operator/internal/testing/openaitest"
)

func newTestEmbedder(t *testing.T, f *openaitest.Server, mutate func(*OpenAIEmbedderConfig)) *OpenAIEmbedder {
	t.Helper()
	cfg := OpenAIEmbedderConfig{OpenAIConfig: configFor(f), Model: "text-embedding-3-small"}
	if mutate != nil {
		mutate(&cfg)
	}
	e, err := NewOpenAIEmbedder(cfg)
	mustf(t, err, "NewOpenAIEmbedder")
	return e
}

func checkVectors(t *testing.T, texts []string, got [][]float32, dims int) {
	t.Helper()
	if len(got) != len(texts) {
		t.Fatalf("got %d vectors for %d texts", len(got), len(texts))
	}
	for i, text := range texts {
		want := openaitest.Vector(text, dims)
		if len(got[i]) != dims {
			t.Fatalf("vector %d has %d dimensions, want %d", i, len(got[i]), dims)
		}
		for j := range want {
			if got[i][j] != float32(want[j]) {
				t.Fatalf("vector %d (%q) differs at %d: got %v, want %v", i, text, j, got[i][j], want[j])
			}
		}
	}
}

func TestOpenAIEmbedderHappyPath(t *testing.T) {
	f := newFakeOpenAI(t)
	f.OnEmbeddings = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.EmbeddingsRequest) {
		openaitest.WriteEmbeddings(w, req, 16, nil)
	}
	e := newTestEmbedder(t, f, nil)
	texts := []string{"what's the weather in Paris", "open a bug report", "send an email to Ana"}
	got, err := e.Embed(context.Background(), texts)
	mustf(t, err, "Embed")
	checkVectors(t, texts, got, 16)

	reqs := f.EmbeddingRequests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	if reqs[0].Model != "text-embedding-3-small" || reqs[0].EncodingFormat != "float" || !slices.Equal(reqs[0].Input, texts) {
		t.Errorf("request body %+v", reqs[0])
	}
	if reqs[0].Dimensions != nil {
		t.Errorf("dimensions sent although not configured: %d", *reqs[0].Dimensions)
	}
	if e.Dimensions() != 16 || e.Model() != "text-embedding-3-small" {
		t.Errorf("Dimensions() = %d, Model() = %q", e.Dimensions(), e.Model())
	}
}

func TestOpenAIEmbedderSendsConfiguredDimensions(t *testing.T) {
	f := newFakeOpenAI(t)
	f.OnEmbeddings = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.EmbeddingsRequest) {
		openaitest.WriteEmbeddings(w, req, *req.Dimensions, nil)
	}
	e := newTestEmbedder(t, f, func(c *OpenAIEmbedderConfig) { c.Dimensions = 64 })
	got, err := e.Embed(context.Background(), []string{"a text"})
	mustf(t, err, "Embed")
	checkVectors(t, []string{"a text"}, got, 64)
	if d := f.EmbeddingRequests()[0].Dimensions; d == nil || *d != 64 {
		t.Fatalf("dimensions sent = %v, want 64", d)
	}
}

func TestOpenAIEmbedderBatchesAndKeepsInputOrder(t *testing.T) {
	for _, tt := range []struct{ n, batch, wantRequests int }{{10, 3, 4}, {64, 64, 1}, {65, 64, 2}, {7, 1, 7}} {
		t.Run(fmt.Sprintf("N=%d,B=%d", tt.n, tt.batch), func(t *testing.T) {
			f := newFakeOpenAI(t)
			f.OnEmbeddings = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.EmbeddingsRequest) {
				// Answer each batch's items out of index order.
				openaitest.WriteEmbeddings(w, req, 8, func(items []openaitest.EmbeddingItem) { slices.Reverse(items) })
			}
			e := newTestEmbedder(t, f, func(c *OpenAIEmbedderConfig) { c.BatchSize = tt.batch })
			texts := make([]string, tt.n)
			for i := range texts {
				texts[i] = fmt.Sprintf("query number %d about topic %c", i, 'a'+rune(i%26))
			}
			got, err := e.Embed(context.Background(), texts)
			mustf(t, err, "Embed")
			checkVectors(t, texts, got, 8)

			reqs := f.EmbeddingRequests()
			if len(reqs) != tt.wantRequests {
				t.Fatalf("%d requests, want ceil(%d/%d) = %d", len(reqs), tt.n, tt.batch, tt.wantRequests)
			}
			var sent []string
			var sizes []int
			for _, r := range reqs {
				if len(r.Input) > tt.batch {
					t.Errorf("a request carried %d texts, batch size is %d", len(r.Input), tt.batch)
				}
				sizes = append(sizes, len(r.Input))
				sent = append(sent, r.Input...)
			}
			if !slices.Equal(sent, texts) {
				t.Errorf("texts sent in another order or incompletely")
			}
			t.Logf("N=%d B=%d: %d requests, batch sizes %v", tt.n, tt.batch, len(reqs), sizes)
		})
	}
}

func TestOpenAIEmbedderHonoursRetryAfter(t *testing.T) {
	f := newFakeOpenAI(t)
	f.OnEmbeddings = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.EmbeddingsRequest) {
		if n == 0 {
			w.Header().Set("Retry-After", "1")
			openaitest.WriteError(w, http.StatusTooManyRequests, "requests", "rate_limit_exceeded", "Rate limit reached for requests")
			return
		}
		openaitest.WriteEmbeddings(w, req, 8, nil)
	}
	rec := &sleepRecorder{real: true}
	e := newTestEmbedder(t, f, func(c *OpenAIEmbedderConfig) {
		// A default backoff far from one second shows which delay was used.
		c.Retry = RetryPolicy{MaxRetries: 3, Backoff: wait.Backoff{Duration: 5 * time.Second, Factor: 2}, Sleep: rec.sleep}
	})
	start := time.Now()
	_, err := e.Embed(context.Background(), []string{"hello"})
	elapsed := time.Since(start)
	mustf(t, err, "Embed")
	if got := len(f.EmbeddingRequests()); got != 2 {
		t.Fatalf("%d requests, want 2", got)
	}
	if d := rec.recorded(); !slices.Equal(d, []time.Duration{time.Second}) {
		t.Fatalf("waited %v, want exactly the 1s the server asked for", d)
	}
	t.Logf("429 Retry-After: 1 then 200: 2 requests, waited %v, call took %v", rec.recorded(), elapsed.Round(time.Millisecond))
}

func TestOpenAIEmbedderRetriesServerErrors(t *testing.T) {
	f := newFakeOpenAI(t)
	f.OnEmbeddings = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.EmbeddingsRequest) {
		if n < 2 {
			openaitest.WriteError(w, http.StatusInternalServerError, "server_error", "", "The server had an error while processing your request.")
			return
		}
		openaitest.WriteEmbeddings(w, req, 8, nil)
	}
	rec := &sleepRecorder{}
	e := newTestEmbedder(t, f, func(c *OpenAIEmbedderConfig) {
		c.Retry = RetryPolicy{MaxRetries: 3, Backoff: wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.2}, Sleep: rec.sleep}
	})
	got, err := e.Embed(context.Background(), []string{"hello"})
	mustf(t, err, "Embed")
	checkVectors(t, []string{"hello"}, got, 8)
	if n := len(f.EmbeddingRequests()); n != 3 {
		t.Fatalf("%d requests, want 3 (500, 500, 200)", n)
	}
	d := rec.recorded()
	if len(d) != 2 || d[0] < 100*time.Millisecond || d[0] > 120*time.Millisecond || d[1] < 200*time.Millisecond || d[1] > 240*time.Millisecond {
		t.Fatalf("backoff delays %v, want about 100ms then 200ms with up to 20%% jitter", d)
	}
	t.Logf("500, 500, 200: 3 requests, backoff delays %v", d)
}

func TestOpenAIEmbedderRetriesTimeouts(t *testing.T) {
	f := newFakeOpenAI(t)
	f.OnEmbeddings = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.EmbeddingsRequest) {
		if n == 0 {
			// Hang until the client gives up.
			<-r.Context().Done()
			return
		}
		openaitest.WriteEmbeddings(w, req, 8, nil)
	}
	e := newTestEmbedder(t, f, func(c *OpenAIEmbedderConfig) { c.Timeout = 200 * time.Millisecond })
	start := time.Now()
	_, err := e.Embed(context.Background(), []string{"hello"})
	mustf(t, err, "Embed")
	if n := len(f.EmbeddingRequests()); n != 2 {
		t.Fatalf("%d requests, want 2 (timeout, then success)", n)
	}
	t.Logf("timeout then 200: 2 requests, call took %v with a 200ms request timeout", time.Since(start).Round(time.Millisecond))
}

func TestOpenAIEmbedderClassifiesClientErrorsWithoutRetry(t *testing.T) {
	tests := []struct {
		status   int
		code     string
		wantKind ErrorKind
	}{
		{http.StatusUnauthorized, "invalid_api_key", KindAuth},
		{http.StatusForbidden, "unsupported_country_region_territory", KindAuth},
		{http.StatusBadRequest, "invalid_value", KindBadRequest},
		{http.StatusNotFound, "model_not_found", KindBadRequest},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			f := newFakeOpenAI(t)
			f.OnEmbeddings = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.EmbeddingsRequest) {
				// Servers sometimes echo the key they rejected.
				openaitest.WriteError(w, tt.status, "invalid_request_error", tt.code, "Incorrect API key provided: "+testAPIKey+".")
			}
			e := newTestEmbedder(t, f, nil)
			_, err := e.Embed(context.Background(), []string{"hello"})
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("want *Error, got %T: %v", err, err)
			}
			if pe.Kind != tt.wantKind || pe.StatusCode != tt.status || pe.Attempts != 1 {
				t.Errorf("kind %s status %d attempts %d; want %s %d 1", pe.Kind, pe.StatusCode, pe.Attempts, tt.wantKind, tt.status)
			}
			if n := len(f.EmbeddingRequests()); n != 1 {
				t.Errorf("%d requests, want 1: %d must not be retried", n, tt.status)
			}
			if strings.Contains(err.Error(), testAPIKey) || strings.Contains(fmt.Sprintf("%+v %#v", err, err), testAPIKey) {
				t.Errorf("error leaks the API key: %v", err)
			}
			if !strings.Contains(err.Error(), "Incorrect API key provided") {
				t.Errorf("error drops the server's message: %v", err)
			}
		})
	}
}

func TestOpenAIEmbedderMalformedBodies(t *testing.T) {
	tests := []struct {
		name string
		body string
	}{
		{"not JSON", `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,`},
		{"no data", `{"object":"list","model":"m"}`},
		{"index out of range", `{"object":"list","data":[{"object":"embedding","index":5,"embedding":[0.1,0.2]}],"model":"m"}`},
		{"too few items", `{"object":"list","data":[],"model":"m"}`},
		{"empty vector", `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[]}],"model":"m"}`},
		{"no index", `{"object":"list","data":[{"object":"embedding","embedding":[0.1,0.2]}],"model":"m"}`},
		{"a number beyond float32", `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[1e39,0.2]}],"model":"m"}`},
		{"a string for a number", `{"object":"list","data":[{"object":"embedding","index":0,"embedding":["0.1",0.2]}],"model":"m"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeOpenAI(t)
			f.OnEmbeddings = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.EmbeddingsRequest) {
				if n == 0 {
					w.Header().Set("Content-Type", "application/json")
					_, _ = w.Write([]byte(tt.body))
					return
				}
				openaitest.WriteEmbeddings(w, req, 8, nil)
			}
			// A malformed answer is retried like a failure ...
			e := newTestEmbedder(t, f, nil)
			got, err := e.Embed(context.Background(), []string{"hello"})
			mustf(t, err, "Embed after one malformed answer")
			checkVectors(t, []string{"hello"}, got, 8)
			if n := len(f.EmbeddingRequests()); n != 2 {
				t.Fatalf("%d requests, want 2", n)
			}
		})
	}

	// ... and when it persists, the error is classified and no vector
	// comes back.
	f := newFakeOpenAI(t)
	f.OnEmbeddings = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.EmbeddingsRequest) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`not json at all`))
	}
	e := newTestEmbedder(t, f, func(c *OpenAIEmbedderConfig) { c.Retry = fastRetry(2) })
	got, err := e.Embed(context.Background(), []string{"hello"})
	if KindOf(err) != KindMalformed || got != nil {
		t.Fatalf("got %v, %v; want a MalformedResponse error and no vectors", got, err)
	}
	if n := len(f.EmbeddingRequests()); n != 3 {
		t.Fatalf("%d requests, want 3 (1 + 2 retries)", n)
	}
}

func TestOpenAIEmbedderRejectsWrongVectorLength(t *testing.T) {
	f := newFakeOpenAI(t)
	f.OnEmbeddings = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.EmbeddingsRequest) {
		openaitest.WriteEmbeddings(w, req, 4, nil)
	}
	e := newTestEmbedder(t, f, func(c *OpenAIEmbedderConfig) { c.Dimensions = 8 })
	got, err := e.Embed(context.Background(), []string{"hello", "world"})
	if KindOf(err) != KindDimensionMismatch || got != nil {
		t.Fatalf("got %v, %v; want a DimensionMismatch error and no vectors", got, err)
	}
	if !strings.Contains(err.Error(), "4 dimensions, expected 8") {
		t.Errorf("message does not say what is wrong: %v", err)
	}
	if n := len(f.EmbeddingRequests()); n != 1 {
		t.Errorf("%d requests, want 1: a configuration error is not retried", n)
	}
}

func TestOpenAIEmbedderFailsWholeCallWhenALaterBatchFails(t *testing.T) {
	f := newFakeOpenAI(t)
	f.OnEmbeddings = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.EmbeddingsRequest) {
		if n == 1 {
			openaitest.WriteError(w, http.StatusBadRequest, "invalid_request_error", "", "input too long")
			return
		}
		openaitest.WriteEmbeddings(w, req, 8, nil)
	}
	e := newTestEmbedder(t, f, func(c *OpenAIEmbedderConfig) { c.BatchSize = 2 })
	got, err := e.Embed(context.Background(), []string{"a", "b", "c", "d"})
	if err == nil || got != nil {
		t.Fatalf("got %v, %v; want an error and no partial result", got, err)
	}
	if !strings.Contains(err.Error(), "texts 3 to 4 of 4") {
		t.Errorf("error does not name the failed batch: %v", err)
	}
}

func TestOpenAIEmbedderRespectsContextDeadline(t *testing.T) {
	f := newFakeOpenAI(t)
	f.OnEmbeddings = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.EmbeddingsRequest) {
		openaitest.WriteError(w, http.StatusServiceUnavailable, "server_error", "", "overloaded")
	}
	e := newTestEmbedder(t, f, func(c *OpenAIEmbedderConfig) {
		// Real sleeps, with a backoff far beyond the deadline.
		c.Retry = RetryPolicy{MaxRetries: 10, Backoff: wait.Backoff{Duration: time.Hour, Factor: 1}}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err := e.Embed(ctx, []string{"hello"})
	if KindOf(err) != KindServer {
		t.Fatalf("want a ServerError, got %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("the call used up its deadline instead of giving up at once: %v", err)
	}
	if !strings.Contains(err.Error(), "past the deadline") {
		t.Errorf("error does not say why it stopped: %v", err)
	}
	t.Logf("503 with a 1h backoff and a 2s deadline: gave up after %v", time.Since(start).Round(time.Millisecond))
}

func TestOpenAIEmbedderRejectsEmptyText(t *testing.T) {
	f := newFakeOpenAI(t)
	e := newTestEmbedder(t, f, nil)
	_, err := e.Embed(context.Background(), []string{"ok", "  "})
	if KindOf(err) != KindInvalidInput {
		t.Fatalf("want InvalidInput, got %v", err)
	}
	if n := len(f.EmbeddingRequests()); n != 0 {
		t.Fatalf("%d requests sent for invalid input", n)
	}
}

func TestOpenAIConnectionRefusedIsUnavailable(t *testing.T) {
	f := newFakeOpenAI(t)
	url := f.BaseURL()
	f.Close()
	e, err := NewOpenAIEmbedder(OpenAIEmbedderConfig{OpenAIConfig: OpenAIConfig{BaseURL: url, Retry: fastRetry(1)}, Model: "m"})
	mustf(t, err, "NewOpenAIEmbedder")
	_, err = e.Embed(context.Background(), []string{"hello"})
	var pe *Error
	if !errors.As(err, &pe) || pe.Kind != KindUnavailable || pe.Attempts != 2 {
		t.Fatalf("want Unavailable after 2 attempts, got %v", err)
	}
}
