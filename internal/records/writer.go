package records

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

// Writer hands the ToolDefinitions' records of the catalogs' passes and
// gradings to the Ledger and queues the ToolDefinitions whose record
// changed for their reconciler, which writes them; off the passes, so a
// catalog of 50,000 tools publishes an edit at once while a bulk apply's
// records are still being written. Only a catalog's latest records are
// kept (catalog.Records: not the outcome's plans, stored state or
// vectors), and a ToolDefinition queued twice is written once. An edit
// costs what it changed: only the ToolDefinitions whose record differs
// from the last pass's are looked at, and every one of the catalog's only
// after the manager starts. It runs with the manager, on the leader.
type Writer struct {
	*handoff.Queue[toCheck]
	ledger *Ledger
	// objects reads the ToolDefinitions of a namespace; reader the
	// ToolDefinitions named.
	objects ToolDefinitions
	reader  client.Reader
}

// ToolDefinitions lists the ToolDefinitions of a namespace that sel
// matches, read-only (cached.Objects).
type ToolDefinitions interface {
	ToolDefinitions(ctx context.Context, namespace string, sel labels.Selector) ([]*v1alpha1.ToolDefinition, error)
}

// toCheck is a catalog's ToolDefinitions to look at: every one, or those
// named.
type toCheck struct {
	all     bool
	objects map[string]bool
}

// NewWriter returns the records writer of ledger; it runs once added to
// the manager.
func NewWriter(ledger *Ledger, objects ToolDefinitions, reader client.Reader) *Writer {
	rs := &Writer{ledger: ledger, objects: objects, reader: reader}
	rs.Queue = handoff.New[toCheck]("toolcatalog-records", rs.Turn)
	return rs
}

// Ledger is the ledger the writer keeps the records in.
func (rs *Writer) Ledger() *Ledger { return rs.ledger }

// Submit keeps a pass's records in the ledger and queues the catalog's
// ToolDefinitions whose record they may change.
func (rs *Writer) Submit(tc *v1alpha1.ToolCatalog, out *catalog.Outcome) {
	if out == nil {
		return
	}
	key := client.ObjectKeyFromObject(tc)
	objects, all := rs.ledger.put(key, out.Records(rs.ledger.records(key)), tc.Status.Quality)
	rs.Check(key, objects, all)
}

// Graded keeps the confusable tools of a grading in the ledger and queues
// the ToolDefinitions whose record they change.
func (rs *Writer) Graded(tc *v1alpha1.ToolCatalog) {
	key := client.ObjectKeyFromObject(tc)
	rs.Check(key, rs.ledger.graded(key, tc.Status.Quality), false)
}

// Check queues a catalog to find which of the objects (all of its
// ToolDefinitions with all) have a record that is not the ledger's.
func (rs *Writer) Check(key client.ObjectKey, objects []string, all bool) {
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

// Forget drops a deleted catalog's records: the ToolDefinition reconciler
// removes them from the tools as the catalog no longer selects them.
func (rs *Writer) Forget(key client.ObjectKey) {
	rs.Take(key)
	rs.ledger.forget(key)
}

// Turn tells the ledger's reader of the ToolDefinitions of a catalog's
// queued job whose record of it is not the ledger's: the writer's work
// for one catalog, done as the manager runs it.
func (rs *Writer) Turn(ctx context.Context, key client.ObjectKey) {
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
		if rs.ledger.differs(key.Name, td) {
			if !rs.ledger.tell(ctx, client.ObjectKeyFromObject(td)) {
				return
			}
			changed++
		}
	}
	span.SetAttributes(attribute.Int("toolcatalog.records_changed", changed))
}

// toolDefinitions reads a job's ToolDefinitions from the cache: those
// named that exist, or every one of the namespace.
func (rs *Writer) toolDefinitions(ctx context.Context, namespace string, job toCheck) ([]*v1alpha1.ToolDefinition, error) {
	if job.all {
		return rs.objects.ToolDefinitions(ctx, namespace, labels.Everything())
	}
	out := make([]*v1alpha1.ToolDefinition, 0, len(job.objects))
	for name := range job.objects {
		td := &v1alpha1.ToolDefinition{}
		err := rs.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, td)
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
