package contract

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
)

func TestParameterNames(t *testing.T) {
	tests := []struct {
		schema string
		want   []string
	}{
		{`{"type":"object","properties":{"b":{},"a":{},"c":{}},"required":["c","b","c","missing"]}`, []string{"b", "c", "a"}},
		{`{"type":"object"}`, nil},
		{``, nil},
		{`not json`, nil},
	}
	for _, tt := range tests {
		got := ParameterNames([]byte(tt.schema))
		if !slices.Equal(got, tt.want) {
			t.Errorf("ParameterNames(%s) = %#v, want %#v", tt.schema, got, tt.want)
		}
	}
}

func TestParametersCarryDescriptions(t *testing.T) {
	got := Parameters([]byte(`{"type":"object","properties":{"unit":{"type":"string","description":"celsius or fahrenheit"},"city":{"description":"The city (e.g., Paris)"},"flag":true},"required":["city"]}`))
	want := []Parameter{
		{Name: "city", Description: "The city (e.g., Paris)", Required: true},
		{Name: "flag"},
		{Name: "unit", Description: "celsius or fahrenheit"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Parameters = %#v, want %#v", got, want)
	}
}

// Enum values are read as words of the tool: strings only, from the
// property or its items, at most MaxEnumValues; a malformed enum is none.
func TestParametersCarryEnumValues(t *testing.T) {
	many := `"v0"`
	for i := 1; i < 100; i++ {
		many += fmt.Sprintf(`,"v%d"`, i)
	}
	got := Parameters([]byte(`{"type":"object","properties":{
		"unit":{"type":"string","enum":["celsius","fahrenheit",3,null,""]},
		"days":{"type":"array","items":{"enum":["monday","friday"]}},
		"bad":{"description":"kept","enum":"celsius"},
		"many":{"enum":[` + many + `]}}}`))
	byName := map[string]Parameter{}
	for _, p := range got {
		byName[p.Name] = p
	}
	if e := byName["unit"].Enum; !slices.Equal(e, []string{"celsius", "fahrenheit"}) {
		t.Errorf("unit enum %q", e)
	}
	if e := byName["days"].Enum; !slices.Equal(e, []string{"monday", "friday"}) {
		t.Errorf("array items' enum %q", e)
	}
	if b := byName["bad"]; b.Enum != nil || b.Description != "kept" {
		t.Errorf("a malformed enum: %+v", b)
	}
	if n := len(byName["many"].Enum); n != MaxEnumValues {
		t.Errorf("%d enum values read, want at most %d", n, MaxEnumValues)
	}
}
