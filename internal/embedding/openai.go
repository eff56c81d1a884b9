package embedding

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
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

// client builds an SDK client whose own retries are off: retries, backoff
// and Retry-After are handled by RetryPolicy so they are observable and
// testable. Base URL and key are always set explicitly, so ambient
// OPENAI_BASE_URL and OPENAI_API_KEY variables never redirect a catalog.
func (c OpenAIConfig) client() (openai.Client, error) {
	u, err := url.Parse(c.baseURL())
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return openai.Client{}, fmt.Errorf("base URL %q is not an http(s) URL", c.baseURL())
	}
	httpClient := c.HTTPClient
	if httpClient == nil {
		httpClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	return openai.NewClient(
		option.WithBaseURL(c.baseURL()),
		option.WithAPIKey(c.APIKey.Reveal()),
		option.WithHTTPClient(httpClient),
		option.WithMaxRetries(0),
	), nil
}

func (c OpenAIConfig) observe(label, model, outcome string, start time.Time) {
	if c.Observe != nil {
		c.Observe(label, model, outcome, time.Since(start))
	}
}

// classify turns an SDK or transport error of one attempt into a classified
// Error. parent is the caller's context, attempt the per-request one.
func (c OpenAIConfig) classify(parent, attempt context.Context, provider, model string, err error) *Error {
	e := &Error{Provider: provider, Model: model}
	var apiErr *openai.Error
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
		e.Err = fmt.Errorf("HTTP %d: %s", apiErr.StatusCode, scrub(msg, c.APIKey))
		if apiErr.Response != nil {
			e.retryAfterDelay, e.hasRetryAfter = parseRetryAfter(apiErr.Response.Header, time.Now())
		}
	case parent.Err() == nil && errors.Is(attempt.Err(), context.DeadlineExceeded):
		e.Kind = KindTimeout
		e.Err = fmt.Errorf("no response within %s", c.timeout())
	case errors.As(err, &netErr):
		e.Kind = KindUnavailable
		e.Err = errors.New(scrub(err.Error(), c.APIKey))
	default:
		// The SDK failed to decode the body.
		e.Kind = KindMalformed
		e.Err = errors.New(scrub(err.Error(), c.APIKey))
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
