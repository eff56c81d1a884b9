package check

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalogconfig"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
)

// lint runs the lint rules: each tool's texts and parameters, and each
// catalog's names and always-included tools.
func (c *checker) lint(set *Set, selections []*selected) {
	for _, t := range set.Tools {
		c.lintTool(t)
	}
	selectedAny := map[*ToolObject]bool{}
	for _, s := range selections {
		for _, t := range s.tools {
			selectedAny[t] = true
		}
		c.lintNames(s.tools, objectName(s.catalog.TC))
		c.lintAlways(s)
	}
	// Tools no catalog of the input selects are compared within their
	// namespace.
	byNamespace := map[string][]*ToolObject{}
	for _, t := range set.Tools {
		if !selectedAny[t] && !t.Refused {
			byNamespace[t.TD.Namespace] = append(byNamespace[t.TD.Namespace], t)
		}
	}
	for _, ns := range slices.Sorted(maps.Keys(byNamespace)) {
		c.lintNames(byNamespace[ns], "")
	}
}

func (c *checker) lintTool(t *ToolObject) {
	td := t.TD
	name := objectName(td)
	add := func(field string, f Finding) {
		f.Object, f.Tool = name, td.Spec.Name
		c.at(t.Object, field, f)
	}
	desc := strings.TrimSpace(td.Spec.Description)
	switch n := utf8.RuneCountInString(desc); {
	case n == 0:
		add("spec.description", Finding{Rule: RuleDescriptionMissing, Message: "the description is blank: say what the tool does and when to use it"})
	case n < c.opts.Config.minLength():
		add("spec.description", Finding{Rule: RuleDescriptionShort, Message: fmt.Sprintf("the description has %d characters, fewer than %d: say what the tool acts on, what it returns and when to use it", n, c.opts.Config.minLength())})
	}
	if tokens := estimateTokens(td.Spec.Description); tokens > c.opts.Config.maxTokens() {
		add("spec.description", Finding{Rule: RuleDescriptionLong, Message: fmt.Sprintf("the description takes about %d tokens, more than %d: every request that sends the tool pays for it", tokens, c.opts.Config.maxTokens())})
	}
	texts := []struct{ field, value string }{{"spec.description", td.Spec.Description}}
	if a := td.Spec.Annotations; a != nil && a.Title != "" {
		texts = append(texts, struct{ field, value string }{"spec.annotations.title", a.Title})
	}
	var schema map[string]any
	if raw := catalog.Parameters(td); len(raw) > 0 && json.Unmarshal(raw, &schema) == nil {
		walkProperties(schema, "spec.parameters", func(field, prop string, s map[string]any, required bool) {
			d, _ := s["description"].(string)
			if d != "" {
				texts = append(texts, struct{ field, value string }{field + ".description", d})
			}
			switch {
			case strings.TrimSpace(d) == "" && required:
				add(field, Finding{Rule: RuleRequiredUndescr, Message: fmt.Sprintf("required parameter %q has no description", prop)})
			case strings.TrimSpace(d) == "":
				add(field, Finding{Rule: RuleParamUndescribed, Message: fmt.Sprintf("parameter %q has no description", prop)})
			}
			if values, ok := s["enum"].([]any); ok && strings.TrimSpace(d) != "" {
				if missing := unexplained(values, d); len(missing) > 0 {
					add(field, Finding{Rule: RuleEnumUnexplained, Message: fmt.Sprintf("parameter %q: its description does not say what %s mean", prop, strings.Join(missing, ", "))})
				}
			}
		})
	}
	for _, text := range texts {
		if m := steering(text.value); m != "" {
			add(text.field, Finding{Rule: RuleSteersTools, Message: fmt.Sprintf("%s tells the model how to treat other tools or its instructions (%q): describe what this tool does, nothing else", text.field, m)})
		}
	}
}

// walkProperties calls fn for each property of an object schema, and of
// the object schemas of its properties and array items, with its field
// path.
func walkProperties(schema map[string]any, field string, fn func(field, name string, s map[string]any, required bool)) {
	props, _ := schema["properties"].(map[string]any)
	required := map[string]bool{}
	if req, ok := schema["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(props)) {
		s, ok := props[name].(map[string]any)
		if !ok {
			continue
		}
		path := field + ".properties." + name
		fn(path, name, s, required[name])
		walkProperties(s, path, fn)
		if items, ok := s["items"].(map[string]any); ok {
			walkProperties(items, path+".items", fn)
		}
	}
}

// unexplained lists the enum values a description does not mention.
func unexplained(values []any, description string) []string {
	lower := strings.ToLower(description)
	var missing []string
	for _, v := range values {
		s := strings.ToLower(fmt.Sprint(v))
		if s == "" || !strings.Contains(lower, s) {
			missing = append(missing, fmt.Sprintf("%q", fmt.Sprint(v)))
		}
	}
	return missing
}

// steers are the phrasings of tool poisoning: text that tells a model to
// disregard its instructions, to avoid or distrust other tools, to prefer
// this one, or that hides orders in markup a person skims past.
var steers = []*regexp.Regexp{
	regexp.MustCompile(`(?i)\b(ignore|disregard|forget|override)\b[^.!?\n]{0,30}\b(previous|prior|above|earlier|system|all|other|any)\b[^.!?\n]{0,20}\b(instructions?|prompts?|rules|directions|guidelines|tools?)\b`),
	regexp.MustCompile(`(?i)\b(do not|don't|never|must not|should not)\b[^.!?\n]{0,20}\b(use|call|invoke|run|trust|select|choose|consider)\b[^.!?\n]{0,20}\b(other|another|any other|different|competing)\b[^.!?\n]{0,10}\btools?\b`),
	regexp.MustCompile(`(?i)\b(always|only)\b[^.!?\n]{0,15}\b(use|call|invoke|choose|select|prefer)\b[^.!?\n]{0,10}\bthis tool\b`),
	regexp.MustCompile(`(?i)\b(instead of|rather than|in place of)\b[^.!?\n]{0,20}\b(other|another|any|the)\b[^.!?\n]{0,30}\btools?\b`),
	regexp.MustCompile(`(?i)\bprefer\b[^.!?\n]{0,15}\bthis tool\b`),
	regexp.MustCompile(`(?i)\bthis tool\b[^.!?\n]{0,20}\b(replaces|supersedes|overrides)\b`),
	regexp.MustCompile(`(?i)<\s*/?\s*(important|system|instructions?|secret|hidden)\s*>`),
	regexp.MustCompile(`(?i)\b(do not|don't|never)\b[^.!?\n]{0,20}\b(tell|inform|mention|reveal|show)\b[^.!?\n]{0,20}\b(the )?user\b`),
}

// steering returns the first poisoning phrase of text, "" for none.
func steering(text string) string {
	for _, re := range steers {
		if m := re.FindString(text); m != "" {
			return m
		}
	}
	return ""
}

// estimateTokens is the rule of thumb package toolcatalog estimates a
// tool's schema by: about four bytes a token.
func estimateTokens(s string) int { return (len(s) + 3) / 4 }

// lintNames finds tool names that differ only by case or separators.
func (c *checker) lintNames(tools []*ToolObject, catalogName string) {
	groups := map[string][]*ToolObject{}
	for _, t := range tools {
		if t.Refused {
			continue
		}
		key := foldName(t.TD.Spec.Name)
		groups[key] = append(groups[key], t)
	}
	for _, key := range slices.Sorted(maps.Keys(groups)) {
		group := groups[key]
		names := map[string]bool{}
		for _, t := range group {
			names[t.TD.Spec.Name] = true
		}
		if len(names) < 2 {
			continue // one name: the same name is a conflict, not a likeness
		}
		for _, t := range group {
			var others []string
			for n := range names {
				if n != t.TD.Spec.Name {
					others = append(others, fmt.Sprintf("%q", n))
				}
			}
			slices.Sort(others)
			where := "in namespace " + t.TD.Namespace
			if catalogName != "" {
				where = "in " + catalogName
			}
			c.at(t.Object, "spec.name", Finding{Rule: RuleNamesAlike, Object: objectName(t.TD), Tool: t.TD.Spec.Name, Catalog: catalogName,
				Message: fmt.Sprintf("tool name %q differs from %s %s only by case or separators", t.TD.Spec.Name, strings.Join(others, ", "), where)})
		}
	}
}

// foldName is a name without case and separators.
func foldName(name string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '_', '-', '.', ' ', '/', ':':
			return -1
		}
		return r
	}, strings.ToLower(name))
}

// lintAlways weighs a catalog's always-included tools against its
// disclosure budget: the share of the context window auto mode lets the
// other tools take.
func (c *checker) lintAlways(s *selected) {
	tc := s.catalog.TC
	d := catalogconfig.DisclosureOf(tc.Spec.Disclosure)
	budget := int(d.Threshold * float64(d.ContextWindow))
	named := map[string]bool{}
	for _, n := range tc.Spec.Search.AlwaysInclude {
		named[n] = true
	}
	total := 0
	var core []string
	for _, t := range s.selection.Tools {
		if t.Entry.AlwaysInclude || named[t.Entry.Name] {
			total += toolcatalog.EstimateTokens(t.Entry)
			core = append(core, t.Entry.Name)
		}
	}
	if total <= budget {
		return
	}
	c.at(s.catalog.Object, "spec", Finding{Rule: RuleAlwaysOverBudget, Object: objectName(tc), Catalog: objectName(tc),
		Message: fmt.Sprintf("the %d always-included tools (%s) take about %d tokens, more than the disclosure budget of %d (threshold %.2f of a %d-token context window): every request carries them", len(core), catalog.ListNames(core), total, budget, d.Threshold, d.ContextWindow)})
}
