package request

import (
	"errors"
	"math/bits"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestContextWindow(t *testing.T) {
	for raw, want := range map[string]int{"": 0, "1000": 1000, "1999": 1000, "2000": 2000, "130000": 128_000, "50000000": 8_192_000} {
		if got, err := ContextWindow(raw); err != nil || got != want {
			t.Errorf("ContextWindow(%q) = %d, %v, want %d", raw, got, err, want)
		}
	}
	for _, raw := range []string{"999", "-5", "lots", "1e9", "99999999999999999999999"} {
		if _, err := ContextWindow(raw); !errors.Is(err, ErrBadWindow) {
			t.Errorf("ContextWindow(%q): %v, want ErrBadWindow", raw, err)
		}
	}
}

func TestBearer(t *testing.T) {
	for header, want := range map[string]error{"": ErrNoToken, "Basic YWxpY2U6c2VjcmV0": ErrNotBearer, "Bearer ": ErrNotBearer, "Bearer  ": ErrNotBearer, "bearer t0k": nil} {
		if _, err := Bearer(header); !errors.Is(err, want) {
			t.Errorf("Bearer(%q): %v, want %v", header, err, want)
		}
	}
}

func TestMessages(t *testing.T) {
	msgs := Messages([]byte(`[{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"tool_search"}},` +
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"abc"}},` +
		`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"},{"jsonrpc":"2.0","id":"` + strings.Repeat("a", MaxIDBytes) + `","method":"ping"}]`))
	if len(msgs) != 4 {
		t.Fatalf("%d messages", len(msgs))
	}
	if string(msgs[0].ID) != "7" || msgs[0].Params.Name != "tool_search" || string(msgs[1].Params.RequestID) != `"abc"` {
		t.Fatalf("read %+v", msgs[:2])
	}
	// An object ID and one too long are not kept.
	if msgs[2].ID != nil || msgs[3].ID != nil {
		t.Fatalf("IDs kept: %s, %d bytes", msgs[2].ID, len(msgs[3].ID))
	}
	if s, c := ToolCalls(msgs, "tool_search"); s != 1 || c != 0 {
		t.Fatalf("ToolCalls: %d searches, %d calls", s, c)
	}
}

// FuzzRequest feeds arbitrary Authorization headers, ?contextWindow values
// and JSON-RPC bodies to what reads them first: nothing panics, a token
// is never blank or padded, a window is a bucket within the bounds, a body
// is never read past its limit, and the calls counted are calls the body
// could hold.
func FuzzRequest(f *testing.F) {
	f.Add("Bearer alice-7d1f0c", "1000", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"tool_search","arguments":{"query":"weather"}}}`)
	f.Add("bearer  t ", "99999999999999999999", `[{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x"}},{"method":"tools/call"}]`)
	f.Add("Basic YWxpY2U6c2VjcmV0", "-1", `{`)
	f.Add("", "%zz", `null`)
	f.Add("Bearer\tx", "1e9", "\x00\xff[")
	f.Fuzz(func(t *testing.T, auth, window, body string) {
		if token, err := Bearer(auth); err == nil && (token == "" || strings.TrimSpace(token) != token) {
			t.Fatalf("Bearer(%q) = %q", auth, token)
		}
		if w, err := ContextWindow(window); err == nil && w != 0 {
			if w < MinContextWindow || w > MaxContextWindow || w%MinContextWindow != 0 || bits.OnesCount(uint(w/MinContextWindow)) != 1 {
				t.Fatalf("ContextWindow(%q) = %d, not a bucket", window, w)
			}
		}
		const limit = 256
		r := httptest.NewRequest("POST", "/mcp/ns/c", strings.NewReader(body))
		got, err := ReadBody(r, limit)
		switch {
		case len(body) > limit && !errors.Is(err, ErrTooLarge):
			t.Fatalf("a %d-byte body read past the %d-byte limit: %v", len(body), limit, err)
		case len(body) <= limit && (err != nil || string(got) != body):
			t.Fatalf("a %d-byte body: %q, %v", len(body), got, err)
		}
		msgs := Messages([]byte(body))
		for _, m := range msgs {
			if len(m.ID) > MaxIDBytes || len(m.Params.RequestID) > MaxIDBytes {
				t.Fatalf("an ID of %d bytes kept, past %d", max(len(m.ID), len(m.Params.RequestID)), MaxIDBytes)
			}
		}
		searches, calls := ToolCalls(msgs, "tool_search")
		if n := strings.Count(body, "{"); searches < 0 || calls < 0 || searches+calls > n {
			t.Fatalf("%d searches and %d calls counted in a body of %d objects at most", searches, calls, n)
		}
	})
}
