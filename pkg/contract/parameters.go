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
	// Enum is the string values the property (or, for an array, each
	// item) is limited to, at most MaxEnumValues of them.
	Enum []string
}

// MaxEnumValues bounds the enum values Parameters reads of one property.
const MaxEnumValues = 64

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
		out = append(out, Parameter{Name: name, Description: p.Description, Required: required[name], Enum: enumOf(raw)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Required != out[j].Required {
			return out[i].Required
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// enumOf reads the string values of a property's enum, or of its items'
// enum; values of other types, and a malformed enum, are left out.
func enumOf(raw json.RawMessage) []string {
	var p struct {
		Enum  []json.RawMessage `json:"enum"`
		Items struct {
			Enum []json.RawMessage `json:"enum"`
		} `json:"items"`
	}
	if json.Unmarshal(raw, &p) != nil {
		return nil
	}
	values := p.Enum
	if len(values) == 0 {
		values = p.Items.Enum
	}
	var out []string
	for _, v := range values {
		var str string
		if json.Unmarshal(v, &str) == nil && str != "" {
			out = append(out, str)
			if len(out) == MaxEnumValues {
				break
			}
		}
	}
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
