package embedding

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// ErrorKind classifies a provider failure by what should happen next.
type ErrorKind string

const (
	// KindAuth is a rejected or missing API key (401, 403): fix the Secret.
	KindAuth ErrorKind = "Auth"
	// KindBadRequest is a request the server refuses (400, 404, 422...),
	// such as an unknown model: fix the configuration.
	KindBadRequest ErrorKind = "BadRequest"
	// KindRateLimited is a 429.
	KindRateLimited ErrorKind = "RateLimited"
	// KindServer is a 5xx.
	KindServer ErrorKind = "ServerError"
	// KindTimeout is a request that exceeded its timeout (or a 408).
	KindTimeout ErrorKind = "Timeout"
	// KindUnavailable is a connection failure.
	KindUnavailable ErrorKind = "Unavailable"
	// KindMalformed is a response that cannot be used: unparseable,
	// incomplete, or not the requested number of queries.
	KindMalformed ErrorKind = "MalformedResponse"
	// KindDimensionMismatch is a vector of another length than configured:
	// fix embedding.dimensions or the model.
	KindDimensionMismatch ErrorKind = "DimensionMismatch"
	// KindInvalidInput is input the provider cannot embed, such as an
	// empty text.
	KindInvalidInput ErrorKind = "InvalidInput"
	// KindDenied is an endpoint the egress policy refuses to reach (its
	// name resolved to a denied address): nothing was sent; the platform
	// operators must allow it, or the catalog must name another.
	KindDenied ErrorKind = "EgressDenied"
)

// Retryable reports whether a failure of this kind may succeed when retried.
func (k ErrorKind) Retryable() bool {
	switch k {
	case KindRateLimited, KindServer, KindTimeout, KindUnavailable, KindMalformed:
		return true
	}
	return false
}

// Error is a classified provider failure. Its message never contains an API
// key.
type Error struct {
	Kind ErrorKind
	// Provider and Model say which endpoint and model failed.
	Provider, Model string
	// StatusCode is the HTTP status, 0 when there was no response.
	StatusCode int
	// Attempts is how many requests were made.
	Attempts int
	// Err is the underlying cause.
	Err error

	// retryAfterDelay is the delay the server asked for, if any.
	retryAfterDelay time.Duration
	hasRetryAfter   bool
}

func (e *Error) retryAfter() (time.Duration, bool) { return e.retryAfterDelay, e.hasRetryAfter }

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", e.Provider, e.Kind)
	if e.Model != "" {
		fmt.Fprintf(&b, " (model %s)", e.Model)
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " after %d attempts", e.Attempts)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the kind of a provider error, or "" for other errors.
func KindOf(err error) ErrorKind {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Kind
	}
	return ""
}

// Secret holds an API key. It prints as [REDACTED] with every fmt verb, in
// JSON and in logs, so a configuration can be logged or wrapped in an error
// without leaking the key. Use Reveal to read it.
type Secret string

const redacted = "[REDACTED]"

// Reveal returns the key itself.
func (s Secret) Reveal() string { return string(s) }

// String implements fmt.Stringer.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString implements fmt.GoStringer.
func (s Secret) GoString() string { return `"` + s.String() + `"` }

// Format makes every verb, %x and %q included, print the redacted form.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		fmt.Fprint(f, s.GoString())
		return
	}
	fmt.Fprint(f, s.String())
}

// MarshalJSON implements json.Marshaler.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + s.String() + `"`), nil }

// MarshalText implements encoding.TextMarshaler (used by slog and others).
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// scrub removes a key from a message, in case a server echoes it back.
func scrub(msg string, key Secret) string {
	if len(key) < 4 {
		return msg
	}
	return strings.ReplaceAll(msg, key.Reveal(), redacted)
}

// MaxSummaryBytes bounds what of a failed call's answer reaches an error,
// and through it a status, an event or a log line.
const MaxSummaryBytes = 200

// summarize makes a bounded, one-line summary of what a server or the
// transport said: the key removed, control and invisible characters and
// line breaks turned into spaces, runs of spaces folded, and the text cut
// at MaxSummaryBytes. An endpoint is whatever a namespace user wrote, so
// its answer is never copied whole where others read it.
func summarize(msg string, key Secret) string {
	msg = scrub(strings.ToValidUTF8(msg, " "), key)
	var b strings.Builder
	space := false
	for _, r := range msg {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			space = b.Len() > 0
			continue
		}
		if b.Len()+utf8.RuneLen(r)+1 > MaxSummaryBytes-len("…") {
			b.WriteString("…")
			break
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}
