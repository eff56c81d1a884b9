package contract

import (
	"encoding/json"
	"sort"
)

// Parameter is one top-level property of a tool's parameter schema.
type Parameter struct {
	Name        string
	Description string
	Required    bool
}

// Parameters returns the top-level properties of a JSON Schema with their
// descriptions, required ones first, each group sorted by name. A schema
// that does not parse yields none.
func Parameters(schema json.RawMessage) []Parameter {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil {
		return nil
	}
	required := map[string]bool{}
	for _, r := range s.Required {
		if _, ok := s.Properties[r]; ok {
			required[r] = true
		}
	}
	out := make([]Parameter, 0, len(s.Properties))
	for name, raw := range s.Properties {
		var p struct {
			Description string `json:"description"`
		}
		// A property that is not an object (true, say) has no description.
		_ = json.Unmarshal(raw, &p)
		out = append(out, Parameter{Name: name, Description: p.Description, Required: required[name]})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Required != out[j].Required {
			return out[i].Required
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// ParameterNames returns the top-level property names of a JSON Schema,
// required ones first, each group sorted.
func ParameterNames(schema json.RawMessage) []string {
	params := Parameters(schema)
	out := make([]string, len(params))
	for i, p := range params {
		out[i] = p.Name
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
