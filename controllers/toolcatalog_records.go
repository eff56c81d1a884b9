package controllers

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/telemetry"
)

// records writes the ToolDefinitions' records of the catalogs' passes,
// off the passes: a pass hands over its outcome and ends with the
// catalog's status written, so a catalog of 50,000 tools whose records
// are still being written after a bulk apply publishes an edit at once.
// Only the latest outcome of a catalog is written; one it supersedes is
// dropped, since each outcome says every selected tool's record. The
// records go maxRecordsPerPass at a time, catalogs taking turns. It runs
// with the manager, on the leader.
type records struct {
	r     *ToolCatalogReconciler
	queue workqueue.TypedRateLimitingInterface[client.ObjectKey]

	mu   sync.Mutex
	jobs map[client.ObjectKey]*catalog.Outcome
	// writing is held while records are written, so a catalog being
	// deleted (forget) waits for the write under way and gets none after.
	writing sync.Mutex
}

func newRecords(r *ToolCatalogReconciler) *records {
	return &records{
		r: r,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[client.ObjectKey](),
			workqueue.TypedRateLimitingQueueConfig[client.ObjectKey]{Name: "toolcatalog-records"}),
		jobs: map[client.ObjectKey]*catalog.Outcome{},
	}
}

// submit hands over a pass's outcome, replacing one not written yet.
func (rs *records) submit(key client.ObjectKey, out *catalog.Outcome) {
	if out == nil {
		return
	}
	rs.mu.Lock()
	rs.jobs[key] = out
	rs.mu.Unlock()
	rs.queue.Add(key)
}

// forget drops a deleted catalog's outcome, after any write under way.
func (rs *records) forget(key client.ObjectKey) {
	rs.writing.Lock()
	defer rs.writing.Unlock()
	rs.mu.Lock()
	delete(rs.jobs, key)
	rs.mu.Unlock()
}

// Start writes records until ctx ends.
func (rs *records) Start(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		rs.queue.ShutDown()
	}()
	for {
		key, shutdown := rs.queue.Get()
		if shutdown {
			return nil
		}
		rs.run(ctx, key)
		rs.queue.Done(key)
	}
}

// NeedLeaderElection says records are status writes: the leader's work.
func (rs *records) NeedLeaderElection() bool { return true }

// run writes up to maxRecordsPerPass records of a catalog's latest
// outcome; what is left follows after the other catalogs' turns, unless
// a newer outcome replaces it. A failed write is retried with backoff.
func (rs *records) run(ctx context.Context, key client.ObjectKey) {
	rs.writing.Lock()
	defer rs.writing.Unlock()
	rs.mu.Lock()
	out := rs.jobs[key]
	delete(rs.jobs, key)
	rs.mu.Unlock()
	if out == nil {
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

// retry puts an outcome back unless a newer one came meanwhile.
func (rs *records) retry(key client.ObjectKey, out *catalog.Outcome, add func(client.ObjectKey)) {
	rs.mu.Lock()
	if rs.jobs[key] == nil {
		rs.jobs[key] = out
	}
	rs.mu.Unlock()
	add(key)
}
