package embedding

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/text"
)

// TemplateQueryGenerator is the builtin offline query generator. It writes
// the requests a user might type for a tool: each description clause and
// the tool's name as words, phrased as a command ("Get the weather for a
// city"), a question ("Can you get the weather for a city?") and a goal
// ("I need to get the weather for a city"), and the name with its
// parameters filled with example values or placeholders ("get weather for
// location {location}"). Output depends only on the request, so it is
// identical across runs and processes.
type TemplateQueryGenerator struct{}

var _ QueryGenerator = TemplateQueryGenerator{}

// GenerateQueries returns req.Count distinct queries, or an error when the
// tool offers too little text to vary.
func (TemplateQueryGenerator) GenerateQueries(ctx context.Context, req QueryRequest) ([]string, error) {
	if req.Count <= 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, q := range req.Existing {
		seen[normalizeQuery(q)] = true
	}
	var out []string
	for _, q := range templateQueries(req.Tool) {
		if key := normalizeQuery(q); !seen[key] {
			seen[key] = true
			out = append(out, q)
			if len(out) == req.Count {
				return out, nil
			}
		}
	}
	return nil, &Error{Kind: KindInvalidInput, Provider: "builtin query generator",
		Err: fmt.Errorf("tool %s yields only %d distinct queries, %d wanted: lengthen its description or add exampleQueries", req.Tool.Name, len(out), req.Count)}
}

// templateQueries lists every query the templates make of a tool, in the
// order they are used: the phrasings of each description clause and of
// the name are taken in turn, so that a small count already covers the
// description's first clause as a command and a question, the name with
// its arguments, and the other clauses.
func templateQueries(tool ToolSpec) []string {
	var lists [][]string
	clauses := descriptionClauses(tool.Description)
	name := strings.Join(text.Parts(tool.Name), " ")
	nameForms := phrasings(name)
	if args := argumentPhrase(tool.Parameters); args != "" && name != "" {
		nameForms = append([]string{name + " for " + args}, nameForms...)
	}
	for i, c := range clauses {
		lists = append(lists, phrasings(c))
		if i == 0 && name != "" {
			lists = append(lists, nameForms)
		}
	}
	if len(clauses) == 0 && name != "" {
		lists = append(lists, nameForms)
	}
	var out []string
	for round := 0; ; round++ {
		added := false
		for _, l := range lists {
			if round < len(l) {
				out = append(out, l[round])
				added = true
			}
		}
		if !added {
			return out
		}
	}
}

// phrasings turns a clause into requests: a command, a question and a
// goal first, then politer and shorter variants. A clause that starts with
// a verb ("Gets the weather") is asked for as an action; any other
// ("Weather forecasts for travellers") as a thing wanted.
func phrasings(clause string) []string {
	if clause == "" {
		return nil
	}
	if vp, ok := verbPhrase(clause); ok {
		return []string{
			upperFirst(vp),
			"Can you " + vp + "?",
			"I need to " + vp,
			"How do I " + vp + "?",
			"I want to " + vp,
			"Help me " + vp,
			"Please " + vp,
			vp + " for me",
			"Could you " + vp + " now?",
			"Is there a way to " + vp + "?",
			"I'd like to " + vp,
			"What's the easiest way to " + vp + "?",
			"Is it possible to " + vp + "?",
			"Let's " + vp,
			"Quick one: " + vp,
			"Go ahead and " + vp,
		}
	}
	np := lowerFirst(clause)
	return []string{
		upperFirst(np),
		"I'm looking for " + np,
		"Is there a tool for " + np + "?",
		"Find " + np,
		"I need " + np,
		"Where can I get " + np + "?",
		"Help me with " + np,
		"Show me " + np,
		"Use " + np + " for me",
		"Can you help with " + np + "?",
		"Do you have " + np + "?",
		"I'd like " + np,
		"Get me " + np,
		"Any options for " + np + "?",
		"Looking for " + np,
		"What can I use for " + np + "?",
	}
}

// verbPhrase returns the clause in the base form of its leading verb
// ("Retrieves the list" → "retrieve the list"), or false when it does
// not start with a common verb.
func verbPhrase(clause string) (string, bool) {
	first, rest, _ := strings.Cut(clause, " ")
	w := strings.ToLower(strings.TrimFunc(first, func(r rune) bool { return !unicode.IsLetter(r) }))
	base := ""
	switch {
	case commonVerbs[w]:
		base = w
	case strings.HasSuffix(w, "ies") && commonVerbs[strings.TrimSuffix(w, "ies")+"y"]:
		base = strings.TrimSuffix(w, "ies") + "y"
	case strings.HasSuffix(w, "es") && commonVerbs[strings.TrimSuffix(w, "es")]:
		base = strings.TrimSuffix(w, "es")
	case strings.HasSuffix(w, "s") && commonVerbs[strings.TrimSuffix(w, "s")]:
		base = strings.TrimSuffix(w, "s")
	case determiners[strings.ToLower(strings.Fields(rest + " x")[0])]:
		// "Renew the due date": a word before an article acts on it.
		base = w
	default:
		return "", false
	}
	if rest == "" {
		return base, true
	}
	return base + " " + rest, true
}

// commonVerbs are verbs tool descriptions start with.
var commonVerbs = setOf(`access add adjust aggregate alert analyze analyse answer apply approve archive ask assess
assign book browse build calculate call cancel categorize change check classify clean close collect
compare compile compose compute configure connect control convert copy count create crop deploy describe
design detect determine diagnose discover display download draft edit enable encrypt estimate evaluate
execute explain explore export extract fetch filter find fix forecast format generate get give help
identify import improve inspect install join list load locate log look manage map measure merge modify
monitor move notify obtain open optimize order organize pay perform plan play post predict prepare
process provide publish query read recommend record register remove rename render reply report request
reserve reset resize resolve restart restore retrieve return review rotate run save scan schedule score
search select send set share show simulate sort start stop store submit suggest summarize sync track
train transcribe transfer transform translate turn unlock update upload use validate verify view visualize
watch write`)

// determiners start the object of a leading verb.
var determiners = setOf(`a an the all any each every my your their its this these those some`)

func setOf(words string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.Fields(words) {
		out[w] = true
	}
	return out
}

// exampleValue finds the first example a parameter description gives:
// "The city (e.g., Paris, Rome)" → "Paris".
var exampleValue = regexp.MustCompile(`(?i)\b(?:e\.g\.|for example|such as)[,:]?\s*([^,;)]+)`)

// argumentPhrase writes up to three parameters, required ones first, with
// a value each: the first example their description gives, else the
// first value of their enum, else a placeholder ("location {location}").
func argumentPhrase(schema []byte) string {
	params := contract.Parameters(schema)
	var parts []string
	for _, p := range params[:min(len(params), 3)] {
		value := "{" + p.Name + "}"
		if m := exampleValue.FindStringSubmatch(p.Description); m != nil {
			if v := strings.Trim(strings.TrimSpace(m[1]), `'"`); v != "" {
				value = v
			}
		} else if len(p.Enum) > 0 {
			value = p.Enum[0]
		}
		parts = append(parts, strings.Join(text.Parts(p.Name), " ")+" "+value)
	}
	return joinAnd(parts)
}

// descriptionClauses splits a description into sentences and clauses,
// without their final punctuation.
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

// lowerFirst lower-cases the first letter unless the first word is an
// acronym ("API", "U.S.").
func lowerFirst(s string) string {
	first, _, _ := strings.Cut(s, " ")
	upper := 0
	for _, r := range first {
		if unicode.IsUpper(r) {
			upper++
		}
	}
	if upper > 1 {
		return s
	}
	for i, r := range s {
		return string(unicode.ToLower(r)) + s[i+len(string(r)):]
	}
	return s
}

func upperFirst(s string) string {
	for i, r := range s {
		return string(unicode.ToUpper(r)) + s[i+len(string(r)):]
	}
	return s
}
