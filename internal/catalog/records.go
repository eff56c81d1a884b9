package catalog

import (
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
type Records struct {
	// Catalog is the ToolCatalog's name; Version the catalog's version
	// after the pass.
	Catalog string
	Version int64
	// list holds the records in the order derived: a failure's comes
	// after its plan's, and the later record of an object stands.
	list []record
	// at finds an object's record. It is made by the first For, in the
	// records writer rather than the pass, which neither sorts the
	// records nor looks each up by object, or taken from the records of
	// the last pass when their objects are at the same places (Changed).
	// It is never changed once made.
	at     map[string]int
	atOnce sync.Once
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
// ToolDefinition.
func (o *Outcome) Records() *Records {
	failures := o.Failures()
	rs := &Records{Catalog: o.Catalog, Version: o.Version, list: make([]record, 0, len(o.Plans)+len(failures))}
	for _, pl := range o.Plans {
		rs.list = append(rs.list, o.record(pl.Tool.Object, pl.Name, pl.Stored))
	}
	if len(failures) > 0 {
		selected := make(map[string]string, len(o.Plans)) // tool name → ToolDefinition
		for _, pl := range o.Plans {
			selected[pl.Name] = pl.Tool.Object
		}
		for _, f := range failures {
			r := record{object: f.Object, tool: f.Tool}
			if selected[f.Tool] == f.Object {
				r = o.record(f.Object, f.Tool, o.Stored.Tools[f.Tool])
			}
			r.reason, r.message = f.Reason, clip.Truncate(f.Message, 1024)
			rs.list = append(rs.list, r)
		}
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

// index finds each object's record, once.
func (rs *Records) index() map[string]int {
	rs.atOnce.Do(func() {
		rs.at = make(map[string]int, len(rs.list))
		for i, r := range rs.list {
			rs.at[r.object] = i // the later stands
		}
	})
	return rs.at
}

// Changed lists the objects whose record differs from the one prev, an
// earlier pass's records of the catalog, had for them, and those prev had
// a record for and rs has not; all is true when there is no prev to
// compare with, and every object is to be checked. A record whose
// embedding is new in this version is always changed: its version moves.
func (rs *Records) Changed(prev *Records) (objects []string, all bool) {
	if prev == nil {
		return nil, true
	}
	// Passes list the records in the same order (their plans', by tool
	// name, then the failures'): while the objects are the same ones,
	// the two are compared in step, with no look-up of each object, which
	// is most of an edit's records at 100,000 tools. An object listed
	// twice may be named twice, or changed where its later record is
	// not: the records writer checks what it is named.
	if len(rs.list) == len(prev.list) {
		inStep := true
		var changed []string
		for i := range rs.list {
			r, o := &rs.list[i], &prev.list[i]
			if r.object != o.object {
				inStep = false
				break
			}
			if !r.same(*o) {
				changed = append(changed, r.object)
			}
		}
		if inStep {
			// Objects at the same places: prev's index finds rs's.
			at := prev.index()
			rs.atOnce.Do(func() { rs.at = at })
			return changed, false
		}
	}
	at, before := rs.index(), prev.index()
	for object, i := range at {
		j, ok := before[object]
		if !ok || !rs.list[i].same(prev.list[j]) {
			objects = append(objects, object)
		}
	}
	for object := range before {
		if _, ok := at[object]; !ok {
			objects = append(objects, object)
		}
	}
	return objects, false
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
	for _, r := range rs.list {
		if tools[r.tool] {
			out = append(out, r.object)
		}
	}
	return out
}

// For is the record a ToolDefinition should have, given the one it has
// (nil for none); selected is false when the outcome has none for it and
// its record is to be removed.
func (rs *Records) For(object string, have *v1alpha1.CatalogEmbeddingStatus) (rec v1alpha1.CatalogEmbeddingStatus, selected bool) {
	i, ok := rs.index()[object]
	if !ok {
		return v1alpha1.CatalogEmbeddingStatus{}, false
	}
	r := &rs.list[i]
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
