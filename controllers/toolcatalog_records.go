package controllers

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/handoff"
	"github.com/toolcatalog/tool-catalog-operator/internal/telemetry"
)

// records hands the ToolDefinitions' records of the catalogs' passes and
// gradings to the Ledger and queues the ToolDefinitions whose record
// changed for their reconciler, which writes them; off the passes, so a
// catalog of 50,000 tools publishes an edit at once while a bulk apply's
// records are still being written. Only a catalog's latest records are
// kept (catalog.Records: not the outcome's plans, stored state or
// vectors), and a ToolDefinition queued twice is written once. It runs
// with the manager, on the leader.
type records struct {
	*handoff.Queue[struct{}]
	r *ToolCatalogReconciler
}

func newRecords(r *ToolCatalogReconciler) *records {
	rs := &records{r: r}
	rs.Queue = handoff.New[struct{}]("toolcatalog-records", rs.run)
	return rs
}

// submit keeps a pass's records in the ledger and queues the catalog to
// find the ToolDefinitions they change.
func (rs *records) submit(tc *v1alpha1.ToolCatalog, out *catalog.Outcome) {
	if out == nil {
		return
	}
	key := client.ObjectKeyFromObject(tc)
	rs.r.Ledger.put(key, out.Records(), tc.Status.Quality)
	rs.check(key)
}

// graded keeps the confusable tools of a grading in the ledger and queues
// the catalog to find the ToolDefinitions they change.
func (rs *records) graded(tc *v1alpha1.ToolCatalog) {
	key := client.ObjectKeyFromObject(tc)
	if rs.r.Ledger.graded(key, tc.Status.Quality) {
		rs.check(key)
	}
}

// check queues a catalog to find the ToolDefinitions whose record of it
// is not the ledger's.
func (rs *records) check(key client.ObjectKey) {
	rs.Put(key, func(struct{}, bool) (struct{}, bool) { return struct{}{}, false })
}

// forget drops a deleted catalog's records: the ToolDefinition reconciler
// removes them from the tools as the catalog no longer selects them.
func (rs *records) forget(key client.ObjectKey) {
	rs.Take(key)
	rs.r.Ledger.forget(key)
}

// run queues the ToolDefinitions of a catalog's namespace whose record of
// it is not the ledger's.
func (rs *records) run(ctx context.Context, key client.ObjectKey) {
	if _, ok := rs.Take(key); !ok {
		return
	}
	log := ctrl.Log.WithName("toolcatalog-records").WithValues("ToolCatalog", key)
	ctx = ctrl.LoggerInto(ctx, log)
	ctx, span := telemetry.Tracer().Start(ctx, "ToolCatalog records", trace.WithAttributes(attribute.String("toolcatalog.catalog", key.String())))
	defer span.End()
	// Read-only, as in the pass.
	tds, err := rs.r.toolDefinitions(ctx, key.Namespace, labels.Everything())
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		log.Error(err, "Cannot list the ToolDefinitions to record; retrying")
		rs.Retry(key, struct{}{})
		return
	}
	rs.Done(key)
	changed := 0
	for _, td := range tds {
		if rs.r.Ledger.differs(key.Name, td) {
			if !rs.r.Ledger.tell(ctx, client.ObjectKeyFromObject(td)) {
				return
			}
			changed++
		}
	}
	span.SetAttributes(attribute.Int("toolcatalog.records_changed", changed))
}
