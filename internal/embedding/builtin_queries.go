package embedding

import (
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/text"

	"context"
	"fmt"
	"strings"
)

// TemplateQueryGenerator is the builtin offline query generator. It builds
// queries from templates filled with the tool name split into words, the
// clauses of its description and its parameter names. Output depends only
// on the request, so it is identical across runs and processes.
type TemplateQueryGenerator struct{}

var _ QueryGenerator = TemplateQueryGenerator{}

var (
	queryPrefixes = []string{"", "how do I ", "I need to ", "help me ", "can you ", "I want to ", "please "}
	querySuffixes = []string{"", " for me", " now", " right away"}
)

// GenerateQueries returns req.Count distinct queries, or an error when the
// tool offers too little text to vary.
func (TemplateQueryGenerator) GenerateQueries(ctx context.Context, req QueryRequest) ([]string, error) {
	if req.Count <= 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	bases := queryBases(req.Tool)
	seen := map[string]bool{}
	for _, q := range req.Existing {
		seen[normalizeQuery(q)] = true
	}
	var out []string
	// Vary the phrasing before repeating a base, so a small count already
	// covers name, description and parameters.
	for _, suffix := range querySuffixes {
		for _, prefix := range queryPrefixes {
			for _, base := range bases {
				q := prefix + base + suffix
				if key := normalizeQuery(q); !seen[key] {
					seen[key] = true
					out = append(out, q)
					if len(out) == req.Count {
						return out, nil
					}
				}
			}
		}
	}
	return nil, &Error{Kind: KindInvalidInput, Provider: "builtin query generator",
		Err: fmt.Errorf("tool %s yields only %d distinct queries, %d wanted: lengthen its description or add exampleQueries", req.Tool.Name, len(out), req.Count)}
}

// queryBases returns the phrases queries are built from, most telling first:
// description clauses, the name as words, and the name with its parameters.
func queryBases(tool ToolSpec) []string {
	var bases []string
	for _, c := range descriptionClauses(tool.Description) {
		bases = append(bases, lowerFirst(c))
	}
	name := strings.Join(text.Words(tool.Name), " ")
	if name != "" {
		bases = append(bases, name)
	}
	if params := contract.ParameterNames(tool.Parameters); len(params) > 0 {
		var phrases []string
		for _, p := range params {
			phrases = append(phrases, strings.Join(text.Words(p), " "))
		}
		bases = append(bases, name+" by "+joinAnd(phrases))
		for _, p := range phrases {
			bases = append(bases, name+" with a given "+p)
		}
	}
	return bases
}

// descriptionClauses splits a description into sentences and clauses.
func descriptionClauses(desc string) []string {
	var out []string
	for _, sentence := range strings.FieldsFunc(desc, func(r rune) bool { return r == '.' || r == ';' || r == '\n' || r == '!' || r == '?' }) {
		sentence = strings.Join(strings.Fields(sentence), " ")
		if len(text.Words(sentence)) < 2 {
			continue
		}
		// "Get the weather for a city: temperature, wind" also yields
		// the shorter "Get the weather for a city".
		if head, _, ok := strings.Cut(sentence, ":"); ok && len(text.Words(head)) >= 2 {
			out = append(out, strings.TrimSpace(head))
		}
		out = append(out, sentence)
	}
	return out
}

func joinAnd(items []string) string {
	if len(items) <= 1 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

func lowerFirst(s string) string {
	for i, r := range s {
		return strings.ToLower(string(r)) + s[i+len(string(r)):]
	}
	return s
}
