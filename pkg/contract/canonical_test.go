package contract

import "testing"

func TestCanonicalJSON(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"b":1,"a":{"d":[3,1],"c":"<x>"}}`, `{"a":{"c":"<x>","d":[3,1]},"b":1}`},
		{"  {\n\"n\": 1.50e3 }", `{"n":1.50e3}`},
		{`"ü"`, `"ü"`},
		{``, ``},
	}
	for _, tt := range tests {
		got, err := CanonicalJSON([]byte(tt.in))
		if err != nil {
			t.Fatalf("CanonicalJSON(%q): %v", tt.in, err)
		}
		if string(got) != tt.want {
			t.Errorf("CanonicalJSON(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// Canonical input comes back itself, other input as a new slice.
func TestCanonicalJSONSharesCanonicalInput(t *testing.T) {
	in := []byte(`{"a":{"c":"<x>","d":[3,1]},"b":1}`)
	got, err := CanonicalJSON(in)
	if err != nil || &got[0] != &in[0] || len(got) != len(in) {
		t.Fatalf("canonical input copied: %s, %v", got, err)
	}
	spaced := []byte(`{"a": 1}`)
	got, err = CanonicalJSON(spaced)
	if err != nil || string(got) != `{"a":1}` || &got[0] == &spaced[0] {
		t.Fatalf("%s, %v", got, err)
	}
}
