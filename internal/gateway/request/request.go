// Package request reads what an MCP client sends the gateway before
// anything else looks at it: the bearer token, the context window it asks
// for and the tool calls its JSON-RPC body holds, each bounded. It needs
// no cluster, so it is fuzzed on its own (make fuzz).
package request

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// Bounds of ?contextWindow.
const (
	MinContextWindow = 1000
	MaxContextWindow = 10_000_000
)

// Errors of Bearer.
var (
	ErrNoToken   = errors.New("a bearer token is required (Authorization: Bearer TOKEN)")
	ErrNotBearer = errors.New("only bearer tokens are accepted (Authorization: Bearer TOKEN)")
)

// Bearer returns the token of an Authorization header: ErrNoToken when
// there is none, ErrNotBearer for another scheme or an empty token.
func Bearer(header string) (string, error) {
	if header == "" {
		return "", ErrNoToken
	}
	scheme, token, _ := strings.Cut(header, " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", ErrNotBearer
	}
	return token, nil
}

// ErrBadWindow is a ?contextWindow that is not a number of tokens.
var ErrBadWindow = errors.New("contextWindow must be a number of tokens, at least " + strconv.Itoa(MinContextWindow))

// ContextWindow parses ?contextWindow (0 when absent) and rounds it down to
// MinContextWindow times a power of two, at most MaxContextWindow, so one
// principal has a handful of views, not one per number it sends. Rounding
// down only ever discloses more tools progressively, never fewer.
func ContextWindow(raw string) (int, error) {
	if raw == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < MinContextWindow {
		return 0, ErrBadWindow
	}
	n = min(n, MaxContextWindow)
	return MinContextWindow << int(math.Log2(float64(n)/MinContextWindow)), nil
}

// ErrTooLarge is a body over the limit.
var ErrTooLarge = errors.New("request body too large")

// ReadBody reads a request's body, at most limit bytes, and puts it back
// for the next handler.
func ReadBody(r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	if r.ContentLength > limit {
		return nil, ErrTooLarge
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > limit {
		return nil, ErrTooLarge
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

// ToolCalls reports the tools/call requests a JSON-RPC body holds: how
// many call the tool named search and how many call anything else. A body
// it cannot read counts as none: the MCP handler answers it.
func ToolCalls(body []byte, search string) (searches, calls int) {
	type message struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	var msgs []message
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '[' {
		_ = json.Unmarshal(trimmed, &msgs)
	} else {
		var m message
		if json.Unmarshal(trimmed, &m) == nil {
			msgs = []message{m}
		}
	}
	for _, m := range msgs {
		switch {
		case m.Method != "tools/call":
		case m.Params.Name == search:
			searches++
		default:
			calls++
		}
	}
	return searches, calls
}
