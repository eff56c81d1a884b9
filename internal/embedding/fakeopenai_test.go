package embedding

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolcatalog/tool-catalog-operator/internal/testing/openaitest"
)

const testAPIKey = "sk-test-0123456789SECRETKEY"

// newFakeOpenAI starts an OpenAI-compatible server accepting the test key
// and the fallback key.
func newFakeOpenAI(t *testing.T) *openaitest.Server {
	s := openaitest.New(t)
	s.APIKeys = []string{testAPIKey, "fallback-key"}
	return s
}

// configFor is an endpoint configuration for a fake server.
func configFor(s *openaitest.Server) OpenAIConfig {
	return OpenAIConfig{BaseURL: s.BaseURL(), APIKey: testAPIKey, Timeout: 5 * time.Second, Retry: fastRetry(3)}
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
