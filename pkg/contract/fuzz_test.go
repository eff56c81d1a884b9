package contract

import (
	"encoding/json"
	"math"
	"testing"
)

// The contract's parsers read what any writer left in Redis: nothing they
// are given may panic, and what they accept must encode again.

func FuzzParseDocument(f *testing.F) {
	f.Add([]byte(`{"version":3,"schema_hash":"x","catalog":"a/b","catalog_uid":"u","embedding":{"provider":"builtin","model":"m","dimensions":4},"search":{"method":"hybrid","top_k":5,"always_include":["t"]},"tools":[{"name":"t","description":"d","parameters":{"type":"object"},"spec_hash":"h"}],"permissions":{"t":[]}}`))
	f.Add([]byte(`{"tools":null,"permissions":{"x":null}}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"tools":[{"parameters":"not an object"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		d, err := ParseDocument(data)
		if err != nil {
			return
		}
		_, _ = d.ToolByName("t")
		for i := range d.Tools {
			if n, normalizeToolErr := NormalizeTool(d.Tools[i]); normalizeToolErr == nil {
				d.Tools[i] = n
			}
		}
		if sealErr := d.Seal(); sealErr != nil {
			return
		}
		raw, err := d.Marshal()
		if err != nil {
			t.Fatalf("a sealed document does not encode: %v", err)
		}
		again, err := ParseDocument(raw)
		if err != nil || again.SchemaHash != d.SchemaHash {
			t.Fatalf("round trip: %v, hash %s vs %s", err, again.SchemaHash, d.SchemaHash)
		}
	})
}

func FuzzParseMetadata(f *testing.F) {
	f.Add(`{"spec_hash":"h","description":"d","model":"m","dimensions":4,"synthetic_queries":["a","b"],"embedded_at":"2026-11-22T05:05:44Z"}`)
	f.Add(`{"dimensions":-1,"synthetic_queries":null}`)
	f.Add(`{"embedded_at":"yesterday"}`)
	f.Fuzz(func(t *testing.T, data string) {
		m, err := ParseMetadata(data)
		if err != nil {
			return
		}
		if _, err := m.Marshal(); err != nil {
			t.Fatalf("parsed metadata does not encode: %v", err)
		}
	})
}

func FuzzNotice(f *testing.F) {
	f.Add(`{"catalog":"a/b","catalog_uid":"u","version":2,"schema_hash":"h"}`)
	f.Add(`{"version":"2"}`)
	f.Fuzz(func(t *testing.T, data string) {
		var n Notice
		if json.Unmarshal([]byte(data), &n) != nil {
			return
		}
		if _, err := json.Marshal(n); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzDecodeVector(f *testing.F) {
	f.Add(EncodeVector([]float32{1, 0, -0.5}))
	f.Add([]byte{1, 2, 3})
	f.Add([]byte{0, 0, 0xc0, 0x7f}) // NaN
	f.Fuzz(func(t *testing.T, raw []byte) {
		v, err := DecodeVector(raw)
		if err != nil {
			return
		}
		if len(v)*4 != len(raw) {
			t.Fatalf("%d floats from %d bytes", len(v), len(raw))
		}
		for _, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("a non-finite value was accepted: %v", v)
			}
		}
	})
}

func FuzzCanonicalJSON(f *testing.F) {
	f.Add([]byte(`{"b":1,"a":[{"d":2,"c":null}]}`))
	f.Add([]byte(`{"a":1e400}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		c, err := CanonicalJSON(data)
		if err != nil {
			return
		}
		again, err := CanonicalJSON(c)
		if err != nil || string(again) != string(c) {
			t.Fatalf("canonical form is not stable: %s -> %s (%v)", c, again, err)
		}
	})
}
