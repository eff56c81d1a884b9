package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// CanonicalJSON re-encodes a JSON document with object keys sorted, no
// insignificant whitespace, no HTML escaping and numbers kept as written.
// Empty input (or only whitespace) yields empty output. Input that is
// canonical already is returned itself, not a copy: what the API server
// stores is, and a catalog of 50,000 tools then holds its parameters once.
func CanonicalJSON(doc []byte) ([]byte, error) {
	if len(bytes.TrimSpace(doc)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("unexpected data after the JSON value")
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	// encoding/json writes map keys in sorted order, which is what makes
	// the output canonical.
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	canonical := bytes.TrimSuffix(out.Bytes(), []byte("\n"))
	if bytes.Equal(canonical, doc) {
		return doc, nil
	}
	return canonical, nil
}
