package catalog

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
)

// Action is what a pass does for one tool.
type Action int

const (
	// ActionNone leaves the tool as stored.
	ActionNone Action = iota
	// ActionEmbed recomputes the vector from the stored query set.
	ActionEmbed
	// ActionRegenerate writes new synthetic queries (keeping the curated
	// example queries) and embeds them.
	ActionRegenerate
)

func (a Action) String() string {
	return [...]string{"none", "embed", "regenerate"}[a]
}

// modeNormal is a pass without a refresh request (or with targets only).
const modeNormal v1alpha1.RefreshMode = ""

// PlanInput is everything a pass's plan depends on.
type PlanInput struct {
	Tools  []*Tool
	Stored StoredTools
	// Model and Dimensions identify the configured embedding; Dimensions
	// 0 means any length is accepted.
	Model      string
	Dimensions int
	// QueriesPerTool is the expected size of a query set.
	QueriesPerTool int
	// Mode and Targets come from a refresh request; empty Targets means
	// every tool.
	Mode    v1alpha1.RefreshMode
	Targets []string
	// Learned are the recorded requests each tool's vector should also be
	// built from (Learn); nil when the catalog does not learn.
	Learned map[string][]string
	// Lineage names the state Stored is the tools of (Stored.Lineage):
	// a Planner plans again only what changed since the state it last
	// planned from.
	Lineage Lineage
}

// ToolPlan is the plan for one tool.
type ToolPlan struct {
	// Tool is the selected tool, read-only (see Selection); Name is its
	// spec.name.
	Tool *Tool
	Name string
	// Stale says the stored vector does not match the current spec or
	// model; StaleReason says how.
	Stale       bool
	StaleReason string
	// Invalid says the stored query set cannot be used as is.
	Invalid       bool
	InvalidReason string
	// Action is what this pass does.
	Action Action
	// Deferred is true when the tool needs work this pass does not do
	// because of the refresh mode; a normal pass follows.
	Deferred bool
	// Queries are the queries kept: the stored set for ActionEmbed, the
	// curated examples for ActionRegenerate.
	Queries []string
	// Generate is how many queries to generate (ActionRegenerate).
	Generate int
	// Learned are the recorded requests embedded with the queries.
	Learned []string
	// Relearn says the tool is re-embedded only because its learned
	// requests changed.
	Relearn bool
	// Stored is the tool's stored state (PlanInput.Stored), the zero
	// value when there is none.
	Stored StoredTool
}

// ExpectedQueries is the size of a tool's query set: queriesPerTool, or
// more when more example queries are curated (they are never dropped).
func ExpectedQueries(queriesPerTool int, examples []string) int {
	return max(queriesPerTool, len(examples))
}

// Plan classifies every tool and decides this pass's action for it.
//
// Stale: the spec hash or the embedding model/dimensions differ from what
// was embedded, the metadata is missing or unreadable, or the vector is
// missing. Invalid: the stored query set is missing, not of the expected
// size, has an empty entry, or lacks a curated example query.
//
// A normal pass regenerates queries where the spec changed or the set is
// invalid and re-embeds where only the model or vector is off. force
// regenerates every targeted tool; invalid-only only handles targeted tools
// with invalid sets; embed-only re-embeds targeted tools from their stored
// queries and generates nothing. A refresh with targets and no mode forces
// those targets.
func Plan(in PlanInput) []ToolPlan {
	targeted := map[string]bool{}
	for _, t := range in.Targets {
		targeted[t] = true
	}
	mode := in.Mode
	if mode == modeNormal && len(in.Targets) > 0 {
		mode = v1alpha1.RefreshModeForce
	}
	// Each tool's plan depends on the tool alone: a large catalog's are
	// made on every core, each plan a look-up in the stored state that
	// mostly misses the CPU's caches.
	plans := make([]ToolPlan, len(in.Tools))
	parallel(len(in.Tools), func(i int) {
		plans[i] = planTool(in.Tools[i], in, mode, targeted)
	})
	return plans
}

// Planner is Plan with a memory. A pass in normal mode after another
// plans again only the tools whose selected entry is new (Selector) or
// whose stored entry the last publish changed (Lineage), and takes the
// last pass's plans of the others that needed nothing: at 100,000 tools,
// planning every tool is a look-up in the stored state per tool, each
// missing the CPU's caches, to find that one changed. A refresh request,
// a learning catalog or another model plans everything. It is safe for
// concurrent use; the plans it returns are its own until its next call,
// which writes the plans it makes anew over them (the plans of 100,000
// tools are 20 MB, which a pass would otherwise allocate and drop).
type Planner struct {
	mu sync.Mutex
	// key, gen and plans are the last normal pass's settings, stored
	// state and plans; gen 0 when there are none to reuse. set numbers
	// those plans (Reuse.Set).
	key   planKey
	gen   uint64
	plans []ToolPlan
	set   uint64
}

// Reuse says which of a Planner's plans repeat the plans of its last
// call, so what is derived from each plan (Outcome.Records) is derived
// again only for the others.
type Reuse struct {
	// Set numbers the plans, unique in the process (0 for plans that are
	// not repeated by a later call); Base is the Set of the plans they
	// repeat at every place but Replanned, 0 when none are repeated.
	Set, Base uint64
	// Replanned lists, in order, the places of the plans made anew.
	Replanned []int
}

// planSets numbers the Planners' plans.
var planSets atomic.Uint64

// planKey is what a plan depends on besides its tool and stored entry.
type planKey struct {
	model                      string
	dimensions, queriesPerTool int
}

// Plan is the package's Plan, reusing what it can of the last call's,
// and says which plans it reused.
func (p *Planner) Plan(in PlanInput) ([]ToolPlan, Reuse) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := planKey{model: in.Model, dimensions: in.Dimensions, queriesPerTool: in.QueriesPerTool}
	normal := in.Mode == modeNormal && len(in.Targets) == 0 && in.Learned == nil
	changed, known := in.Lineage.ChangedSince(p.gen)
	var plans []ToolPlan
	var reuse Reuse
	// Past an eighth of the tools changed (a bulk apply's versions), a
	// search for each costs more than planning every tool.
	if normal && known && key == p.key && len(p.plans) == len(in.Tools) && len(changed) <= len(in.Tools)/8 {
		plans, reuse.Replanned = p.replan(in, changed)
		reuse.Base = p.set
	} else {
		plans = Plan(in)
	}
	p.key, p.gen, p.plans, p.set = key, 0, nil, 0
	if !normal || in.Lineage.gen == 0 {
		return plans, Reuse{}
	}
	p.gen, p.plans, p.set = in.Lineage.gen, plans, planSets.Add(1)
	reuse.Set = p.set
	if reuse.Base == 0 {
		reuse.Replanned = nil
	}
	return plans, reuse
}

// replan keeps, in the last call's plans, the plan of each tool at the
// same place with the same entry that needed nothing, and plans the
// others and those of changed anew, over the last plans; it returns the
// plans and the places planned anew.
func (p *Planner) replan(in PlanInput, changed map[string]bool) ([]ToolPlan, []int) {
	plans := p.plans
	var replanned []int
	for i, t := range in.Tools {
		if pl := &plans[i]; pl.Tool != t || !reusable(pl) {
			replanned = append(replanned, i)
		}
	}
	// The selection is in order of name: each changed tool is found
	// without reading the others' names.
	for name := range changed {
		if i, ok := slices.BinarySearchFunc(in.Tools, name, func(t *Tool, name string) int { return strings.Compare(t.Entry.Name, name) }); ok {
			replanned = append(replanned, i)
		}
	}
	slices.Sort(replanned)
	replanned = slices.Compact(replanned)
	parallel(len(replanned), func(k int) {
		i := replanned[k]
		plans[i] = planTool(in.Tools[i], in, modeNormal, nil)
	})
	return plans, replanned
}

// reusable reports whether a plan needed nothing, so the next pass takes
// it while its tool and stored entry are the same.
func reusable(pl *ToolPlan) bool { return pl.Action == ActionNone && !pl.Deferred }

// Holds is how many tools' plans the planner keeps for the next call.
func (p *Planner) Holds() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for i := range p.plans {
		if reusable(&p.plans[i]) {
			n++
		}
	}
	return n
}

// Forget drops what the planner keeps: the next call plans everything.
func (p *Planner) Forget() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.key, p.gen, p.plans, p.set = planKey{}, 0, nil, 0
}

// planTool is Plan for one tool, in the pass's mode.
func planTool(t *Tool, in PlanInput, mode v1alpha1.RefreshMode, targeted map[string]bool) ToolPlan {
	stored, found := in.Stored.Lookup(t.Entry.Name)
	p := classify(t, stored, found, in)
	normal := normalAction(p)
	isTarget := len(in.Targets) == 0 || targeted[t.Entry.Name]
	switch {
	case mode == modeNormal || !isTarget:
		// Non-targeted tools of a forced refresh get normal work;
		// restricted modes leave them for the next pass.
		if mode == modeNormal || mode == v1alpha1.RefreshModeForce {
			p.Action = normal
		}
	case mode == v1alpha1.RefreshModeForce:
		p.Action = ActionRegenerate
	case mode == v1alpha1.RefreshModeInvalidOnly:
		if p.Invalid {
			p.Action = ActionRegenerate
		}
	case mode == v1alpha1.RefreshModeEmbedOnly:
		// Only a tool whose queries still describe its spec can be
		// re-embedded without generating.
		if !p.Invalid && !specChanged(p) {
			p.Action = ActionEmbed
		}
	}
	p.Deferred = p.Action == ActionNone && normal != ActionNone
	learned := in.Learned[t.Entry.Name]
	if p.Action == ActionNone && normal == ActionNone && (mode == modeNormal || mode == v1alpha1.RefreshModeForce) &&
		stored.Metadata != nil && !slices.Equal(learned, stored.Metadata.LearnedQueries) {
		p.Action, p.Relearn = ActionEmbed, true
	}
	if p.Action != ActionNone {
		p.Learned = learned
	}
	expected := ExpectedQueries(in.QueriesPerTool, t.Examples)
	switch p.Action {
	case ActionEmbed:
		p.Queries = append([]string(nil), stored.Metadata.SyntheticQueries...)
	case ActionRegenerate:
		p.Queries = append([]string(nil), t.Examples...)
		p.Generate = expected - len(t.Examples)
	}
	return p
}

// Stale reasons.
const (
	StaleNew         = "not embedded yet"
	StaleUnreadable  = "stored metadata is unreadable"
	StaleSpecChanged = "spec changed since it was embedded"
	StaleModel       = "embedding model changed"
	StaleNoVector    = "vector is missing"
)

// classify says whether t is stale and its query set invalid; stored is
// its stored state, found false when it has none.
func classify(t *Tool, stored StoredTool, found bool, in PlanInput) ToolPlan {
	p := ToolPlan{Tool: t, Name: t.Entry.Name, Stored: stored}
	m := stored.Metadata
	switch {
	case !found || (m == nil && stored.MetadataErr == nil):
		p.Stale, p.StaleReason = true, StaleNew
	case m == nil:
		p.Stale, p.StaleReason = true, StaleUnreadable
	case m.SpecHash != t.Entry.SpecHash:
		p.Stale, p.StaleReason = true, StaleSpecChanged
	case m.Model != in.Model || (in.Dimensions > 0 && m.Dimensions != in.Dimensions):
		p.Stale, p.StaleReason = true, StaleModel
	case !stored.HasVector:
		p.Stale, p.StaleReason = true, StaleNoVector
	}
	if m == nil {
		p.Invalid, p.InvalidReason = true, "no stored query set"
		return p
	}
	if reason := invalidQuerySet(m.SyntheticQueries, ExpectedQueries(in.QueriesPerTool, t.Examples), t.Examples); reason != "" {
		p.Invalid, p.InvalidReason = true, reason
	}
	return p
}

func specChanged(p ToolPlan) bool {
	return p.Stale && (p.StaleReason == StaleNew || p.StaleReason == StaleUnreadable || p.StaleReason == StaleSpecChanged)
}

func normalAction(p ToolPlan) Action {
	switch {
	case p.Invalid || specChanged(p):
		return ActionRegenerate
	case p.Stale:
		return ActionEmbed
	}
	return ActionNone
}

// invalidQuerySet says what is wrong with a stored query set, or "".
func invalidQuerySet(queries []string, expected int, examples []string) string {
	if len(queries) != expected {
		return fmt.Sprintf("stored query set has %d entries, want %d", len(queries), expected)
	}
	for i, q := range queries {
		if strings.TrimSpace(q) == "" {
			return fmt.Sprintf("stored query %d is empty", i+1)
		}
	}
	for _, e := range examples {
		if !slices.Contains(queries, e) {
			return fmt.Sprintf("stored query set lacks the example query %q", e)
		}
	}
	return ""
}
