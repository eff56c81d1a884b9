package embedding

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolcatalog/tool-catalog-operator/internal/testing/openaitest"
)

var weatherSpec = ToolSpec{
	Name:        "get_current_weather",
	Description: "Get the current weather and the forecast for a city.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
}

func newTestGenerator(t *testing.T, f *openaitest.Server, models []string, fallback *OpenAIFallback) *OpenAIQueryGenerator {
	t.Helper()
	g, err := NewOpenAIQueryGenerator(OpenAIQueryGeneratorConfig{OpenAIConfig: configFor(f), Models: models, Fallback: fallback})
	mustf(t, err, "NewOpenAIQueryGenerator")
	return g
}

func chatModels(reqs []openaitest.ChatRequest) []string {
	var out []string
	for _, r := range reqs {
		out = append(out, r.Model)
	}
	return out
}

func TestOpenAIQueryGeneratorHappyPath(t *testing.T) {
	f := newFakeOpenAI(t)
	f.OnChat = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.ChatRequest) {
		openaitest.WriteChat(w, req.Model, openaitest.QueriesJSON(" will it rain in Oslo tomorrow ", "weather in Lisbon right now", "do I need an umbrella in London today"))
	}
	g := newTestGenerator(t, f, []string{"gpt-4o-mini"}, nil)
	got, err := g.GenerateQueries(context.Background(), QueryRequest{Tool: weatherSpec, Count: 3, Existing: []string{"is it sunny in Rome"}})
	mustf(t, err, "GenerateQueries")
	want := []string{"will it rain in Oslo tomorrow", "weather in Lisbon right now", "do I need an umbrella in London today"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q (trimmed, in order)", got, want)
	}

	reqs := f.ChatRequests()
	if len(reqs) != 1 || reqs[0].Model != "gpt-4o-mini" || len(reqs[0].Messages) != 2 {
		t.Fatalf("requests %+v", reqs)
	}
	sys, user := reqs[0].Messages[0], reqs[0].Messages[1]
	if sys.Role != "system" || !strings.Contains(sys.Content, `{"queries"`) {
		t.Errorf("system message %+v does not ask for the JSON answer", sys)
	}
	for _, s := range []string{"Write 3 distinct user requests", "get_current_weather", weatherSpec.Description, `"city"`, "is it sunny in Rome"} {
		if user.Role != "user" || !strings.Contains(user.Content, s) {
			t.Errorf("user message does not contain %q:\n%s", s, user.Content)
		}
	}
}

func TestParseQueries(t *testing.T) {
	tests := []struct {
		name     string
		content  string
		want     int
		existing []string
		ok       []string
		errPart  string
	}{
		{"object", `{"queries":["a b","c d"]}`, 2, nil, []string{"a b", "c d"}, ""},
		{"bare array", `["a b","c d"]`, 2, nil, []string{"a b", "c d"}, ""},
		{"code fence", "```json\n{\"queries\": [\"a b\", \"c d\"]}\n```", 2, nil, []string{"a b", "c d"}, ""},
		{"too few", `{"queries":["a"]}`, 2, nil, nil, "has 1 queries, want 2"},
		{"too many", `{"queries":["a","b","c"]}`, 2, nil, nil, "has 3 queries, want 2"},
		{"empty entry", `{"queries":["a","  "]}`, 2, nil, nil, "query 2 is empty"},
		{"duplicate", `{"queries":["Rain in Oslo","rain  in oslo"]}`, 2, nil, nil, "duplicate"},
		{"duplicate of existing", `{"queries":["a","Rain in Oslo"]}`, 2, []string{"rain in oslo"}, nil, "duplicate"},
		{"not a string", `{"queries":["a",3]}`, 2, nil, nil, "not a string"},
		{"prose", `Sure! Here are some queries: 1. a 2. b`, 2, nil, nil, "not JSON"},
		{"wrong key", `{"items":["a","b"]}`, 2, nil, nil, `no "queries"`},
		{"truncated", `{"queries":["a","b"`, 2, nil, nil, "not JSON"},
		{"unterminated fence", "```json\n[\"a\",\"b\"]", 2, nil, nil, "unterminated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseQueries(tt.content, tt.want, tt.existing)
			if tt.errPart == "" {
				mustf(t, err, "parseQueries")
				if !slices.Equal(got, tt.ok) {
					t.Fatalf("got %q, want %q", got, tt.ok)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.errPart) || got != nil {
				t.Fatalf("got %q, %v; want no queries and an error containing %q", got, err, tt.errPart)
			}
		})
	}
}

func TestOpenAIQueryGeneratorRetriesMalformedAnswer(t *testing.T) {
	f := newFakeOpenAI(t)
	f.OnChat = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.ChatRequest) {
		if n == 0 {
			openaitest.WriteChat(w, req.Model, openaitest.QueriesJSON("only one")) // wrong count
			return
		}
		openaitest.WriteChat(w, req.Model, openaitest.QueriesJSON("first query", "second query"))
	}
	g := newTestGenerator(t, f, []string{"m1"}, nil)
	got, err := g.GenerateQueries(context.Background(), QueryRequest{Tool: weatherSpec, Count: 2})
	mustf(t, err, "GenerateQueries")
	if len(got) != 2 || len(f.ChatRequests()) != 2 {
		t.Fatalf("got %q after %d requests; want 2 queries after 2 requests", got, len(f.ChatRequests()))
	}
}

func TestOpenAIQueryGeneratorRotatesModels(t *testing.T) {
	f := newFakeOpenAI(t)
	f.OnChat = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.ChatRequest) {
		if req.Model == "model-a" {
			openaitest.WriteError(w, http.StatusInternalServerError, "server_error", "", "model-a is down")
			return
		}
		openaitest.WriteChat(w, req.Model, openaitest.QueriesJSON("q one", "q two"))
	}
	g, err := NewOpenAIQueryGenerator(OpenAIQueryGeneratorConfig{OpenAIConfig: withRetries(configFor(f), 2), Models: []string{"model-a", "model-b"}})
	mustf(t, err, "NewOpenAIQueryGenerator")
	got, err := g.GenerateQueries(context.Background(), QueryRequest{Tool: weatherSpec, Count: 2})
	mustf(t, err, "GenerateQueries")
	if len(got) != 2 {
		t.Fatalf("got %q", got)
	}
	if models := chatModels(f.ChatRequests()); !slices.Equal(models, []string{"model-a", "model-a", "model-a", "model-b"}) {
		t.Fatalf("models tried %v, want model-a three times (1 + 2 retries) then model-b", models)
	}
}

// fallbackTo is a fallback route to a fake server, with its own key and no
// retries.
func fallbackTo(f *openaitest.Server, model string) *OpenAIFallback {
	return &OpenAIFallback{OpenAIConfig: OpenAIConfig{BaseURL: f.BaseURL(), APIKey: "fallback-key", Retry: fastRetry(0)}, Model: model}
}

func withRetries(c OpenAIConfig, n int) OpenAIConfig {
	c.Retry = fastRetry(n)
	return c
}

func TestOpenAIQueryGeneratorFallsBackToSecondEndpoint(t *testing.T) {
	primary := newFakeOpenAI(t)
	primary.OnChat = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.ChatRequest) {
		openaitest.WriteError(w, http.StatusBadGateway, "server_error", "", "bad gateway")
	}
	fb := newFakeOpenAI(t)
	fb.OnChat = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.ChatRequest) {
		if got := r.Header.Get("Authorization"); got != "Bearer fallback-key" {
			t.Errorf("fallback got Authorization %q, want its own key", got)
		}
		openaitest.WriteChat(w, req.Model, openaitest.QueriesJSON("from fallback one", "from fallback two"))
	}
	fallback := fallbackTo(fb, "llama3.1")
	g, err := NewOpenAIQueryGenerator(OpenAIQueryGeneratorConfig{OpenAIConfig: withRetries(configFor(primary), 1), Models: []string{"a", "b"}, Fallback: fallback})
	mustf(t, err, "NewOpenAIQueryGenerator")
	got, err := g.GenerateQueries(context.Background(), QueryRequest{Tool: weatherSpec, Count: 2})
	mustf(t, err, "GenerateQueries")
	if !slices.Equal(got, []string{"from fallback one", "from fallback two"}) {
		t.Fatalf("got %q", got)
	}
	if m := chatModels(primary.ChatRequests()); !slices.Equal(m, []string{"a", "a", "b", "b"}) {
		t.Errorf("primary saw %v, want a,a,b,b", m)
	}
	if m := chatModels(fb.ChatRequests()); !slices.Equal(m, []string{"llama3.1"}) {
		t.Errorf("fallback saw %v, want llama3.1 once", m)
	}
}

func TestOpenAIQueryGeneratorAuthFailureSkipsToFallback(t *testing.T) {
	primary := newFakeOpenAI(t)
	primary.OnChat = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.ChatRequest) {
		openaitest.WriteError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Incorrect API key provided")
	}
	fb := newFakeOpenAI(t)
	fb.OnChat = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.ChatRequest) {
		openaitest.WriteChat(w, req.Model, openaitest.QueriesJSON("x one", "x two"))
	}
	fallback := fallbackTo(fb, "fb")
	g := newTestGenerator(t, primary, []string{"a", "b", "c"}, fallback)
	_, err := g.GenerateQueries(context.Background(), QueryRequest{Tool: weatherSpec, Count: 2})
	mustf(t, err, "GenerateQueries")
	if m := chatModels(primary.ChatRequests()); !slices.Equal(m, []string{"a"}) {
		t.Fatalf("primary saw %v; a rejected key must not be retried on other models of the same endpoint", m)
	}
}

func TestOpenAIQueryGeneratorEverythingFails(t *testing.T) {
	primary := newFakeOpenAI(t)
	primary.OnChat = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.ChatRequest) {
		if req.Model == "a" {
			openaitest.WriteError(w, http.StatusInternalServerError, "server_error", "", "a exploded")
			return
		}
		openaitest.WriteChat(w, req.Model, "I cannot help with that.")
	}
	fb := newFakeOpenAI(t)
	fb.OnChat = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.ChatRequest) {
		openaitest.WriteError(w, http.StatusNotFound, "invalid_request_error", "model_not_found", "The model `fb` does not exist")
	}
	fallback := fallbackTo(fb, "fb")
	g, err := NewOpenAIQueryGenerator(OpenAIQueryGeneratorConfig{OpenAIConfig: withRetries(configFor(primary), 1), Models: []string{"a", "b"}, Fallback: fallback})
	mustf(t, err, "NewOpenAIQueryGenerator")
	got, err := g.GenerateQueries(context.Background(), QueryRequest{Tool: weatherSpec, Count: 2})
	if err == nil || got != nil {
		t.Fatalf("got %q, %v; want an error and no queries", got, err)
	}
	for _, s := range []string{"get_current_weather", "model a:", "a exploded", "model b:", "MalformedResponse", "model fb:", "does not exist"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error does not mention %q: %v", s, err)
		}
	}
	if strings.Contains(err.Error(), testAPIKey) {
		t.Errorf("error leaks the key")
	}
	t.Logf("every route failing: %d primary requests, %d fallback requests; error: %v", len(primary.ChatRequests()), len(fb.ChatRequests()), err)
}

func TestGenerateAllBoundsConcurrency(t *testing.T) {
	const limit, tools = 3, 12
	f := newFakeOpenAI(t)
	// Hold each request until the limit is reached (or a short while
	// passes), so a missing bound would show as more requests in flight.
	var mu sync.Mutex
	arrived := 0
	full := make(chan struct{})
	f.Hold = func() {
		mu.Lock()
		arrived++
		if arrived == limit {
			close(full)
		}
		mu.Unlock()
		select {
		case <-full:
		case <-time.After(300 * time.Millisecond):
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.OnChat = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.ChatRequest) {
		openaitest.WriteChat(w, req.Model, openaitest.QueriesJSON(fmt.Sprintf("query %d one", n), fmt.Sprintf("query %d two", n)))
	}
	g := newTestGenerator(t, f, []string{"m"}, nil)
	reqs := make([]QueryRequest, tools)
	for i := range reqs {
		reqs[i] = QueryRequest{Tool: ToolSpec{Name: fmt.Sprintf("tool_%d", i), Description: "does things"}, Count: 2}
	}
	results := GenerateAll(context.Background(), g, reqs, limit)
	for i, r := range results {
		if r.Err != nil || len(r.Queries) != 2 {
			t.Fatalf("result %d: %v %q", i, r.Err, r.Queries)
		}
	}
	if peak := f.PeakInFlight(); peak != limit {
		t.Fatalf("server saw at most %d requests in flight, want exactly the limit %d", peak, limit)
	}
	t.Logf("%d tools, concurrency %d: %d requests, peak %d in flight", tools, limit, len(f.ChatRequests()), f.PeakInFlight())
}

func TestGenerateAllKeepsOrderAndIsolatesFailures(t *testing.T) {
	gen := TemplateQueryGenerator{}
	reqs := []QueryRequest{
		{Tool: weatherSpec, Count: 2},
		{Tool: ToolSpec{Name: "x"}, Count: 50}, // too little text to vary
		{Tool: ToolSpec{Name: "send_email", Description: "Send an email to a recipient."}, Count: 2},
	}
	res := GenerateAll(context.Background(), gen, reqs, 0)
	if res[0].Err != nil || res[2].Err != nil || res[1].Err == nil {
		t.Fatalf("errors %v, %v, %v; want only the second to fail", res[0].Err, res[1].Err, res[2].Err)
	}
	if !strings.Contains(res[2].Queries[0], "email") || !strings.Contains(res[0].Queries[0], "weather") {
		t.Fatalf("results out of request order: %q / %q", res[0].Queries, res[2].Queries)
	}
}
