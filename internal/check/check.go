// Package check judges tool manifests offline, as the cluster would:
// the API server's validation from the CustomResourceDefinitions (schema
// and CEL rules), the operator's own checks (the same functions the
// controllers call, so a message is the condition's word for word), lint
// rules with IDs, the operator's grading with the builtin model, and what
// a change costs. It reads files, never the network; kubectl toolcatalog
// check and cmd/toolcatalog-check run it in pull requests.
package check

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	kruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalogconfig"
	"github.com/toolcatalog/tool-catalog-operator/internal/mcpsource"
)

// Options configure a check.
type Options struct {
	// Config is the rule configuration (.toolcatalog-check.yaml).
	Config Config
	// Grade runs the operator's grading of each catalog with the builtin
	// model.
	Grade bool
	// Base, when set, is the input as it was before the change, named by
	// BaseLabel: the report then says what the change costs.
	Base      *Input
	BaseLabel string
}

// Report is what a check found.
type Report struct {
	// Findings are in order of file, line and rule; suppressed ones are
	// kept, marked.
	Findings []Finding
	// Counts of the objects checked.
	ToolDefinitions, ToolCatalogs, ToolSources, Others int
	// Catalogs holds the grading of each catalog, when graded.
	Catalogs []CatalogGrade
	// Change is what the change from the base costs, when a base was given.
	Change *Change
}

// Worst is the highest severity of the findings not suppressed, 0 for
// none.
func (r *Report) Worst() Severity {
	var worst Severity
	for _, f := range r.Findings {
		if f.Suppressed == "" && f.Severity > worst {
			worst = f.Severity
		}
	}
	return worst
}

// Count counts the findings of a severity, not suppressed.
func (r *Report) Count(s Severity) int {
	n := 0
	for _, f := range r.Findings {
		if f.Suppressed == "" && f.Severity == s {
			n++
		}
	}
	return n
}

// Set is the objects of an input, decoded.
type Set struct {
	Tools    []*ToolObject
	Catalogs []*CatalogObject
	Sources  []*SourceObject
	// sources finds Sources by namespace/name.
	sources map[string]*v1alpha1.ToolSource
}

// source finds a ToolSource of the input, nil when there is none.
func (s *Set) source(namespace, name string) *v1alpha1.ToolSource {
	return s.sources[namespace+"/"+name]
}

// ToolObject is a ToolDefinition of the input.
type ToolObject struct {
	*Object
	TD *v1alpha1.ToolDefinition
	// Refused says the API server would refuse it: it would never exist.
	Refused bool
}

// CatalogObject is a ToolCatalog of the input.
type CatalogObject struct {
	*Object
	TC      *v1alpha1.ToolCatalog
	Refused bool
}

// SourceObject is a ToolSource of the input.
type SourceObject struct {
	*Object
	TS      *v1alpha1.ToolSource
	Refused bool
}

// checker gathers the findings of one run.
type checker struct {
	opts     Options
	schemas  *Schemas
	findings []Finding
}

// Run checks the input.
func Run(ctx context.Context, in *Input, schemas *Schemas, opts Options) *Report {
	c := &checker{opts: opts, schemas: schemas}
	c.findings = append(c.findings, in.Findings...)
	// The base is decoded and selected on another core meanwhile.
	var base chan map[string]*selected
	if opts.Base != nil {
		base = make(chan map[string]*selected, 1)
		go func() { base <- c.selectBase(ctx, opts.Base) }()
	}
	set, others := c.decode(ctx, in.Objects)
	r := &Report{ToolDefinitions: len(set.Tools), ToolCatalogs: len(set.Catalogs), ToolSources: len(set.Sources), Others: len(others)}
	if len(others) > 0 {
		c.add(Finding{Rule: RuleOtherKinds, Message: fmt.Sprintf("%d objects of other kinds not checked: %s", len(others), summarizeKinds(others))})
	}
	selections := c.selections(set)
	c.validate(set, selections)
	c.lint(set, selections)
	var baseSel map[string]*selected
	var baseRuns map[string]*gradeRun
	if opts.Base != nil {
		baseSel = <-base
		if opts.Grade {
			// The base is graded first and each catalog's version after
			// the change from it, as the operator grades a new version.
			baseRuns = gradeBase(ctx, baseSel)
		}
	}
	if opts.Grade {
		r.Catalogs = c.grade(ctx, selections, baseRuns)
	}
	if opts.Base != nil {
		r.Change = c.change(opts.BaseLabel, baseSel, baseRuns, selections, r.Catalogs)
	}
	r.Findings = c.finish(set)
	return r
}

// decode validates each object of our group as the API server would and
// decodes those of the three kinds checked.
func (c *checker) decode(ctx context.Context, objects []*Object) (*Set, []*Object) {
	// Each object is validated and decoded on its own, as many at once as
	// there are CPUs; the findings and objects are then taken in order.
	results := make([]decoded, len(objects))
	var group errgroup.Group
	group.SetLimit(runtime.GOMAXPROCS(0))
	const chunk = 256
	for start := 0; start < len(objects); start += chunk {
		group.Go(func() error {
			for i := start; i < min(start+chunk, len(objects)); i++ {
				results[i] = c.decodeOne(ctx, objects[i])
			}
			return nil
		})
	}
	_ = group.Wait()

	set := &Set{sources: map[string]*v1alpha1.ToolSource{}}
	var others []*Object
	for i, o := range objects {
		d := results[i]
		if d.other {
			others = append(others, o)
			continue
		}
		c.findings = append(c.findings, d.findings...)
		switch {
		case d.td != nil:
			set.Tools = append(set.Tools, &ToolObject{Object: o, TD: d.td, Refused: d.refused})
		case d.tc != nil:
			set.Catalogs = append(set.Catalogs, &CatalogObject{Object: o, TC: d.tc, Refused: d.refused})
		case d.ts != nil:
			set.Sources = append(set.Sources, &SourceObject{Object: o, TS: d.ts, Refused: d.refused})
			set.sources[d.ts.Namespace+"/"+d.ts.Name] = d.ts
		}
	}
	return set, others
}

// decoded is what decodeOne made of an object.
type decoded struct {
	other    bool
	findings []Finding
	refused  bool
	td       *v1alpha1.ToolDefinition
	tc       *v1alpha1.ToolCatalog
	ts       *v1alpha1.ToolSource
}

// decodeOne validates an object of our group as the API server would and
// decodes it when it is of the three kinds checked.
func (c *checker) decodeOne(ctx context.Context, o *Object) decoded {
	u := &unstructured.Unstructured{Object: o.Content}
	gvk := u.GroupVersionKind()
	if !c.schemas.Knows(gvk.Group) {
		return decoded{other: true}
	}
	if u.GetNamespace() == "" {
		// kubectl apply sends the namespace of its context.
		u.SetNamespace(c.opts.Config.namespace())
	}
	var d decoded
	name := fmt.Sprintf("%s %s/%s", gvk.Kind, u.GetNamespace(), u.GetName())
	at := func(field string, f Finding) {
		f.File, f.Object = o.File, name
		f.Line, f.Column = o.Locate(field)
		d.findings = append(d.findings, f)
	}
	violations, err := c.schemas.Validate(ctx, o.Content)
	if err != nil {
		at("apiVersion", Finding{Rule: RuleUnknownVersion, Message: err.Error()})
		return d
	}
	for _, v := range violations {
		at(v.Field, Finding{Rule: RuleSchema, Message: v.Message})
	}
	d.refused = len(violations) > 0
	switch gvk.Kind {
	case "ToolDefinition":
		d.td = &v1alpha1.ToolDefinition{}
		err = kruntime.DefaultUnstructuredConverter.FromUnstructured(o.Content, d.td)
	case "ToolCatalog":
		d.tc = &v1alpha1.ToolCatalog{}
		err = kruntime.DefaultUnstructuredConverter.FromUnstructured(o.Content, d.tc)
	case "ToolSource":
		d.ts = &v1alpha1.ToolSource{}
		err = kruntime.DefaultUnstructuredConverter.FromUnstructured(o.Content, d.ts)
	}
	if err != nil {
		d.td, d.tc, d.ts = nil, nil, nil
		if !d.refused {
			at("", Finding{Rule: RuleSchema, Message: err.Error()})
		}
	}
	return d
}

// validate runs the operator's own checks of the objects the API server
// would store.
func (c *checker) validate(set *Set, selections []*selected) {
	for _, s := range set.Sources {
		if s.Refused {
			continue
		}
		// The patterns are checked as a sync checks them, before the
		// server is reached.
		if _, _, err := mcpsource.Convert(nil, mcpsource.Options{Include: s.TS.Spec.Include, Exclude: s.TS.Spec.Exclude}); err != nil {
			c.at(s.Object, "spec", Finding{Rule: RuleInvalidSpec, Object: objectName(s.TS), Message: err.Error()})
		}
	}
	for _, t := range set.Tools {
		if t.Refused {
			continue
		}
		var source *v1alpha1.ToolSource
		if ref := t.TD.Spec.Source; ref != nil && ref.ToolSource != "" {
			source = set.source(t.TD.Namespace, ref.ToolSource)
		}
		if invalid := catalog.ValidateSpec(t.TD, source); invalid != nil {
			rule := RuleInvalidSpec
			if invalid.Reason == v1alpha1.ReasonInvisibleCharacters {
				rule = RuleUnicode
			}
			c.at(t.Object, invalid.Field, Finding{Rule: rule, Object: objectName(t.TD), Tool: t.TD.Spec.Name,
				Message: fmt.Sprintf("Valid=False (%s): %s", invalid.Reason, invalid.Message)})
		}
	}
	for _, k := range set.Catalogs {
		if k.Refused {
			continue
		}
		if err := catalogconfig.CheckKeyPrefix(k.TC); err != nil {
			c.at(k.Object, "spec.redis.keyPrefix", Finding{Rule: RuleInvalidSpec, Object: objectName(k.TC), Message: err.Error()})
		}
		if _, err := metav1.LabelSelectorAsSelector(&k.TC.Spec.Selector); err != nil {
			c.at(k.Object, "spec.selector", Finding{Rule: RuleInvalidSpec, Object: objectName(k.TC), Message: fmt.Sprintf("spec.selector: %v", err)})
		}
	}
	for _, sel := range selections {
		for _, f := range sel.selection.Rejected {
			if f.Reason != v1alpha1.ReasonNameConflict {
				continue // reported above, once per ToolDefinition
			}
			t := sel.byObject[f.Object]
			c.at(t.Object, "spec.name", Finding{Rule: RuleNameConflict, Object: objectName(t.TD), Tool: f.Tool, Catalog: objectName(sel.catalog.TC), Message: f.Message})
		}
	}
}

// selected is a catalog and what its selector picks among the input's
// ToolDefinitions, as the controller's selection does.
type selected struct {
	catalog   *CatalogObject
	tools     []*ToolObject
	byObject  map[string]*ToolObject
	selection catalog.Selection
}

// selections selects each catalog's tools (those the API server would
// store), kept for the run.
func (c *checker) selections(set *Set) []*selected {
	var out []*selected
	for _, k := range set.Catalogs {
		if k.Refused {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&k.TC.Spec.Selector)
		if err != nil {
			continue
		}
		s := &selected{catalog: k, byObject: map[string]*ToolObject{}}
		var tds []v1alpha1.ToolDefinition
		for _, t := range set.Tools {
			if t.Refused || t.TD.Namespace != k.TC.Namespace || !sel.Matches(labels.Set(t.TD.Labels)) {
				continue
			}
			s.tools = append(s.tools, t)
			s.byObject[t.TD.Name] = t
			tds = append(tds, *t.TD)
		}
		ns := k.TC.Namespace
		s.selection, err = catalog.Select(tds, func(name string) *v1alpha1.ToolSource { return set.source(ns, name) })
		if err != nil {
			c.at(k.Object, "spec.selector", Finding{Rule: RuleInvalidSpec, Object: objectName(k.TC), Message: err.Error()})
			continue
		}
		out = append(out, s)
	}
	return out
}

// at adds a finding located at a field of an object.
func (c *checker) at(o *Object, field string, f Finding) {
	f.File = o.File
	f.Line, f.Column = o.Locate(field)
	c.add(f)
}

func (c *checker) add(f Finding) {
	c.findings = append(c.findings, f)
}

// finish sets each finding's severity from the configuration, drops the
// rules turned off, applies the objects' check-ignore annotations and
// sorts.
func (c *checker) finish(set *Set) []Finding {
	ignores := map[string]map[string]string{}
	note := func(o *Object, meta metav1.Object) {
		value, ok := meta.GetAnnotations()[v1alpha1.AnnotationCheckIgnore]
		if !ok {
			return
		}
		rules, problems := parseIgnore(value)
		ignores[objectKey(o)] = rules
		for _, p := range problems {
			c.at(o, "metadata.annotations", Finding{Rule: RuleBadIgnore, Object: objectName(meta), Message: p})
		}
	}
	for _, t := range set.Tools {
		note(t.Object, t.TD)
	}
	for _, k := range set.Catalogs {
		note(k.Object, k.TC)
	}
	for _, s := range set.Sources {
		note(s.Object, s.TS)
	}
	objects := map[string]*Object{}
	for _, t := range set.Tools {
		objects[objectName(t.TD)] = t.Object
	}
	for _, k := range set.Catalogs {
		objects[objectName(k.TC)] = k.Object
	}
	for _, s := range set.Sources {
		objects[objectName(s.TS)] = s.Object
	}
	out := make([]Finding, 0, len(c.findings))
	for _, f := range c.findings {
		rule, _ := RuleByID(f.Rule)
		f.Severity = c.opts.Config.severity(rule)
		if f.Severity == 0 {
			continue
		}
		if o := objects[f.Object]; o != nil && f.Object != "" {
			if reason, ok := ignores[objectKey(o)][f.Rule]; ok {
				if rule.Cluster {
					out = append(out, Finding{Rule: RuleBadIgnore, Severity: c.opts.Config.severity(mustRule(RuleBadIgnore)), File: f.File, Line: f.Line, Column: f.Column, Object: f.Object,
						Message: fmt.Sprintf("%s cannot be ignored: the cluster refuses what it finds, whatever the check says", f.Rule)})
				} else {
					f.Suppressed = reason
				}
			}
		}
		out = append(out, f)
	}
	sortFindings(out)
	return slices.CompactFunc(out, func(a, b Finding) bool { return a == b })
}

// parseIgnore reads a check-ignore annotation: a line "RULE: reason" per
// rule.
func parseIgnore(value string) (map[string]string, []string) {
	rules := map[string]string{}
	var problems []string
	for line := range strings.Lines(value) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		id, reason, _ := strings.Cut(line, ":")
		id, reason = strings.TrimSpace(id), strings.TrimSpace(reason)
		if _, ok := RuleByID(id); !ok {
			problems = append(problems, fmt.Sprintf("%s %q names no rule: write one \"RULE: reason\" per line, as \"TC102: the tool's name says it all\"", v1alpha1.AnnotationCheckIgnore, line))
			continue
		}
		if reason == "" {
			problems = append(problems, fmt.Sprintf("%s silences %s without a reason: write \"%s: why it does not apply here\"", v1alpha1.AnnotationCheckIgnore, id, id))
			continue
		}
		rules[id] = reason
	}
	return rules, problems
}

func mustRule(id string) Rule {
	r, _ := RuleByID(id)
	return r
}

func objectKey(o *Object) string {
	return fmt.Sprintf("%s:%d:%d", o.File, o.Line, o.Column)
}

// objectName is how findings name an object: Kind namespace/name.
func objectName(o metav1.Object) string {
	kind := "object"
	switch o.(type) {
	case *v1alpha1.ToolDefinition:
		kind = "ToolDefinition"
	case *v1alpha1.ToolCatalog:
		kind = "ToolCatalog"
	case *v1alpha1.ToolSource:
		kind = "ToolSource"
	}
	return kind + " " + o.GetNamespace() + "/" + o.GetName()
}

// summarizeKinds says which kinds objects are, most common first.
func summarizeKinds(objects []*Object) string {
	counts := map[string]int{}
	for _, o := range objects {
		kind, _ := o.Content["kind"].(string)
		counts[kind]++
	}
	kinds := make([]string, 0, len(counts))
	for k := range counts {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool {
		if counts[kinds[i]] != counts[kinds[j]] {
			return counts[kinds[i]] > counts[kinds[j]]
		}
		return kinds[i] < kinds[j]
	})
	parts := make([]string, 0, len(kinds))
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
	}
	return strings.Join(parts, ", ")
}
