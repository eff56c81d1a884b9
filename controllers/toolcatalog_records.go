package controllers

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/telemetry"
)

// records writes the ToolDefinitions' records of the catalogs' passes,
// off the passes: a pass hands over its outcome's records and ends with the
// catalog's status written, so a catalog of 50,000 tools whose records
// are still being written after a bulk apply publishes an edit at once.
// Only the latest outcome of a catalog is written; one it supersedes is
// dropped, since each outcome says every selected tool's record. Only the
// records are kept of an outcome (catalog.Records), not its plans,
// stored state or vectors. The
// records go maxRecordsPerTurn at a time, catalogs taking turns. It runs
// with the manager, on the leader.
type records struct {
	*afterPass[*catalog.Records]
	r *ToolCatalogReconciler
	// writing is held while records are written, so a catalog being
	// deleted (forget) waits for the write under way and gets none after.
	writing sync.Mutex
}

func newRecords(r *ToolCatalogReconciler) *records {
	rs := &records{afterPass: newAfterPass[*catalog.Records]("toolcatalog-records"), r: r}
	rs.afterPass.run = rs.run
	return rs
}

// submit hands over a pass's outcome, replacing one not written yet.
func (rs *records) submit(key client.ObjectKey, out *catalog.Outcome) {
	if out == nil {
		return
	}
	recs := out.Records()
	rs.put(key, func(*catalog.Records, bool) (*catalog.Records, bool) { return recs, false })
}

// forget drops a deleted catalog's outcome, after any write under way.
func (rs *records) forget(key client.ObjectKey) {
	rs.writing.Lock()
	defer rs.writing.Unlock()
	rs.take(key)
}

// run writes up to maxRecordsPerTurn records of a catalog's latest
// outcome; what is left follows after the other catalogs' turns, unless
// a newer outcome replaces it. A failed write is retried with backoff.
func (rs *records) run(ctx context.Context, key client.ObjectKey) {
	rs.writing.Lock()
	defer rs.writing.Unlock()
	out, ok := rs.take(key)
	if !ok {
		return
	}
	log := ctrl.Log.WithName("toolcatalog-records").WithValues("ToolCatalog", key, "version", out.Version)
	ctx = ctrl.LoggerInto(ctx, log)
	tc := &v1alpha1.ToolCatalog{}
	if err := rs.r.Get(ctx, key, tc); err != nil || !tc.DeletionTimestamp.IsZero() {
		return
	}
	ctx, span := telemetry.Tracer().Start(ctx, "ToolCatalog records", trace.WithAttributes(
		attribute.String("toolcatalog.catalog", key.String()), attribute.Int64("toolcatalog.version", out.Version)))
	defer span.End()
	more, err := rs.r.syncRecords(ctx, tc, out)
	switch {
	case err != nil:
		span.SetStatus(codes.Error, err.Error())
		log.Error(err, "Cannot write the ToolDefinitions' records; retrying")
		rs.retry(key, out, rs.queue.AddRateLimited)
	case more:
		rs.queue.Forget(key)
		rs.retry(key, out, rs.queue.Add)
	default:
		rs.queue.Forget(key)
	}
}
