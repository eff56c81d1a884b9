package mcpsource

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	udiff "github.com/aymanbagabas/go-udiff"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// MaxReviewBytes bounds one change's review text, so that a source's
// status stays small whatever its server sends; a longer one is cut on a
// line and says so.
const MaxReviewBytes = 12 << 10

// Review is what a person approving a change reads: a unified diff of the
// approved version of a tool (nil for a tool not imported yet) and the
// pending one, with every line of both in it: the whole description, the
// parameters and output schemas (canonical JSON, indented) and the
// annotations, the changed lines marked - and +.
func Review(approved *v1alpha1.ToolDefinitionSpec, pending v1alpha1.ToolDefinitionSpec) string {
	before := ""
	if approved != nil {
		before = reviewText(*approved)
	}
	after := reviewText(pending)
	edits := udiff.Lines(before, after)
	whole := strings.Count(before, "\n") + strings.Count(after, "\n") + 1
	out, err := udiff.ToUnified("approved", "pending", before, edits, whole)
	if err != nil {
		// The edits come from the same texts: this does not happen.
		out = fmt.Sprintf("the change cannot be shown: %v\n", err)
	}
	if len(out) <= MaxReviewBytes {
		return out
	}
	const note = "… cut at %d KiB, %d more lines not shown: review the server's tool itself before approving\n"
	cut := strings.LastIndexByte(out[:MaxReviewBytes-len(note)-8], '\n') + 1
	return out[:cut] + fmt.Sprintf(note, MaxReviewBytes>>10, strings.Count(out[cut:], "\n"))
}

// reviewText writes the parts of a tool's spec a person reviews, one
// section each, every line indented.
func reviewText(spec v1alpha1.ToolDefinitionSpec) string {
	var b strings.Builder
	section := func(name, body string) {
		b.WriteString(name + ":\n")
		for line := range strings.Lines(body) {
			b.WriteString("    " + strings.TrimRight(line, "\n") + "\n")
		}
	}
	section("description", spec.Description)
	if spec.Parameters != nil {
		section("parameters", indented(spec.Parameters.Raw))
	}
	if spec.OutputSchema != nil {
		section("outputSchema", indented(spec.OutputSchema.Raw))
	}
	if len(spec.Icons) > 0 {
		var lines []string
		for _, i := range spec.Icons {
			src := i.Src
			if kind, _, ok := strings.Cut(src, ";base64,"); ok {
				src = fmt.Sprintf("%s;base64 (%d characters)", kind, len(i.Src))
			}
			lines = append(lines, strings.TrimSpace(fmt.Sprintf("%s %s %s", src, strings.Join(i.Sizes, ","), i.Theme)))
		}
		section("icons", strings.Join(lines, "\n"))
	}
	if a := spec.Annotations; a != nil {
		var lines []string
		if a.Title != "" {
			lines = append(lines, fmt.Sprintf("title: %q", a.Title))
		}
		for _, h := range hints(a) {
			if h.value != nil {
				lines = append(lines, fmt.Sprintf("%s: %v", h.name, *h.value))
			}
		}
		if len(lines) > 0 {
			section("annotations", strings.Join(lines, "\n"))
		}
	}
	return b.String()
}

// indented is a JSON document canonical and indented, or as it is when it
// does not parse.
func indented(raw []byte) string {
	c, err := contract.CanonicalJSON(raw)
	if err != nil {
		return string(raw)
	}
	var b bytes.Buffer
	if json.Indent(&b, c, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}

// ChoosePending picks the pending changes to approve: the named tools, or
// all of them; hash, with one tool, must name that tool's pending change.
func ChoosePending(pending []v1alpha1.PendingChange, tools []string, all bool, hash string) ([]v1alpha1.PendingChange, error) {
	switch {
	case all && len(tools) > 0:
		return nil, fmt.Errorf("give tools or --all, not both")
	case hash != "" && len(tools) != 1:
		return nil, fmt.Errorf("--hash needs exactly one tool")
	case hash != "" && !Reviewed(strings.ToLower(hash), strings.ToLower(hash)):
		return nil, fmt.Errorf("--hash %q is not a spec hash: give at least %d hex digits", hash, ShortHash)
	case all && len(pending) == 0:
		return nil, fmt.Errorf("no change is pending")
	case all:
		return pending, nil
	}
	var out []v1alpha1.PendingChange
	for _, tool := range tools {
		i := slices.IndexFunc(pending, func(p v1alpha1.PendingChange) bool { return p.Tool == tool })
		if i < 0 {
			return nil, fmt.Errorf("no change of %s is pending (list them with kubectl toolcatalog approve SOURCE)", tool)
		}
		p := pending[i]
		if hash != "" && !Reviewed(strings.ToLower(hash), p.SpecHash) {
			return nil, fmt.Errorf("the pending change of %s now has spec hash %s, not %s: the server changed it again since you reviewed it; review it again", tool, p.SpecHash[:ShortHash], hash)
		}
		out = append(out, p)
	}
	return out, nil
}
