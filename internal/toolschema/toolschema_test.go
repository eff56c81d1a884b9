package toolschema

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateParameters(t *testing.T) {
	tests := []struct {
		name          string
		schema        string
		wantNotObject bool
		wantErr       []string // substrings of the message; nil means valid
	}{
		{name: "absent", schema: ""},
		{name: "object with properties", schema: `{"type":"object","properties":{"city":{"type":"string","description":"City name"},"days":{"type":"integer","minimum":1}},"required":["city"]}`},
		{name: "local ref", schema: `{"type":"object","$defs":{"c":{"type":"string"}},"properties":{"city":{"$ref":"#/$defs/c"}}}`},
		{name: "draft-07 by $schema", schema: `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","definitions":{"c":{"type":"string"}},"properties":{"city":{"$ref":"#/definitions/c"}}}`},
		{name: "type is a number", schema: `{"type":12}`, wantErr: []string{"not a valid JSON Schema", "at /type"}},
		{name: "required is not a list", schema: `{"type":"object","required":"city"}`, wantErr: []string{"at /required", "want array"}},
		{name: "nested bad type", schema: `{"type":"object","properties":{"city":{"type":"strin"}}}`, wantErr: []string{"at /properties/city/type"}},
		{name: "negative minLength", schema: `{"type":"object","properties":{"city":{"type":"string","minLength":-1}}}`, wantErr: []string{"at /properties/city/minLength"}},
		{name: "dangling local ref", schema: `{"type":"object","properties":{"a":{"$ref":"#/$defs/nope"}}}`, wantErr: []string{"#/$defs/nope", "not found"}},
		{name: "remote ref refused", schema: `{"type":"object","properties":{"a":{"$ref":"http://example.com/s.json"}}}`, wantErr: []string{"external reference", "not allowed"}},
		{name: "file ref refused", schema: `{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}`, wantErr: []string{"external reference", "not allowed"}},
		{name: "not an object schema", schema: `{"type":"string"}`, wantNotObject: true, wantErr: []string{"must describe an object", "type string"}},
		{name: "no type", schema: `{"properties":{"a":{"type":"string"}}}`, wantNotObject: true, wantErr: []string{"must describe an object", "no type"}},
		{name: "array document", schema: `[1,2]`, wantErr: []string{"must be a JSON object"}},
		{name: "malformed JSON", schema: `{"type":`, wantErr: []string{"not valid JSON"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateParameters([]byte(tt.schema))
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("want *Error, got %T: %v", err, err)
			}
			if pe.NotObject != tt.wantNotObject {
				t.Errorf("NotObject = %v, want %v", pe.NotObject, tt.wantNotObject)
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("message %q does not contain %q", err.Error(), s)
				}
			}
		})
	}
}

func TestCompileArgumentsChecksCalls(t *testing.T) {
	a, err := CompileArguments([]byte(`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1}},"required":["city"],"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	for args, want := range map[string]string{
		`{"city":"Oslo"}`:             "",
		`{"city":"Oslo","days":3}`:    "",
		`{"city":7}`:                  "at /city: got number, want string",
		`{"days":0}`:                  "at the top level: missing property 'city'; at /days: minimum: got 0, want 1",
		`{"city":"Oslo","wind":true}`: "at the top level: additional properties 'wind' not allowed",
		`{"city":`:                    "the arguments are not valid JSON",
	} {
		err := a.Validate([]byte(args))
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", args, err)
		case want != "" && (err == nil || !strings.HasPrefix(err.Error(), want)):
			t.Errorf("%s: got %v, want %q", args, err, want)
		}
	}
	none, err := CompileArguments(nil)
	if err != nil || none.Validate([]byte(`{"anything":1}`)) != nil {
		t.Fatalf("no parameters: %v", err)
	}
	if _, err := CompileArguments([]byte(`{"type":"object","properties":12}`)); err == nil {
		t.Fatal("a bad schema compiled")
	}
}
