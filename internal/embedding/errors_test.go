package embedding

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
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

func TestParseRetryAfter(t *testing.T) {
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
		got, ok := parseRetryAfter(h, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseRetryAfter(%v) = %v, %v; want %v, %v", tt.header, got, ok, tt.want, tt.ok)
		}
	}
}

func TestErrorKindRetryable(t *testing.T) {
	retryable := map[ErrorKind]bool{
		KindRateLimited: true, KindServer: true, KindTimeout: true, KindUnavailable: true, KindMalformed: true,
		KindAuth: false, KindBadRequest: false, KindDimensionMismatch: false, KindInvalidInput: false,
	}
	for k, want := range retryable {
		if k.Retryable() != want {
			t.Errorf("%s.Retryable() = %v, want %v", k, !want, want)
		}
	}
}
