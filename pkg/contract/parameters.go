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
	// A map the decoder is given is filled, not made at its default size.
	s.Properties = make(map[string]json.RawMessage, 8)
	if len(schema) == 0 || unmarshal(schema, &s) != nil {
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
		// Each property is read once, its fields kept raw; a property
		// that is not an object (true, say) has none.
		var p property
		_ = unmarshalPart(raw, &p)
		var description string
		_ = unmarshalPart(p.Description, &description)
		out = append(out, Parameter{Name: name, Description: description, Required: required[name], Enum: p.enum()})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Required != out[j].Required {
			return out[i].Required
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// property is a property of a schema, its fields as they are written.
type property struct {
	Description json.RawMessage `json:"description"`
	Enum        json.RawMessage `json:"enum"`
	Items       json.RawMessage `json:"items"`
}

// enum reads the string values of the property's enum, or of its items'
// enum; values of other types are left out, and a malformed enum or items
// gives none.
func (p property) enum() []string {
	var enum []json.RawMessage
	var items struct {
		Enum []json.RawMessage `json:"enum"`
	}
	if len(p.Enum) > 0 && unmarshalPart(p.Enum, &enum) != nil || len(p.Items) > 0 && unmarshalPart(p.Items, &items) != nil {
		return nil
	}
	values := enum
	if len(values) == 0 {
		values = items.Enum
	}
	var out []string
	for _, v := range values {
		var str string
		if unmarshalPart(v, &str) == nil && str != "" {
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
