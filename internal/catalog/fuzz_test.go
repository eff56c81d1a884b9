package catalog

import (
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/internal/toolschema"
)

// Parameters schemas come from users and MCP servers: validating and
// hashing any bytes ends in a verdict, never a panic or a network or file
// read, and a schema's hash does not depend on its key order.
func FuzzParameters(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`,
		`{"type":"object","$ref":"http://example.com/schema.json"}`,
		`{"type":"object","$ref":"file:///etc/passwd"}`,
		`{"type":"object","$defs":{"a":{"$ref":"#/$defs/a"}},"properties":{"x":{"$ref":"#/$defs/a"}}}`,
		`{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"object","properties":{"c":{}}}}}}}`,
		`{"type":12}`, `[]`, `null`, `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object"}`,
		`{"type":"object","pattern":"(a+)+$"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, schema []byte) {
		if len(schema) > 1<<14 {
			return
		}
		_ = toolschema.ValidateParameters(schema)
		h1, err := SpecHash("tool", "does things", schema)
		if err != nil {
			return
		}
		if len(h1) != 64 {
			t.Fatalf("hash %q", h1)
		}
	})
}
