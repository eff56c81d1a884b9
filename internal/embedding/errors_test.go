package embedding

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/internal/egress"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/mcptest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/openaitest"
)

func TestSecretNeverPrints(t *testing.T) {
	cfg := OpenAIEmbedderConfig{OpenAIConfig: OpenAIConfig{BaseURL: "https://api.example.com/v1", APIKey: testAPIKey}, Model: "m"}
	var logs strings.Builder
	slog.New(slog.NewTextHandler(&logs, nil)).Info("config", "cfg", cfg, "key", cfg.APIKey)
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "key", cfg.APIKey)
	js, err := json.Marshal(cfg)
	mustf(t, err, "json.Marshal")
	outputs := map[string]string{
		"%v":   fmt.Sprintf("%v", cfg),
		"%+v":  fmt.Sprintf("%+v", cfg),
		"%#v":  fmt.Sprintf("%#v", cfg),
		"%s":   fmt.Sprintf("%s", cfg.APIKey),
		"%q":   fmt.Sprintf("%q", cfg.APIKey),
		"%x":   fmt.Sprintf("%x", cfg.APIKey),
		"err":  fmt.Errorf("bad config %v", cfg).Error(),
		"json": string(js),
		"slog": logs.String(),
	}
	for name, out := range outputs {
		if strings.Contains(out, testAPIKey) || strings.Contains(out, fmt.Sprintf("%x", testAPIKey)) {
			t.Errorf("%s leaks the key: %s", name, out)
		}
		if !strings.Contains(out, "REDACTED") {
			t.Errorf("%s does not show the key as redacted: %s", name, out)
		}
	}
	if cfg.APIKey.Reveal() != testAPIKey {
		t.Error("Reveal does not return the key")
	}
	if Secret("").String() != "" {
		t.Error("an empty key should print as empty, to show it is unset")
	}
}

func TestErrorKindRetryable(t *testing.T) {
	retryable := map[ErrorKind]bool{
		KindRateLimited: true, KindServer: true, KindTimeout: true, KindUnavailable: true, KindMalformed: true,
		KindAuth: false, KindBadRequest: false, KindDimensionMismatch: false, KindInvalidInput: false, KindDenied: false,
	}
	for k, want := range retryable {
		if k.Retryable() != want {
			t.Errorf("%s.Retryable() = %v, want %v", k, !want, want)
		}
	}
}

// An endpoint is whatever a namespace user wrote: what it answers to a
// failed call reaches status, events and logs only as a bounded line.
func TestFailedAnswersAreSummarized(t *testing.T) {
	f := newFakeOpenAI(t)
	long := "line one\nline two\r\n\x1b[31mred\x1b[0m\u202eevil\u200b " + strings.Repeat("AccessKeyId=ASIA0123 ", 500) + testAPIKey
	f.OnEmbeddings = func(w http.ResponseWriter, _ *http.Request, _ int, _ openaitest.EmbeddingsRequest) {
		openaitest.WriteError(w, http.StatusBadRequest, "invalid_request_error", "bad", long)
	}
	e := newTestEmbedder(t, f, nil)
	_, err := e.Embed(context.Background(), []string{"hello"})
	var pe *Error
	if !errors.As(err, &pe) || pe.Kind != KindBadRequest {
		t.Fatalf("got %v, want a BadRequest provider error", err)
	}
	msg := pe.Err.Error()
	if len(msg) > len("HTTP 400: ")+MaxSummaryBytes {
		t.Errorf("the summary is %d bytes, over %d: %q", len(msg), MaxSummaryBytes, msg)
	}
	if strings.ContainsAny(msg, "\n\r\x1b\u202e\u200b") {
		t.Errorf("the summary keeps line breaks or control characters: %q", msg)
	}
	if strings.Contains(err.Error(), testAPIKey) || strings.Count(msg, "AccessKeyId") > 10 {
		t.Errorf("the summary carries the answer whole: %q", msg)
	}
	if !strings.HasPrefix(msg, "HTTP 400: line one line two [31mred [0m evil AccessKeyId") || !strings.HasSuffix(msg, "…") {
		t.Errorf("the summary does not say what the server said, cut: %q", msg)
	}
}

// A name that resolves to an address the policy denies is refused when
// dialled, not retried, and said to be the policy's refusal.
func TestDeniedAddressIsNotReached(t *testing.T) {
	f := newFakeOpenAI(t)
	// 192.0.2.0/24 is allowed, so the name passes the URL check and is
	// refused at its address, 127.0.0.1.
	policy, err := egress.New([]string{"192.0.2.0/24"})
	mustf(t, err, "egress.New")
	u := strings.Replace(f.BaseURL(), "127.0.0.1", "localhost", 1)
	hc, err := policy.Client(u, nil)
	mustf(t, err, "policy.Client")
	e := newTestEmbedder(t, f, func(c *OpenAIEmbedderConfig) { c.BaseURL, c.HTTPClient = u, hc })
	_, err = e.Embed(context.Background(), []string{"hello"})
	var pe *Error
	if !errors.As(err, &pe) || pe.Kind != KindDenied || pe.Attempts != 1 {
		t.Fatalf("got %v, want one EgressDenied attempt", err)
	}
	if n := len(f.EmbeddingRequests()); n != 0 {
		t.Fatalf("%d requests reached the denied address", n)
	}
}

// A redirect from an allowed endpoint to a denied one is not followed: a
// 307 would carry the POST body, and the API key, there.
func TestRedirectsAreNotFollowed(t *testing.T) {
	internal := mcptest.NewTrap(t, "127.0.0.2", openaitest.Leak)
	at := mcptest.NewTrap(t, "127.0.0.1", mcptest.Redirect(internal.URL+"/v1/embeddings")).URL + "/v1"
	policy, err := egress.New([]string{"127.0.0.1/32"})
	mustf(t, err, "egress.New")
	hc, err := policy.Client(at, nil)
	mustf(t, err, "policy.Client")
	e, err := NewOpenAIEmbedder(OpenAIEmbedderConfig{OpenAIConfig: OpenAIConfig{BaseURL: at, APIKey: testAPIKey, HTTPClient: hc, Retry: fastRetry(3)}, Model: "m"})
	mustf(t, err, "NewOpenAIEmbedder")
	_, err = e.Embed(context.Background(), []string{"hello"})
	if KindOf(err) != KindBadRequest || !strings.Contains(err.Error(), "redirect, which is not followed") {
		t.Fatalf("got %v, want the redirect refused", err)
	}
	if internal.Requests() != 0 || strings.Contains(err.Error(), "ASIAINTERNAL") {
		t.Fatalf("the redirect was followed: %d requests reached its target (%v)", internal.Requests(), err)
	}
}

// A provider's identity, which keys what the query store keeps, tells API
// keys apart without holding one.
func TestIdentityTellsKeysApart(t *testing.T) {
	identity := func(key Secret) string {
		e, err := NewOpenAIEmbedder(OpenAIEmbedderConfig{OpenAIConfig: OpenAIConfig{BaseURL: "https://proxy.example/v1", APIKey: key}, Model: "m"})
		mustf(t, err, "NewOpenAIEmbedder")
		return e.Identity()
	}
	a, b := identity(testAPIKey), identity("sk-another-key-0123456789")
	if a == b || a != identity(testAPIKey) || identity("") == a {
		t.Errorf("identities do not follow the key: %q, %q", a, b)
	}
	if strings.Contains(a, testAPIKey) || strings.Contains(a, "SECRETKEY") {
		t.Errorf("the identity holds the key: %q", a)
	}
}
