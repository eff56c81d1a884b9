package toolschema

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"unicode"
)

// Invisible reports whether a person reviewing a text would not see r, or
// see it other than a model reads it: control characters but tab and line
// feeds, format characters (bidirectional controls, zero-width and tag
// characters), the other default-ignorable code points (U+3164 HANGUL
// FILLER and its kin), variation selectors (a run of them carries any
// payload of bytes after a character), private-use characters,
// noncharacters, and line and paragraph separators. One policy for every
// text a model reads: imported or written by hand, descriptions, titles
// and schema texts. FindInvisible lets one emoji or text presentation
// selector follow a visible character, as in "⚠️".
func Invisible(r rune) bool {
	if r == '\t' || r == '\n' || r == '\r' {
		return false
	}
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Co, unicode.Zl, unicode.Zp,
		unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point, unicode.Noncharacter_Code_Point)
}

// presentation reports the two variation selectors emoji and symbols take
// in ordinary text: U+FE0E (text) and U+FE0F (emoji).
func presentation(r rune) bool { return r == 0xFE0E || r == 0xFE0F }

// FindInvisible returns the first invisible character of s and its byte
// offset; ok is false when there is none. A presentation selector right
// after a visible character is not one.
func FindInvisible(s string) (r rune, at int, ok bool) {
	prev := rune(-1)
	for i, r := range s {
		if Invisible(r) && !(presentation(r) && prev >= 0 && !Invisible(prev) && !unicode.IsSpace(prev)) {
			return r, i, true
		}
		prev = r
	}
	return 0, 0, false
}

// InvisibleError says which field holds an invisible character.
type InvisibleError struct {
	// Field is what holds it: "description", "parameters", ...
	Field string
	Rune  rune
	At    int
}

func (e *InvisibleError) Error() string {
	return fmt.Sprintf("%s holds the invisible or control character U+%04X (at byte %d), which can hide text from the people who review it: remove it", e.Field, e.Rune, e.At)
}

// Text is one text a model reads, and what holds it.
type Text struct {
	Field, Value string
}

// SchemaTexts are every string of a JSON schema, member names included, as
// texts of field.
func SchemaTexts(field string, raw []byte) []Text {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	var out []Text
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			out = append(out, Text{field, v})
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(v)) {
				out = append(out, Text{field, k})
				walk(v[k])
			}
		}
	}
	walk(v)
	return out
}

// CheckTexts refuses the first text holding an invisible character.
func CheckTexts(texts ...Text) error {
	for _, t := range texts {
		if r, at, ok := FindInvisible(t.Value); ok {
			return &InvisibleError{Field: t.Field, Rune: r, At: at}
		}
	}
	return nil
}
