package embedding

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/toolcatalog/tool-catalog-operator/internal/egress"
	consumeropenai "github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/openai"
)

// DefaultOpenAIBaseURL is used when a configuration names no base URL.
const DefaultOpenAIBaseURL = "https://api.openai.com/v1"

// DefaultTimeout bounds one request when a configuration names none.
const DefaultTimeout = 30 * time.Second

// OpenAIConfig is an OpenAI-compatible endpoint: OpenAI, Azure OpenAI,
// OpenRouter, Ollama, vLLM, TEI or LiteLLM.
type OpenAIConfig struct {
	// BaseURL is the API root, for example https://api.openai.com/v1 or
	// http://ollama:11434/v1; DefaultOpenAIBaseURL when empty.
	BaseURL string
	// APIKey is sent as a bearer token; empty for servers without auth.
	APIKey Secret
	// Timeout bounds each request; DefaultTimeout when zero. The caller's
	// context bounds the whole call, retries included.
	Timeout time.Duration
	// Retry is the retry policy; the zero value is DefaultRetryPolicy.
	Retry RetryPolicy
	// HTTPClient replaces the default HTTP client.
	HTTPClient *http.Client `json:"-"`
	httpClient *http.Client
	// Observe, when set, is told of every request: a short provider label,
	// the model, the outcome ("success" or the error kind) and the time it
	// took. The operator feeds its metrics from it.
	Observe func(provider, model, outcome string, d time.Duration) `json:"-"`
}

func (c OpenAIConfig) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

func (c OpenAIConfig) baseURL() string {
	if c.BaseURL != "" {
		return c.BaseURL
	}
	return DefaultOpenAIBaseURL
}

// keyIdentity tells API keys apart in an Identity without holding one:
// a proxy may map one model name to other models per key, so what one
// key's requests produced is not another's. An HMAC of the key, keyed by
// the endpoint, so the same key at two endpoints shows no common value;
// "-" for no key.
func (c OpenAIConfig) keyIdentity() string {
	if c.APIKey == "" {
		return "-"
	}
	m := hmac.New(sha256.New, []byte("toolcatalog key identity\n"+c.baseURL()))
	m.Write([]byte(c.APIKey.Reveal()))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// Endpoint is the API root requests go to: BaseURL, or
// DefaultOpenAIBaseURL when it is empty.
func (c OpenAIConfig) Endpoint() string { return c.baseURL() }

// post sends one request to path under the base URL and decodes the
// answer into out; it does not retry: retries, backoff and Retry-After are
// handled by RetryPolicy so they are observable and testable. Base URL and
// key are always the configuration's, so ambient OPENAI_BASE_URL and
// OPENAI_API_KEY variables never redirect a catalog.
func (c OpenAIConfig) post(ctx context.Context, path string, body, out any, maxBytes int64) error {
	return consumeropenai.Post(ctx, c.httpClient, strings.TrimSuffix(c.baseURL(), "/")+path, c.APIKey.Reveal(), body, out, maxBytes)
}

// checkBaseURL refuses a base URL that is not http(s), and gives the
// configuration its own HTTP client unless one is set.
func (c *OpenAIConfig) checkBaseURL() error {
	u, err := url.Parse(c.baseURL())
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("base URL %q is not an http(s) URL", c.baseURL())
	}
	c.httpClient = c.HTTPClient
	if c.httpClient == nil {
		c.httpClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	return nil
}

func (c OpenAIConfig) observe(label, model, outcome string, start time.Time) {
	if c.Observe != nil {
		c.Observe(label, model, outcome, time.Since(start))
	}
}

// classify turns an HTTP or transport error of one attempt into a
// classified Error. parent is the caller's context, attempt the
// per-request one.
func (c OpenAIConfig) classify(parent, attempt context.Context, provider, model string, err error) *Error {
	e := &Error{Provider: provider, Model: model}
	var apiErr *consumeropenai.StatusError
	var netErr net.Error
	switch {
	case errors.As(err, &apiErr):
		e.StatusCode = apiErr.StatusCode
		switch code := apiErr.StatusCode; {
		case code == http.StatusUnauthorized || code == http.StatusForbidden:
			e.Kind = KindAuth
		case code == http.StatusTooManyRequests:
			e.Kind = KindRateLimited
		case code == http.StatusRequestTimeout:
			e.Kind = KindTimeout
		case code >= 500:
			e.Kind = KindServer
		default:
			e.Kind = KindBadRequest
		}
		msg := apiErr.Message
		if msg == "" {
			msg = http.StatusText(apiErr.StatusCode)
		}
		e.Err = fmt.Errorf("HTTP %d: %s", apiErr.StatusCode, summarize(msg, c.APIKey))
		e.retryAfterDelay, e.hasRetryAfter = consumeropenai.RetryAfter(apiErr.Header, time.Now())
	case errors.Is(err, egress.ErrDenied):
		// The name resolved to an address the policy denies: nothing
		// was sent.
		e.Kind = KindDenied
		e.Err = errors.New(summarize(err.Error(), c.APIKey))
	case errors.Is(err, egress.ErrRedirect):
		e.Kind = KindBadRequest
		e.Err = egress.ErrRedirect
	case parent.Err() == nil && errors.Is(attempt.Err(), context.DeadlineExceeded):
		e.Kind = KindTimeout
		e.Err = fmt.Errorf("no response within %s", c.timeout())
	case errors.As(err, &netErr):
		e.Kind = KindUnavailable
		e.Err = errors.New(summarize(err.Error(), c.APIKey))
	default:
		// The body could not be decoded.
		e.Kind = KindMalformed
		e.Err = errors.New(summarize(err.Error(), c.APIKey))
	}
	return e
}

// call runs one request with retries and a per-request timeout; op receives
// the per-request context and returns the SDK error or a classified one.
func (c OpenAIConfig) call(ctx context.Context, label, provider, model string, op func(ctx context.Context) error) error {
	var last *Error
	attempts, err := c.Retry.do(ctx, func(ctx context.Context) error {
		actx, cancel := context.WithTimeout(ctx, c.timeout())
		defer cancel()
		start := time.Now()
		err := op(actx)
		if err == nil {
			c.observe(label, model, "success", start)
			return nil
		}
		if !errors.As(err, &last) {
			last = c.classify(ctx, actx, provider, model, err)
		}
		c.observe(label, model, string(last.Kind), start)
		return last
	})
	if err == nil {
		return nil
	}
	if last != nil {
		last.Attempts = attempts
		if err != error(last) {
			// Stopped by the context or the deadline: say so, and keep
			// the classification of the last failure.
			return &Error{Kind: last.Kind, Provider: provider, Model: model, StatusCode: last.StatusCode, Attempts: attempts, Err: err}
		}
		return last
	}
	return err
}
