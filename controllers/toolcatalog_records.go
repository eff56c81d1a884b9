package controllers

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
// vectors), and a ToolDefinition queued twice is written once. An edit
// costs what it changed: only the ToolDefinitions whose record differs
// from the last pass's are looked at, and every one of the catalog's only
// after the manager starts. It runs with the manager, on the leader.
type records struct {
	*handoff.Queue[toCheck]
	r *ToolCatalogReconciler
}

// toCheck is a catalog's ToolDefinitions to look at: every one, or those
// named.
type toCheck struct {
	all     bool
	objects map[string]bool
}

func newRecords(r *ToolCatalogReconciler) *records {
	rs := &records{r: r}
	rs.Queue = handoff.New[toCheck]("toolcatalog-records", rs.run)
	return rs
}

// submit keeps a pass's records in the ledger and queues the catalog's
// ToolDefinitions whose record they may change.
func (rs *records) submit(tc *v1alpha1.ToolCatalog, out *catalog.Outcome) {
	if out == nil {
		return
	}
	key := client.ObjectKeyFromObject(tc)
	objects, all := rs.r.Ledger.put(key, out.Records(rs.r.Ledger.records(key)), tc.Status.Quality)
	rs.check(key, objects, all)
}

// graded keeps the confusable tools of a grading in the ledger and queues
// the ToolDefinitions whose record they change.
func (rs *records) graded(tc *v1alpha1.ToolCatalog) {
	key := client.ObjectKeyFromObject(tc)
	rs.check(key, rs.r.Ledger.graded(key, tc.Status.Quality), false)
}

// check queues a catalog to find which of the objects (all of its
// ToolDefinitions with all) have a record that is not the ledger's.
func (rs *records) check(key client.ObjectKey, objects []string, all bool) {
	if !all && len(objects) == 0 {
		return
	}
	rs.Put(key, func(waiting toCheck, _ bool) (toCheck, bool) {
		if waiting.all = waiting.all || all; waiting.all {
			return toCheck{all: true}, false
		}
		if waiting.objects == nil {
			waiting.objects = make(map[string]bool, len(objects))
		}
		for _, o := range objects {
			waiting.objects[o] = true
		}
		return waiting, false
	})
}

// forget drops a deleted catalog's records: the ToolDefinition reconciler
// removes them from the tools as the catalog no longer selects them.
func (rs *records) forget(key client.ObjectKey) {
	rs.Take(key)
	rs.r.Ledger.forget(key)
}

// run queues the ToolDefinitions of a catalog's job whose record of it is
// not the ledger's.
func (rs *records) run(ctx context.Context, key client.ObjectKey) {
	job, ok := rs.Take(key)
	if !ok {
		return
	}
	log := ctrl.Log.WithName("toolcatalog-records").WithValues("ToolCatalog", key)
	ctx = ctrl.LoggerInto(ctx, log)
	ctx, span := telemetry.Tracer().Start(ctx, "ToolCatalog records", trace.WithAttributes(
		attribute.String("toolcatalog.catalog", key.String()), attribute.Bool("toolcatalog.records_all", job.all), attribute.Int("toolcatalog.records_named", len(job.objects))))
	defer span.End()
	// Read-only, as in the pass.
	tds, err := rs.toolDefinitions(ctx, key.Namespace, job)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		log.Error(err, "Cannot read the ToolDefinitions to record; retrying")
		rs.Retry(key, job)
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

// toolDefinitions reads a job's ToolDefinitions from the cache: those
// named that exist, or every one of the namespace.
func (rs *records) toolDefinitions(ctx context.Context, namespace string, job toCheck) ([]*v1alpha1.ToolDefinition, error) {
	if job.all {
		return rs.r.toolDefinitions(ctx, namespace, labels.Everything())
	}
	out := make([]*v1alpha1.ToolDefinition, 0, len(job.objects))
	for name := range job.objects {
		td := &v1alpha1.ToolDefinition{}
		err := rs.r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, td)
		switch {
		case apierrors.IsNotFound(err):
			// Gone: nothing to write.
		case err != nil:
			return nil, err
		default:
			out = append(out, td)
		}
	}
	return out, nil
}
