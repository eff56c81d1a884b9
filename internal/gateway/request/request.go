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

// Message is what the gateway reads of one JSON-RPC message before the
// MCP handler does: its method, its ID (a request's) and the names its
// parameters give.
type Message struct {
	// ID is the request's ID as sent (a JSON number or string), empty for
	// a notification or an ID longer than MaxIDBytes.
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		// Name is the tool a tools/call names.
		Name string `json:"name"`
		// RequestID is the request a notifications/cancelled cancels.
		RequestID json.RawMessage `json:"requestId"`
	} `json:"params"`
}

// MaxIDBytes bounds the request IDs the gateway keeps track of.
const MaxIDBytes = 128

// Messages reads the JSON-RPC messages of a body: one, or a batch. A body
// it cannot read holds none: the MCP handler answers it.
func Messages(body []byte) []Message {
	var msgs []Message
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '[' {
		_ = json.Unmarshal(trimmed, &msgs)
	} else {
		var m Message
		if json.Unmarshal(trimmed, &m) == nil {
			msgs = []Message{m}
		}
	}
	for i := range msgs {
		msgs[i].ID = boundedID(msgs[i].ID)
		msgs[i].Params.RequestID = boundedID(msgs[i].Params.RequestID)
	}
	return msgs
}

// boundedID keeps an ID that is a JSON number or string of at most
// MaxIDBytes.
func boundedID(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || len(raw) > MaxIDBytes || string(raw) == "null" || (raw[0] != '"' && raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return nil
	}
	return raw
}

// ToolCalls reports the tools/call requests of msgs: how many call the
// tool named search and how many call anything else.
func ToolCalls(msgs []Message, search string) (searches, calls int) {
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
