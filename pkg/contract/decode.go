package contract

import (
	"fmt"
	"unsafe"

	"github.com/segmentio/encoding/json"
)

// maxNesting is how deep a value read from Redis may nest, as deep as
// encoding/json's scanner allows. Real schemas nest a few dozen levels.
const maxNesting = 10_000

// unmarshal decodes data into v with segmentio's decoder, a drop-in for
// encoding/json's that takes a fraction of the time on a large catalog.
// That decoder recurses without a bound: a value nested millions deep,
// which anyone who can write to Redis could store, would exhaust the
// goroutine's stack and kill the process. So the nesting is measured
// first, by a scan of the bytes that costs a fraction of a validation.
func unmarshal(data []byte, v any) error {
	if err := checkNesting(data); err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// unmarshalString is unmarshal of a string read where it is, not first
// copied: the values read from Redis are strings, and copying the
// entries of a large catalog costs a quarter of their parse. The
// decoder only reads its input, and keeps none of it: without its
// zero-copy flags, each string and raw value it decodes is a copy.
func unmarshalString(data string, v any) error {
	return unmarshal(unsafe.Slice(unsafe.StringData(data), len(data)), v)
}

// unmarshalPart decodes a part of a value unmarshal read.
func unmarshalPart(data []byte, v any) error { return json.Unmarshal(data, v) }

// checkNesting refuses data whose arrays and objects nest past
// maxNesting. Brackets inside strings do not count. The decoder reads
// data front to back and stops at the first syntax error, so it opens
// an array or object only where this scan, which reads strings as the
// decoder does, counts one.
func checkNesting(data []byte) error {
	depth, inString := 0, false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			switch c {
			case '\\':
				i++ // an escape: the next byte is not a quote that ends the string
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			if depth++; depth > maxNesting {
				return fmt.Errorf("value nests past %d levels at offset %d", maxNesting, i)
			}
		case ']', '}':
			if depth > 0 { // a stray closer must not lend the openers after it room
				depth--
			}
		}
	}
	return nil
}
