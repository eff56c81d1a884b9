// Package openai embeds search queries through an OpenAI-compatible
// /v1/embeddings endpoint (OpenAI, Azure, Ollama, vLLM, TEI, LiteLLM), for
// catalogs whose embedding provider is openai. It is a package of its own
// so that only consumers who need it carry it.
//
// It speaks the API's wire format with net/http (Post, StatusError) rather
// than through the OpenAI SDK: the SDK's package alone adds about 16 MB to
// every binary that links it, for the one request a consumer sends. The
// operator sends its requests through the same functions.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultBaseURL is the API root when a Config names none.
const DefaultBaseURL = "https://api.openai.com/v1"

// Config says where and how to embed; use the catalog's model and
// dimensions (Document.Embedding) so queries and tools compare.
type Config struct {
	// BaseURL is the API root, e.g. https://api.openai.com/v1
	// (DefaultBaseURL when empty).
	BaseURL string
	// APIKey is sent as a bearer token; empty sends none.
	APIKey string
	// Model and Dimensions are the catalog's.
	Model      string
	Dimensions int
	// Timeout bounds one request (30 s when zero); 408, 409, 429 and 5xx
	// answers and failed connections are retried twice.
	Timeout time.Duration
	// HTTPClient replaces http.DefaultClient.
	HTTPClient *http.Client
}

// Embedder embeds queries with an OpenAI-compatible endpoint.
type Embedder struct {
	cfg Config
}

// New returns an Embedder for cfg.
func New(cfg Config) (*Embedder, error) {
	if cfg.Model == "" {
		return nil, errors.New("openai: the catalog's embedding model is required")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	return &Embedder{cfg: cfg}, nil
}

// Model returns the configured model.
func (e *Embedder) Model() string { return e.cfg.Model }

// retries is how often a retryable failure is tried again.
const retries = 2

// Embed returns one vector per text, in input order.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	req := NewEmbeddingsRequest(e.cfg.Model, e.cfg.Dimensions, texts)
	var resp EmbeddingsResponse
	var err error
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
		err = Post(actx, e.cfg.HTTPClient, strings.TrimSuffix(e.cfg.BaseURL, "/")+"/embeddings", e.cfg.APIKey, req, &resp, MaxEmbeddingsResponseBytes(len(texts)))
		cancel()
		wait, retry := retryAfter(err, attempt)
		if !retry || attempt == retries || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	if err != nil {
		return nil, fmt.Errorf("openai: embedding %d texts with %s: %w", len(texts), e.cfg.Model, err)
	}
	if resp.Data == nil {
		return nil, errors.New("openai: the response has no data list")
	}
	if len(*resp.Data) != len(texts) {
		return nil, fmt.Errorf("openai: %d embeddings for %d texts", len(*resp.Data), len(texts))
	}
	out := make([][]float32, len(texts))
	for _, d := range *resp.Data {
		if d.Index == nil || *d.Index < 0 || int(*d.Index) >= len(texts) || out[*d.Index] != nil {
			return nil, fmt.Errorf("openai: an embedding index is missing, out of range or repeated")
		}
		if e.cfg.Dimensions > 0 && len(d.Embedding) != e.cfg.Dimensions {
			return nil, fmt.Errorf("openai: embedding %d has %d dimensions, want %d", *d.Index, len(d.Embedding), e.cfg.Dimensions)
		}
		out[*d.Index] = d.Embedding
	}
	return out, nil
}

// retryAfter says whether a failed attempt is worth another, and after how
// long: what the server's Retry-After asks (up to a minute), else half a
// second doubled per attempt.
func retryAfter(err error, attempt int) (time.Duration, bool) {
	if err == nil {
		return 0, false
	}
	backoff := 500 * time.Millisecond << attempt
	var se *StatusError
	if !errors.As(err, &se) {
		var de *DecodeError
		return backoff, !errors.As(err, &de)
	}
	switch c := se.StatusCode; {
	case c == http.StatusRequestTimeout, c == http.StatusConflict, c == http.StatusTooManyRequests, c >= 500:
	default:
		return 0, false
	}
	if d, ok := RetryAfter(se.Header, time.Now()); ok && d <= time.Minute {
		return d, true
	}
	return backoff, true
}

// RetryAfter reads the delay an answer asks for before a retry:
// retry-after-ms (sent by OpenAI) or Retry-After in seconds or as an HTTP
// date, at now.
func RetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d, true
		}
		return 0, true
	}
	return 0, false
}

// EmbeddingsRequest is the body of POST /embeddings: float vectors of the
// model, of the given length when Dimensions > 0. The operator sends the
// same.
type EmbeddingsRequest struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	EncodingFormat string   `json:"encoding_format"`
	Dimensions     int      `json:"dimensions,omitempty"`
}

// NewEmbeddingsRequest is the request embedding texts with model.
func NewEmbeddingsRequest(model string, dimensions int, texts []string) EmbeddingsRequest {
	return EmbeddingsRequest{Model: model, Input: texts, EncodingFormat: "float", Dimensions: max(dimensions, 0)}
}

// EmbeddingsResponse is what is read of an embeddings response: each
// vector decoded straight into float32 (a generic decoding holds every
// number as float64 and a parse tree besides: many times the memory, for
// thousands of vectors). Pointers tell a missing field from a zero one.
type EmbeddingsResponse struct {
	Data *[]struct {
		Index     *int64    `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
}

// MaxEmbeddingsResponseBytes bounds the answer to a request of n texts:
// room for vectors of 8,192 dimensions written out in full, which no
// model returns, and not for a server that streams without end.
func MaxEmbeddingsResponseBytes(n int) int64 { return 1<<20 + int64(n)*8192*24 }

// maxErrorBytes bounds what is read of an error answer.
const maxErrorBytes = 64 << 10

// StatusError is an answer other than 2xx, with the message of the API's
// error envelope ({"error": {"message": ...}}) when it has one.
type StatusError struct {
	StatusCode int
	Message    string
	// Header is the answer's, for Retry-After.
	Header http.Header
}

func (e *StatusError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.StatusCode)
	}
	return fmt.Sprintf("HTTP %d: %s", e.StatusCode, msg)
}

// DecodeError is a 2xx answer whose body is not the JSON expected, or is
// longer than allowed.
type DecodeError struct{ Err error }

func (e *DecodeError) Error() string { return "decoding the answer: " + e.Err.Error() }
func (e *DecodeError) Unwrap() error { return e.Err }

// Post sends body as JSON to url with apiKey as a bearer token (none when
// empty) and decodes a 2xx answer of at most maxBytes into out. It does not
// retry. Errors are a *StatusError for an answer other than 2xx, a
// *DecodeError for a body that is not what out expects, or the transport's
// error (ctx's, when it ended).
func Post(ctx context.Context, hc *http.Client, url, apiKey string, body, out any, maxBytes int64) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encoding the request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer func() {
		// What the decoder left (a trailing newline) is read, so the
		// connection goes back to the pool instead of being closed.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBytes))
		_ = resp.Body.Close()
	}()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		se := &StatusError{StatusCode: resp.StatusCode, Header: resp.Header}
		var envelope struct {
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if b, readAllErr := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes)); readAllErr == nil && json.Unmarshal(b, &envelope) == nil && envelope.Error != nil {
			se.Message = envelope.Error.Message
		}
		return se
	}
	lr := &io.LimitedReader{R: resp.Body, N: maxBytes + 1}
	err = json.NewDecoder(lr).Decode(out)
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case lr.N <= 0:
		return &DecodeError{Err: fmt.Errorf("the answer is longer than %d bytes", maxBytes)}
	case errors.As(err, &syntax), errors.As(err, &typ), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &DecodeError{Err: err}
	}
	return err // the connection failed mid-answer
}
