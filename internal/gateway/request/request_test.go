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
	msgs, err := Messages([]byte(`[{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"tool_search"}},` +
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"abc"}},` +
		`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"},{"jsonrpc":"2.0","id":"` + strings.Repeat("a", MaxIDBytes) + `","method":"ping"}]`))
	if err != nil || len(msgs) != 4 {
		t.Fatalf("%d messages, %v", len(msgs), err)
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

// A body two readers could read differently is refused before anything
// counts its calls: the gateway would count none while the SDK, which
// matches names by case, ran the call. What only one reading allows is
// read as the SDK reads it.
func TestAmbiguousBodiesAreRefused(t *testing.T) {
	const call = `"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_weather","arguments":{"city":"Oslo"}}`
	for name, body := range map[string]string{
		"a case-variant params":                 `{` + call + `,"PARAMS":0}`,
		"a case-variant method":                 `{` + call + `,"Method":"ping"}`,
		"params twice":                          `{` + call + `,"params":{"name":"tool_search"}}`,
		"an escaped duplicate":                  `{` + call + `,"\u0070arams":{}}`,
		"the Kelvin sign":                       `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","\u212Aey":1,"key":2}}`,
		"a duplicate argument":                  `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"city":"Oslo","city":"Bergen"}}}`,
		"a duplicate in a batch element":        `[{` + call + `},{"jsonrpc":"2.0","id":2,"id":3,"method":"ping"}]`,
		"trailing data":                         `{` + call + `} {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}}`,
		"params not an object":                  `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":0}`,
		"a batch element that is not a message": `[{` + call + `},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":[1]}]`,
		"invalid UTF-8":                         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"\xff\"}}",
		"nesting past the bound":                `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":` + strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1) + `}}`,
		"not JSON":                              `{"jsonrpc":`,
	} {
		if msgs, err := Messages([]byte(body)); !errors.Is(err, ErrAmbiguous) {
			t.Errorf("%s: %+v, %v; want ErrAmbiguous", name, msgs, err)
		}
	}
	// A name only in other case is not the field the SDK reads: a call
	// the SDK runs is counted, one it does not is not.
	msgs, err := Messages([]byte(`[{` + call + `},{"jsonrpc":"2.0","id":2,"METHOD":"tools/call","params":{"name":"x"}},{"jsonrpc":"2.0","id":3,"method":"ping","PARAMS":{"name":"x"}}]`))
	if err != nil {
		t.Fatal(err)
	}
	if s, c := ToolCalls(msgs, "tool_search"); s != 0 || c != 1 || msgs[2].Params.Name != "" {
		t.Fatalf("%d searches, %d calls, %+v", s, c, msgs)
	}
	// Nesting at the bound, and names that differ by more than case, are
	// fine.
	if _, err := Messages([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":1,"b":2,"ab":{"a":1}},"x":` + strings.Repeat("[", MaxDepth-1) + strings.Repeat("]", MaxDepth-1) + `}`)); err != nil {
		t.Fatal(err)
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
		msgs, _ := Messages([]byte(body))
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

// BenchmarkMessages reads a tools/call as the gateway reads each request
// before the SDK does.
func BenchmarkMessages(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"tool_call","arguments":{"name":"get_weather","arguments":{"city":"Oslo"}},"_meta":{"progressToken":3}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Messages(body); err != nil {
			b.Fatal(err)
		}
	}
}
