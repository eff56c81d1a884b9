package mcpsource

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// surfaceHashDomain versions the encoding of SurfaceHash.
const surfaceHashDomain = "toolcatalog.dev/surface-hash/v1"

// SurfaceHash is the sha256 of what a model reads of a tool and what its
// provider claims of it: name, description, parameters (canonical JSON),
// annotations (their claims: NormalAnnotations), output schema (canonical
// JSON) and icons. Approvals name this
// hash, so an approval holds for one version of a tool and no other.
func SurfaceHash(spec v1alpha1.ToolDefinitionSpec) (string, error) {
	var params []byte
	if spec.Parameters != nil {
		params = spec.Parameters.Raw
	}
	params, err := contract.CanonicalJSON(params)
	if err != nil {
		return "", fmt.Errorf("canonicalising parameters: %w", err)
	}
	var annotations []byte
	// Hints at MCP's defaults say nothing (NormalAnnotations): written out
	// or left absent, the hash is the same.
	if a := NormalAnnotations(spec.Annotations); a != nil {
		// Struct fields marshal in a fixed order.
		if annotations, err = json.Marshal(a); err != nil {
			return "", fmt.Errorf("encoding annotations: %w", err)
		}
	}
	parts := [][]byte{[]byte(surfaceHashDomain), []byte(spec.Name), []byte(spec.Description), params, annotations}
	// Added later: counted only when set, so the hashes of tools without
	// one, and the approvals naming them, stay as they were.
	if spec.OutputSchema != nil {
		out, err := contract.CanonicalJSON(spec.OutputSchema.Raw)
		if err != nil {
			return "", fmt.Errorf("canonicalising the output schema: %w", err)
		}
		parts = append(parts, []byte("outputSchema"), out)
	}
	if len(spec.Icons) > 0 {
		icons, err := json.Marshal(spec.Icons)
		if err != nil {
			return "", fmt.Errorf("encoding icons: %w", err)
		}
		parts = append(parts, []byte("icons"), icons)
	}
	h := sha256.New()
	for _, part := range parts {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// KeepSurface is the upstream spec with the approved description,
// parameters, annotations, output schema and icons: what a source applies while
// a change waits for approval, so everything else (the source reference)
// stays current.
func KeepSurface(upstream, approved v1alpha1.ToolDefinitionSpec) v1alpha1.ToolDefinitionSpec {
	out := upstream
	out.Description = approved.Description
	out.Parameters = approved.Parameters
	out.Annotations = approved.Annotations
	out.OutputSchema = approved.OutputSchema
	out.Icons = approved.Icons
	return out
}

// SelectionHash identifies what a ToolSource selects: its server's URL
// or reference, its prefix and its include and exclude patterns (in any
// order).
func SelectionHash(spec v1alpha1.ToolSourceSpec) string {
	var server any = spec.MCP.URL
	if ref := spec.MCP.ServerRef; ref != nil {
		server = *ref
	}
	raw, _ := json.Marshal([]any{server, spec.ToolNamePrefix, slices.Sorted(slices.Values(spec.Include)), slices.Sorted(slices.Values(spec.Exclude))})
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// ShortHash is how many hex digits of a spec hash are shown to people; an
// approval names the whole hash.
const ShortHash = 12

var hexDigits = regexp.MustCompile(`^[0-9a-f]+$`)

// ValidApprovalHash says whether s is a whole spec hash: 64 hex digits. A
// prefix is not enough: a server that can choose its tool's text could
// make another version whose hash starts the same.
func ValidApprovalHash(s string) bool {
	return len(s) == sha256.Size*2 && hexDigits.MatchString(s)
}

// Reviewed says whether a hash a person noted while reviewing (at least
// ShortHash digits of it) is the start of hash: the version they reviewed
// is the one pending.
func Reviewed(noted, hash string) bool {
	return len(noted) >= ShortHash && hexDigits.MatchString(noted) && strings.HasPrefix(hash, noted)
}

// Diff says readably what changed from one version of a tool to the next:
// the changed part of the description, parameters added, removed or
// changed, required fields, and each annotation that changed.
func Diff(from, to v1alpha1.ToolDefinitionSpec) string {
	var parts []string
	if from.Description != to.Description {
		a, b := changedPart(from.Description, to.Description)
		parts = append(parts, fmt.Sprintf("description %q → %q", a, b))
	}
	parts = append(parts, paramsDiff(from.Parameters, to.Parameters)...)
	parts = append(parts, annotationsDiff(from.Annotations, to.Annotations)...)
	if !sameJSON(from.OutputSchema, to.OutputSchema) {
		parts = append(parts, "output schema changed")
	}
	if !equality.Semantic.DeepEqual(from.Icons, to.Icons) {
		parts = append(parts, "icons changed")
	}
	if len(parts) == 0 {
		return "no visible change"
	}
	return strings.Join(parts, "; ")
}

// diffContext is about how many characters of unchanged text are shown
// around a change.
const diffContext = 24

// maxDiffPart bounds each side of a description change.
const maxDiffPart = 300

// changedPart cuts two texts to what differs, with some context on each
// side that starts and ends on a word; "…" marks a cut.
func changedPart(a, b string) (string, string) {
	p := commonPrefix(a, b)
	s := commonSuffix(a[p:], b[p:])
	start := p - diffContext
	if start <= 0 {
		start = 0
	} else {
		for start < p && a[start] != ' ' {
			start++
		}
		for start < p && a[start] == ' ' {
			start++
		}
	}
	endA, endB := len(a)-s, len(b)-s
	keep := min(s, diffContext)
	for keep < s && a[endA+keep] != ' ' {
		keep++
	}
	cut := func(text string, end int) string {
		out := text[start : end+keep]
		if start > 0 {
			out = "…" + out
		}
		if end+keep < len(text) {
			out += "…"
		}
		if utf8.RuneCountInString(out) > maxDiffPart {
			out = string([]rune(out)[:maxDiffPart]) + "…"
		}
		return out
	}
	return cut(a, endA), cut(b, endB)
}

// commonPrefix is the length of the longest common prefix, on a rune
// boundary.
func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) {
		ra, size := utf8.DecodeRuneInString(a[n:])
		rb, _ := utf8.DecodeRuneInString(b[n:])
		if ra != rb {
			break
		}
		n += size
	}
	return n
}

// commonSuffix is the length of the longest common suffix, on a rune
// boundary.
func commonSuffix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) {
		ra, size := utf8.DecodeLastRuneInString(a[:len(a)-n])
		rb, _ := utf8.DecodeLastRuneInString(b[:len(b)-n])
		if ra != rb {
			break
		}
		n += size
	}
	return n
}

type schema struct {
	Properties map[string]json.RawMessage `json:"properties"`
	Required   []string                   `json:"required"`
}

func schemaOf(p *apiextensionsv1.JSON) (schema, []byte) {
	var s schema
	if p == nil {
		return s, nil
	}
	_ = json.Unmarshal(p.Raw, &s)
	return s, p.Raw
}

// sameJSON says whether two optional JSON values are equal as canonical
// JSON.
func sameJSON(a, b *apiextensionsv1.JSON) bool {
	_, rawA := schemaOf(a)
	_, rawB := schemaOf(b)
	ca, _ := contract.CanonicalJSON(rawA)
	cb, _ := contract.CanonicalJSON(rawB)
	return string(ca) == string(cb)
}

func paramsDiff(from, to *apiextensionsv1.JSON) []string {
	if sameJSON(from, to) {
		return nil
	}
	a, _ := schemaOf(from)
	b, _ := schemaOf(to)
	var added, removed, changed []string
	for name, pb := range b.Properties {
		pa, ok := a.Properties[name]
		switch {
		case !ok:
			added = append(added, name)
		default:
			x, _ := contract.CanonicalJSON(pa)
			y, _ := contract.CanonicalJSON(pb)
			if string(x) != string(y) {
				changed = append(changed, name)
			}
		}
	}
	for name := range a.Properties {
		if _, ok := b.Properties[name]; !ok {
			removed = append(removed, name)
		}
	}
	var out []string
	for _, l := range []struct {
		what  string
		names []string
	}{{"parameters added", added}, {"parameters removed", removed}, {"parameters changed", changed}} {
		if len(l.names) > 0 {
			slices.Sort(l.names)
			out = append(out, l.what+": "+strings.Join(l.names, ", "))
		}
	}
	ra, rb := slices.Sorted(slices.Values(a.Required)), slices.Sorted(slices.Values(b.Required))
	if !slices.Equal(ra, rb) {
		out = append(out, fmt.Sprintf("required [%s] → [%s]", strings.Join(ra, ", "), strings.Join(rb, ", ")))
	}
	if len(out) == 0 {
		out = append(out, "parameters schema changed")
	}
	return out
}

func annotationsDiff(from, to *v1alpha1.ToolAnnotations) []string {
	if equality.Semantic.DeepEqual(from, to) {
		return nil
	}
	if from == nil {
		from = &v1alpha1.ToolAnnotations{}
	}
	if to == nil {
		to = &v1alpha1.ToolAnnotations{}
	}
	var out []string
	if from.Title != to.Title {
		out = append(out, fmt.Sprintf("title %q → %q", from.Title, to.Title))
	}
	after := hints(to)
	for i, h := range hints(from) {
		if b, a := hint(h.value), hint(after[i].value); b != a {
			out = append(out, fmt.Sprintf("%s %s → %s", h.name, b, a))
		}
	}
	return out
}

// namedHint is one of MCP's tool hints.
type namedHint struct {
	name  string
	value *bool
}

// hints are an annotation's hints, always in the same order.
func hints(a *v1alpha1.ToolAnnotations) []namedHint {
	return []namedHint{{"readOnlyHint", a.ReadOnlyHint}, {"destructiveHint", a.DestructiveHint}, {"idempotentHint", a.IdempotentHint}, {"openWorldHint", a.OpenWorldHint}}
}

func hint(b *bool) string {
	if b == nil {
		return "unset"
	}
	return fmt.Sprint(*b)
}
