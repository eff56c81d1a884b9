// Package request reads what an MCP client sends the gateway before
// anything else looks at it: the bearer token, the context window it asks
// for and the tool calls its JSON-RPC body holds, each bounded. It needs
// no cluster, so it is fuzzed on its own (make fuzz).
package request

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	segjson "github.com/segmentio/encoding/json"
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

// MaxDepth bounds how deep a body nests.
const MaxDepth = 10_000

// ErrAmbiguous is a body two readers could read differently, or that is
// not a JSON-RPC message or batch of them.
var ErrAmbiguous = errors.New("ambiguous or malformed JSON-RPC body")

// Messages reads the JSON-RPC messages of a body: one, or a batch. It
// reads them as the MCP SDK does (segmentio's decoder, member names
// matched by case), after refusing, with ErrAmbiguous, a body that
// readers could read differently: a member name twice in one object, or
// twice but for case (a case-insensitive decoder, encoding/json's, takes
// either), invalid UTF-8, data after the value, nesting past MaxDepth,
// or a message whose fields do not have JSON-RPC's types. What the
// gateway counts and limits is then what the SDK runs.
func Messages(body []byte) ([]Message, error) {
	if err := checkUnambiguous(body); err != nil {
		return nil, err
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil, nil
	}
	raws := []json.RawMessage{trimmed}
	if trimmed[0] == '[' {
		raws = nil
		if err := decode(trimmed, &raws); err != nil {
			return nil, err
		}
	}
	msgs := make([]Message, len(raws))
	for i, raw := range raws {
		if err := decode(raw, &msgs[i]); err != nil {
			return nil, err
		}
		msgs[i].ID = boundedID(msgs[i].ID)
		msgs[i].Params.RequestID = boundedID(msgs[i].Params.RequestID)
	}
	return msgs, nil
}

// decode decodes as the MCP SDK does: segmentio's parser, struct fields
// matched by case. It parses the bytes as they are (the SDK's decoder
// parses them the same way, after copying them into a 32 KiB buffer of
// its own, a buffer per message that a busy gateway would collect), and
// refuses anything after the value.
func decode(data []byte, v any) error {
	rest, err := segjson.Parse(data, v, segjson.DontMatchCaseInsensitiveStructFields)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %v", ErrAmbiguous, err)
	case len(rest) != 0: // the parser skips the spaces after the value
		return fmt.Errorf("%w: data after the value", ErrAmbiguous)
	}
	return nil
}

// checkUnambiguous walks a body token by token and refuses what readers
// could read differently (see Messages).
func checkUnambiguous(body []byte) error {
	if !utf8.Valid(body) {
		return fmt.Errorf("%w: not UTF-8", ErrAmbiguous)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	// objects holds, for each object open, the folded names of its
	// members so far; a nil entry is an array.
	type frame struct {
		names     map[string]string
		expectKey bool
	}
	var open []*frame
	whole := false // the top-level value is complete
	valueDone := func() {
		n := len(open)
		switch {
		case n == 0:
			whole = true
		case open[n-1].names != nil:
			open[n-1].expectKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrAmbiguous, err)
		}
		if whole {
			return fmt.Errorf("%w: data after the message", ErrAmbiguous)
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if len(open) >= MaxDepth {
					return fmt.Errorf("%w: nests deeper than %d levels", ErrAmbiguous, MaxDepth)
				}
				f := &frame{}
				if t == '{' {
					f.names, f.expectKey = map[string]string{}, true
				}
				open = append(open, f)
			default:
				open = open[:len(open)-1]
				valueDone()
			}
		case string:
			if n := len(open); n > 0 && open[n-1].names != nil && open[n-1].expectKey {
				key := foldName(t)
				if first, dup := open[n-1].names[key]; dup {
					return fmt.Errorf("%w: member %q after %q in one object", ErrAmbiguous, t, first)
				}
				open[n-1].names[key] = t
				open[n-1].expectKey = false
				continue
			}
			valueDone()
		default:
			valueDone()
		}
	}
	return nil
}

// foldName maps every name that differs from another only by case, as
// Unicode folds it (K, k and the Kelvin sign; S, s and the long s), to
// one key.
func foldName(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
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
