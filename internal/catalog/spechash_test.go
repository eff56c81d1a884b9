package catalog

import (
	"testing"
)

func TestSpecHash(t *testing.T) {
	base := func(t *testing.T, name, desc, params string) string {
		t.Helper()
		h, err := SpecHash(name, desc, []byte(params))
		if err != nil {
			t.Fatalf("SpecHash: %v", err)
		}
		return h
	}
	ref := base(t, "get_weather", "Get the weather.", `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)
	if len(ref) != 64 {
		t.Fatalf("hash %q is not 64 hex characters", ref)
	}

	tests := []struct {
		name          string
		tool, desc    string
		params        string
		wantSameAsRef bool
	}{
		{"identical", "get_weather", "Get the weather.", `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`, true},
		{"keys reordered and spaced", "get_weather", "Get the weather.", `{ "required": ["city"], "properties": {"city": {"type": "string"}}, "type": "object" }`, true},
		{"description changed", "get_weather", "Get the weather forecast.", `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`, false},
		{"name changed", "get_weather2", "Get the weather.", `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`, false},
		{"parameters changed", "get_weather", "Get the weather.", `{"type":"object","properties":{"town":{"type":"string"}},"required":["town"]}`, false},
		{"array order is significant", "get_weather", "Get the weather.", `{"type":"object","properties":{"city":{"type":"string"}},"required":["city","x"]}`, false},
		// Without length prefixes these two would encode alike.
		{"boundary moved between name and description", "get_weatherG", "et the weather.", `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := base(t, tt.tool, tt.desc, tt.params)
			if (got == ref) != tt.wantSameAsRef {
				t.Errorf("hash equal to reference = %v, want %v", got == ref, tt.wantSameAsRef)
			}
		})
	}
}

func TestSpecHashEmptyParameters(t *testing.T) {
	a, err := SpecHash("ping", "Check liveness.", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := SpecHash("ping", "Check liveness.", []byte("  "))
	if err != nil {
		t.Fatal(err)
	}
	c, err := SpecHash("ping", "Check liveness.", []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Errorf("absent and blank parameters hash differently: %s vs %s", a, b)
	}
	if a == c {
		t.Errorf("absent parameters and {} hash alike")
	}
}

func TestSpecHashRejectsMalformedJSON(t *testing.T) {
	if _, err := SpecHash("x", "y", []byte(`{"type":`)); err == nil {
		t.Fatal("want an error for malformed parameters")
	}
	if _, err := SpecHash("x", "y", []byte(`{} {}`)); err == nil {
		t.Fatal("want an error for trailing data")
	}
}
