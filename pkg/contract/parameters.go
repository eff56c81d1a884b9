package contract

import (
	"encoding/json"
	"sort"
)

// ParameterNames returns the top-level property names of a JSON Schema,
// required ones first, each group sorted.
func ParameterNames(schema json.RawMessage) []string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil {
		return nil
	}
	required := map[string]bool{}
	var out []string
	for _, r := range s.Required {
		if _, ok := s.Properties[r]; ok && !required[r] {
			required[r] = true
			out = append(out, r)
		}
	}
	sort.Strings(out)
	var optional []string
	for p := range s.Properties {
		if !required[p] {
			optional = append(optional, p)
		}
	}
	sort.Strings(optional)
	return append(out, optional...)
}
