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
