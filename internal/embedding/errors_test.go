package embedding

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
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
		KindAuth: false, KindBadRequest: false, KindDimensionMismatch: false, KindInvalidInput: false,
	}
	for k, want := range retryable {
		if k.Retryable() != want {
			t.Errorf("%s.Retryable() = %v, want %v", k, !want, want)
		}
	}
}
