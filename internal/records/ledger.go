package records

import (
	"context"
	"sync"

	ctrl "sigs.k8s.io/controller-runtime"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/reconcile"
)

// Ledger holds, for each catalog, the records of its tools that its latest
// pass and grading came to, and hands them to the ToolDefinition
// reconciler: the one writer of ToolDefinition status, which writes a
// tool's entry of status.catalogs with the conditions the entries imply in
// one patch. The catalogs' records writer tells it which ToolDefinitions
// to write (changed). One Ledger is shared by the ToolCatalog and the
// ToolDefinition reconcilers of a manager; it lives in memory, on the
// leader, and a catalog's entry comes back with its first pass after a
// restart.
type Ledger struct {
	mu       sync.RWMutex
	catalogs map[client.ObjectKey]*ledgerEntry
	// changed carries the ToolDefinitions whose status the ledger has
	// news for.
	changed chan event.TypedGenericEvent[types.NamespacedName]
}

// ledgerEntry is one catalog's part of the ledger.
type ledgerEntry struct {
	records *catalog.Records
	// confusable maps each tool name to the tool the grading of version
	// graded found it confusable with.
	confusable map[string]*v1alpha1.ConfusableTool
	graded     int64
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{catalogs: map[client.ObjectKey]*ledgerEntry{}, changed: make(chan event.TypedGenericEvent[types.NamespacedName], 1024)}
}

// put keeps a pass's records for a catalog, with the confusable tools of
// the grading its status shows (q), unless a later grading is kept. It
// returns the ToolDefinitions whose record may have changed: all of them
// when the ledger held no records of the catalog (its first pass since
// the manager started), else those whose record differs from the last
// pass's or whose confusable tool changed.
func (l *Ledger) put(key client.ObjectKey, recs *catalog.Records, q *v1alpha1.CatalogQuality) (objects []string, all bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.catalogs[key]
	if e == nil {
		e = &ledgerEntry{}
		l.catalogs[key] = e
	}
	objects, all = recs.Changed(e.records)
	e.records = recs
	if q != nil && (e.confusable == nil || q.Version >= e.graded) {
		objects = append(objects, e.keepConfusable(q)...)
	}
	return objects, all
}

// records are the records a catalog's last pass kept, nil for none.
func (l *Ledger) records(key client.ObjectKey) *catalog.Records {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if e := l.catalogs[key]; e != nil {
		return e.records
	}
	return nil
}

// graded keeps the confusable tools of a catalog's grading; it returns the
// ToolDefinitions whose confusable tool changed, when the catalog has
// records for them to go with.
func (l *Ledger) graded(key client.ObjectKey, q *v1alpha1.CatalogQuality) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.catalogs[key]
	if e == nil || q == nil || q.Version < e.graded {
		return nil
	}
	return e.keepConfusable(q)
}

// keepConfusable keeps the confusable tools of grading q and returns the
// ToolDefinitions, of the records kept, whose confusable tool changed.
func (e *ledgerEntry) keepConfusable(q *v1alpha1.CatalogQuality) []string {
	now := ConfusableTools(q)
	changed := map[string]bool{}
	for tool, with := range now {
		if was := e.confusable[tool]; was == nil || *was != *with {
			changed[tool] = true
		}
	}
	for tool := range e.confusable {
		if now[tool] == nil {
			changed[tool] = true
		}
	}
	e.confusable, e.graded = now, q.Version
	if len(changed) == 0 || e.records == nil {
		return nil
	}
	return e.records.Objects(changed)
}

// forget drops a catalog that is being deleted or gone.
func (l *Ledger) forget(key client.ObjectKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.catalogs, key)
}

// RecordFor is the record a catalog has for a ToolDefinition, given the
// one it has (have, nil for none): nil when the catalog's latest pass has
// none for it, or has yet to process it. known is false when the ledger holds nothing of the
// catalog yet (no pass since the manager started), and have stands.
func (l *Ledger) RecordFor(catalogName string, td *v1alpha1.ToolDefinition, have *v1alpha1.CatalogEmbeddingStatus) (rec *v1alpha1.CatalogEmbeddingStatus, known bool) {
	l.mu.RLock()
	e := l.catalogs[client.ObjectKey{Namespace: td.Namespace, Name: catalogName}]
	var recs *catalog.Records
	var with *v1alpha1.ConfusableTool
	if e != nil {
		recs, with = e.records, e.confusable[td.Spec.Name]
	}
	l.mu.RUnlock()
	if recs == nil {
		return nil, false
	}
	want, selected := recs.For(td.Name, have)
	if !selected || have == nil && want.SpecHash == "" && want.Reason == "" {
		// No record until the catalog has processed the tool.
		return nil, true
	}
	want.ConfusableWith = with
	return &want, true
}

// differs reports whether a ToolDefinition's record of a catalog is not
// the one the ledger holds.
func (l *Ledger) differs(catalogName string, td *v1alpha1.ToolDefinition) bool {
	have := Of(td, catalogName)
	want, known := l.RecordFor(catalogName, td, have)
	switch {
	case !known:
		return false
	case want == nil || have == nil:
		return want != have
	default:
		return !catalog.SameRecord(*have, *want)
	}
}

// Behind passes the updates of a ToolDefinition whose records are not the
// ledger's. The records writer looks at a ToolDefinition when its record
// changes, in the cache as it is then; should the cache not yet hold the
// reconciler's last write, the two agree on what is about to be
// overwritten and nothing is written. The write's own update, once
// cached, brings the ToolDefinition back here.
func (l *Ledger) Behind() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			td, ok := e.ObjectNew.(*v1alpha1.ToolDefinition)
			if !ok {
				return false
			}
			for _, rec := range td.Status.Catalogs {
				if l.differs(rec.Catalog, td) {
					return true
				}
			}
			return false
		},
	}
}

// tell queues a ToolDefinition for its reconciler; false when ctx ended
// first.
func (l *Ledger) tell(ctx context.Context, key types.NamespacedName) bool {
	select {
	case l.changed <- event.TypedGenericEvent[types.NamespacedName]{Object: key}:
		return true
	case <-ctx.Done():
		return false
	}
}

// Changed carries the ToolDefinitions the ledger has news for, which
// Source queues.
func (l *Ledger) Changed() <-chan event.TypedGenericEvent[types.NamespacedName] { return l.changed }

// Source is what the ToolDefinition reconciler watches for the ledger's
// news.
func (l *Ledger) Source() source.Source {
	return source.TypedChannel(l.changed, handler.TypedFuncs[types.NamespacedName, ctrl.Request]{
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[types.NamespacedName], q reconcile.Queue) {
			q.Add(ctrl.Request{NamespacedName: e.Object})
		},
	})
}

// ConfusableTools maps each tool of a confusable pair to the other.
func ConfusableTools(q *v1alpha1.CatalogQuality) map[string]*v1alpha1.ConfusableTool {
	out := map[string]*v1alpha1.ConfusableTool{}
	if q == nil {
		return out
	}
	for _, p := range q.ConfusablePairs {
		if len(p.Tools) != 2 {
			continue
		}
		a, b := p.Tools[0], p.Tools[1]
		// A tool in several pairs names its most similar other tool
		// (pairs come most similar first).
		if out[a] == nil {
			out[a] = &v1alpha1.ConfusableTool{Name: b, Similarity: p.Similarity}
		}
		if out[b] == nil {
			out[b] = &v1alpha1.ConfusableTool{Name: a, Similarity: p.Similarity}
		}
	}
	return out
}

// Of is a ToolDefinition's record of a catalog, nil when it has none.
func Of(td *v1alpha1.ToolDefinition, catalog string) *v1alpha1.CatalogEmbeddingStatus {
	for i := range td.Status.Catalogs {
		if td.Status.Catalogs[i].Catalog == catalog {
			return &td.Status.Catalogs[i]
		}
	}
	return nil
}
