package catalog

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/pkg/clip"
)

// Records are the ToolDefinitions' records of a catalog as an outcome
// says them. They are all the records writer keeps of an outcome: the
// plans, the stored state and the new vectors are not, and a record is
// derived when it is written, from the one the ToolDefinition has, so
// no map of every ToolDefinition's record is made per turn.
//
// A pass whose plans repeat the last pass's but for a few (Outcome.Reuse)
// derives the records of those few, laid over the last records' (patch),
// which it shares: what an edit costs does not grow with the catalog.
type Records struct {
	// Catalog is the ToolCatalog's name; Version the catalog's version
	// after the pass.
	Catalog string
	Version int64
	// set is the plans these records are of (Reuse.Set), blocked the
	// build's Blocked, which a plan's record depends on.
	set     uint64
	blocked string
	// plans holds a record per plan, in the plans' order, and patch the
	// records at the places whose plans were made since plans was, by
	// place, with patchAt finding them by object; plans may be shared
	// with the records of earlier passes, and is never changed.
	plans   *placedRecords
	patch   map[int]record
	patchAt map[string]int
	// fresh lists the places this pass patched.
	fresh []int
	// failures are the failures' records, which stand over their
	// objects' plans', the later of an object's standing; failAt finds
	// them by object.
	failures []record
	failAt   map[string]int
}

// placedRecords are records at places, found by object through an index
// made once, by the first look-up rather than by the pass.
type placedRecords struct {
	list   []record
	at     map[string]int
	atOnce sync.Once
}

// index finds each object's record, once.
func (p *placedRecords) index() map[string]int {
	p.atOnce.Do(func() {
		if p.at == nil {
			p.at = make(map[string]int, len(p.list))
			for i, r := range p.list {
				p.at[r.object] = i
			}
		}
	})
	return p.at
}

// record is one ToolDefinition's record before the one it has is known.
type record struct {
	// object is the ToolDefinition's name, tool its tool's.
	object, tool string
	// selected is false for a rejected or conflicting ToolDefinition:
	// what is stored under its tool name may be another's, so its record
	// keeps what it had, with the failure.
	selected bool
	// embedded says the record names an embedding: spec hash, model,
	// query count and time.
	embedded        bool
	specHash, model string
	queries         int32
	embeddedAt      time.Time
	// newVersion says the embedding is new in this outcome's published
	// version; otherwise a record naming the same embedding keeps the
	// version it gave.
	newVersion      bool
	reason, message string
}

// Records derives the records of each selected or rejected
// ToolDefinition. prev, the records of the catalog's last pass (nil for
// none), lends the records of the plans this pass repeated
// (Outcome.Reuse), when they are of the plans repeated, under the same
// build block, and those changed since they were laid out are few.
func (o *Outcome) Records(prev *Records) *Records {
	rs := &Records{Catalog: o.Catalog, Version: o.Version, set: o.Reuse.Set, blocked: o.Build.Blocked}
	if prev != nil && prev.set != 0 && prev.set == o.Reuse.Base && prev.blocked == o.Build.Blocked && prev.Catalog == o.Catalog &&
		len(prev.plans.list) == len(o.Plans) && len(prev.patch)+len(o.Reuse.Replanned) <= len(o.Plans)/8 {
		rs.plans = prev.plans
		rs.patch, rs.patchAt = maps.Clone(prev.patch), maps.Clone(prev.patchAt)
		if rs.patch == nil {
			rs.patch, rs.patchAt = map[int]record{}, map[string]int{}
		}
		for _, i := range o.Reuse.Replanned {
			pl := o.Plans[i]
			if was, ok := rs.patch[i]; ok && rs.patchAt[was.object] == i {
				delete(rs.patchAt, was.object) // unless it moved to a place patched before
			}
			rs.patch[i], rs.patchAt[pl.Tool.Object] = o.record(pl.Tool.Object, pl.Name, pl.Stored), i
		}
		rs.fresh = o.Reuse.Replanned
	} else {
		rs.plans = &placedRecords{list: make([]record, 0, len(o.Plans))}
		for _, pl := range o.Plans {
			rs.plans.list = append(rs.plans.list, o.record(pl.Tool.Object, pl.Name, pl.Stored))
		}
	}
	failures := o.Failures()
	if len(failures) == 0 {
		return rs
	}
	// The plans are in order of tool name, as the selection is.
	selected := func(f Failure) bool {
		i, ok := slices.BinarySearchFunc(o.Plans, f.Tool, func(pl ToolPlan, name string) int { return strings.Compare(pl.Name, name) })
		return ok && o.Plans[i].Tool.Object == f.Object
	}
	rs.failAt = make(map[string]int, len(failures))
	for _, f := range failures {
		r := record{object: f.Object, tool: f.Tool}
		if selected(f) {
			r = o.record(f.Object, f.Tool, o.Stored.Tools.Get(f.Tool))
		}
		r.reason, r.message = f.Reason, clip.Truncate(f.Message, 1024)
		rs.failAt[f.Object] = len(rs.failures) // the later stands
		rs.failures = append(rs.failures, r)
	}
	return rs
}

// record is a selected tool's record: the embedding the pass published
// or, failing that, the one published before (st, the tool's stored
// state).
func (o *Outcome) record(object, tool string, st StoredTool) record {
	r := record{object: object, tool: tool, selected: true}
	m := st.Metadata
	if st.Staged && o.Build.Blocked != "" {
		m = st.Published
	}
	res, fresh := o.Refreshed.Results[tool]
	if fresh && o.Build.Blocked == "" {
		m = &res.Metadata
	}
	if m == nil {
		return r
	}
	r.embedded, r.specHash, r.model, r.queries, r.embeddedAt = true, m.SpecHash, m.Model, int32(len(m.SyntheticQueries)), m.EmbeddedAt
	r.newVersion = fresh && o.Published
	return r
}

// lookup is the record of object.
func (rs *Records) lookup(object string) (*record, bool) {
	if i, ok := rs.failAt[object]; ok {
		return &rs.failures[i], true
	}
	return rs.planRecord(object)
}

// planRecord is the record of object's plan.
func (rs *Records) planRecord(object string) (*record, bool) {
	if i, ok := rs.patchAt[object]; ok {
		r := rs.patch[i]
		return &r, true
	}
	i, ok := rs.plans.index()[object]
	if !ok {
		return nil, false
	}
	if _, moved := rs.patch[i]; moved {
		return nil, false // the place holds another object's plan now
	}
	return &rs.plans.list[i], true
}

// recordAt is the record of the plan at place i.
func (rs *Records) recordAt(i int) record {
	if r, ok := rs.patch[i]; ok {
		return r
	}
	return rs.plans.list[i]
}

// each calls fn with every record: the plans', then the failures'.
func (rs *Records) each(fn func(r *record)) {
	for i := range rs.plans.list {
		r := rs.recordAt(i)
		fn(&r)
	}
	for i := range rs.failures {
		fn(&rs.failures[i])
	}
}

// Changed lists the objects whose record differs from the one prev, an
// earlier pass's records of the catalog, had for them, and those prev had
// a record for and rs has not; all is true when there is no prev to
// compare with, and every object is to be checked. A record whose
// embedding is new in this version is always changed: its version moves.
// An object may be listed twice, or listed when its record did not
// change: the records writer checks what it is named.
func (rs *Records) Changed(prev *Records) (objects []string, all bool) {
	if prev == nil {
		return nil, true
	}
	if rs.plans == prev.plans {
		// Laid over prev's records: only the places this pass patched
		// may differ.
		for _, i := range rs.fresh {
			objects = rs.placeChanged(prev, i, objects)
		}
	} else {
		objects = rs.plansChanged(prev)
	}
	// A failure's record stands over its object's plan's.
	for object, i := range rs.failAt {
		if was, ok := prev.lookup(object); !ok || !rs.failures[i].same(*was) {
			objects = append(objects, object)
		}
	}
	for object := range prev.failAt {
		if _, ok := rs.failAt[object]; !ok {
			objects = append(objects, object)
		}
	}
	return objects, false
}

// placeChanged appends the objects of place i's record in rs and in prev
// when the two differ.
func (rs *Records) placeChanged(prev *Records, i int, objects []string) []string {
	r, o := rs.recordAt(i), prev.recordAt(i)
	switch {
	case r.object != o.object:
		return append(objects, r.object, o.object)
	case !r.same(o):
		return append(objects, r.object)
	}
	return objects
}

// plansChanged lists the objects whose plan's record differs between rs
// and prev, which share no records.
func (rs *Records) plansChanged(prev *Records) (objects []string) {
	// Passes list the records in the same order (their plans', by tool
	// name): while the objects are the same ones, the two are compared
	// in step, with no look-up of each object, which is most of a bulk
	// pass's records at 100,000 tools.
	if len(rs.plans.list) == len(prev.plans.list) {
		inStep := true
		var changed []string
		for i := range rs.plans.list {
			r, o := rs.recordAt(i), prev.recordAt(i)
			if r.object != o.object {
				inStep = false
				break
			}
			if !r.same(o) {
				changed = append(changed, r.object)
			}
		}
		if inStep {
			if len(rs.patch) == 0 && len(prev.patch) == 0 {
				// Objects at the same places: prev's index finds rs's.
				prev.plans.index()
				rs.plans.atOnce.Do(func() { rs.plans.at = prev.plans.at })
			}
			return changed
		}
	}
	for i := range rs.plans.list {
		r := rs.recordAt(i)
		if was, ok := prev.planRecord(r.object); !ok || !r.same(*was) {
			objects = append(objects, r.object)
		}
	}
	for i := range prev.plans.list {
		o := prev.recordAt(i)
		if _, ok := rs.planRecord(o.object); !ok {
			objects = append(objects, o.object)
		}
	}
	return objects
}

// same reports whether r and o give a ToolDefinition the same record.
func (r record) same(o record) bool {
	return !r.newVersion && r.object == o.object && r.selected == o.selected && r.embedded == o.embedded &&
		r.specHash == o.specHash && r.model == o.model && r.queries == o.queries && r.embeddedAt.Equal(o.embeddedAt) &&
		r.reason == o.reason && r.message == o.message
}

// Objects lists the objects whose records name one of the tools.
func (rs *Records) Objects(tools map[string]bool) []string {
	var out []string
	rs.each(func(r *record) {
		if tools[r.tool] {
			out = append(out, r.object)
		}
	})
	return out
}

// For is the record a ToolDefinition should have, given the one it has
// (nil for none); selected is false when the outcome has none for it and
// its record is to be removed.
func (rs *Records) For(object string, have *v1alpha1.CatalogEmbeddingStatus) (rec v1alpha1.CatalogEmbeddingStatus, selected bool) {
	r, ok := rs.lookup(object)
	if !ok {
		return v1alpha1.CatalogEmbeddingStatus{}, false
	}
	rec = v1alpha1.CatalogEmbeddingStatus{Catalog: rs.Catalog}
	switch {
	case !r.selected:
		if have != nil {
			rec = *have
		}
	case r.embedded:
		rec.SpecHash, rec.Model, rec.QueryCount = r.specHash, r.model, r.queries
		rec.EmbeddedTime = &metav1.Time{Time: r.embeddedAt}
		rec.CatalogVersion = rs.Version
		if have != nil && have.SpecHash == rec.SpecHash && have.Model == rec.Model && have.CatalogVersion > 0 && !r.newVersion {
			rec.CatalogVersion = have.CatalogVersion
		}
	}
	rec.Reason, rec.Message = r.reason, r.message
	return rec, true
}
