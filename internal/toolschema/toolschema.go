// Package toolschema checks the JSON Schemas of tools: a ToolDefinition's
// parameters and output schema (valid, self-contained, of an object) and a
// call's arguments against its parameters. The manager, the gateway and
// the ToolSource import share it; it needs no cluster and no Redis.
package toolschema

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// printer renders the validator's messages in English.
var printer = message.NewPrinter(language.English)

// Error explains why a tool's parameters or output schema is rejected.
type Error struct {
	// NotObject is true when the schema is valid JSON Schema but does not
	// describe an object.
	NotObject bool
	// Detail says what is wrong and where.
	Detail string
}

func (e *Error) Error() string { return e.Detail }

// schemaURL names a schema in error messages: urn:toolcatalog: and the
// field.
const schemaURL = "urn:toolcatalog:"

// ValidateParameters checks that a tool's parameters value is a valid JSON
// Schema (against the metaschema of its $schema, draft 2020-12 by default)
// that describes an object. Empty input means "no parameters" and is valid.
// External references are refused: the schema must be self-contained, and
// validating it never reads a file or the network.
func ValidateParameters(doc []byte) error { return validateObjectSchema("parameters", doc) }

// ValidateOutputSchema checks a tool's output schema as ValidateParameters
// checks its parameters; empty means the tool declares none.
func ValidateOutputSchema(doc []byte) error { return validateObjectSchema("outputSchema", doc) }

// validateObjectSchema checks that doc, the spec field named field, is a
// self-contained JSON Schema of an object.
func validateObjectSchema(field string, doc []byte) error {
	if len(bytes.TrimSpace(doc)) == 0 {
		return nil
	}
	value, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return &Error{Detail: fmt.Sprintf("%s is not valid JSON: %v", field, err)}
	}
	obj, ok := value.(map[string]any)
	if !ok {
		return &Error{Detail: field + " must be a JSON object (a JSON Schema with type: object)"}
	}

	c := jsonschema.NewCompiler()
	c.UseLoader(refusingLoader{field})
	if err := c.AddResource(schemaURL+field, value); err != nil {
		return &Error{Detail: fmt.Sprintf("%s is not a valid JSON Schema: %v", field, err)}
	}
	if _, err := c.Compile(schemaURL + field); err != nil {
		return &Error{Detail: field + " is not a valid JSON Schema: " + describeCompileError(field, err)}
	}

	if t, ok := obj["type"]; !ok || t != "object" {
		got := "no type"
		if ok {
			got = fmt.Sprintf("type %v", t)
		}
		return &Error{NotObject: true, Detail: fmt.Sprintf("%s must describe an object (type: object), found %s", field, got)}
	}
	return nil
}

// describeCompileError turns a compiler error into one line naming each
// offending location and keyword.
func describeCompileError(field string, err error) string {
	var sve *jsonschema.SchemaValidationError
	if errors.As(err, &sve) {
		var ve *jsonschema.ValidationError
		if errors.As(sve.Err, &ve) {
			leaves := leafErrors(ve, nil)
			msgs := make([]string, 0, len(leaves))
			for _, l := range leaves {
				msgs = append(msgs, fmt.Sprintf("at %s: %s", instanceLocation(l.InstanceLocation), l.ErrorKind.LocalizedString(printer)))
			}
			return strings.Join(msgs, "; ")
		}
		return sve.Err.Error()
	}
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	return strings.ReplaceAll(msg, schemaURL+field, field)
}

// leafErrors collects the innermost causes, which name the actual problem
// rather than the metaschema's composition keywords.
func leafErrors(ve *jsonschema.ValidationError, acc []*jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(ve.Causes) == 0 {
		return append(acc, ve)
	}
	for _, c := range ve.Causes {
		acc = leafErrors(c, acc)
	}
	return acc
}

func instanceLocation(loc []string) string {
	if len(loc) == 0 {
		return "the top level"
	}
	return "/" + strings.Join(loc, "/")
}

// refusingLoader makes every external $ref of a field's schema an error.
type refusingLoader struct{ field string }

func (l refusingLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external reference %q is not allowed: %s must be self-contained (use $defs and local $ref)", url, l.field)
}

// Arguments checks a tool call's arguments against the tool's parameters
// schema, compiled once.
type Arguments struct {
	schema *jsonschema.Schema
}

// CompileArguments compiles a tool's parameters schema for checking
// arguments; empty parameters accept any object.
func CompileArguments(parameters []byte) (*Arguments, error) {
	if err := ValidateParameters(parameters); err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(parameters)) == 0 {
		parameters = []byte(`{"type":"object"}`)
	}
	value, err := jsonschema.UnmarshalJSON(bytes.NewReader(parameters))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refusingLoader{"parameters"})
	if addResourceErr := c.AddResource(schemaURL+"parameters", value); addResourceErr != nil {
		return nil, addResourceErr
	}
	s, err := c.Compile(schemaURL + "parameters")
	if err != nil {
		return nil, err
	}
	return &Arguments{schema: s}, nil
}

// Validate checks arguments (a JSON object); the error names each
// offending location and what was wrong there.
func (a *Arguments) Validate(arguments []byte) error {
	value, err := jsonschema.UnmarshalJSON(bytes.NewReader(arguments))
	if err != nil {
		return fmt.Errorf("the arguments are not valid JSON: %v", err)
	}
	err = a.schema.Validate(value)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	leaves := leafErrors(ve, nil)
	msgs := make([]string, 0, len(leaves))
	for _, l := range leaves {
		msgs = append(msgs, fmt.Sprintf("at %s: %s", instanceLocation(l.InstanceLocation), l.ErrorKind.LocalizedString(printer)))
	}
	return errors.New(strings.Join(msgs, "; "))
}
