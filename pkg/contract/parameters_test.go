package contract

import (
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
	if !slices.Equal(got, want) {
		t.Fatalf("Parameters = %#v, want %#v", got, want)
	}
}
