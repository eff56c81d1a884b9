package toolcatalog

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalogconfig"
	"github.com/toolcatalog/tool-catalog-operator/internal/grading"
	"github.com/toolcatalog/tool-catalog-operator/internal/kube/cached"
	"github.com/toolcatalog/tool-catalog-operator/internal/metrics"
	"github.com/toolcatalog/tool-catalog-operator/internal/published"
	"github.com/toolcatalog/tool-catalog-operator/internal/reconcile"
	"github.com/toolcatalog/tool-catalog-operator/internal/records"
	"github.com/toolcatalog/tool-catalog-operator/internal/telemetry"
)

const (
	// secretRefIndex indexes ToolCatalogs by the Secrets they refer to.
	secretRefIndex = ".spec.secretRefs"
	// pendingRequeue is how soon a pass follows a restricted refresh that
	// left work behind.
	pendingRequeue = time.Second
)

// Reconciler keeps a catalog's embeddings current and publishes
// it to Redis as versions. A reconcile is: get, finalizer, pace, one pass
// (catalog.Pass), the status derived from what it came to, one patch, and
// the hand-overs (the ToolDefinitions' records, the grading). Its
// collaborators are built once by the manager and handed in.
type Reconciler struct {
	client.Client
	Recorder events.EventRecorder
	// Pass runs one refresh of a catalog.
	Pass *catalog.Pass
	// Published keeps every catalog's published state and does the
	// passes' Redis work; the Pass opens each catalog's here.
	Published *published.States
	// Resolver resolves a catalog's settings for its cleanup.
	Resolver *catalogconfig.Resolver
	// Providers is the Pass's provider factory, told of deleted catalogs.
	Providers catalogconfig.ProviderFactory
	// Grades grades the versions published; Records takes the
	// ToolDefinitions' records of the passes and gradings to their
	// reconciler. Both run with the manager.
	Grades  *grading.Grades
	Records *records.Writer
	// LossProbeInterval is how often the published versions are read
	// back to find what Redis lost (published.DefaultLossProbeInterval
	// when zero).
	LossProbeInterval time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	pace       pacer
	redisRetry redisRetries
	// lost carries the catalogs whose Redis lost what they published.
	lost chan event.GenericEvent
}

// +kubebuilder:rbac:groups=toolcatalog.dev,resources=toolcatalogs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=toolcatalog.dev,resources=toolcatalogs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=toolcatalog.dev,resources=toolcatalogs/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch

func (r *Reconciler) now() time.Time { return reconcile.Now(r.Now) }

func catalogID(tc *v1alpha1.ToolCatalog) string { return catalog.ID(tc) }

// Reconcile runs one incremental pass for a catalog and writes its status
// once, from what the pass came to.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	tc := &v1alpha1.ToolCatalog{}
	if err := r.Get(ctx, req.NamespacedName, tc); err != nil {
		if client.IgnoreNotFound(err) == nil {
			r.Published.Forget(req.String())
			r.Grades.Forget(req.NamespacedName)
			r.Records.Forget(req.NamespacedName)
			r.pace.forget(req.NamespacedName)
			r.redisRetry.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !tc.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, tc)
	}
	if err := r.ensureFinalizer(ctx, tc); err != nil {
		return ctrl.Result{}, err
	}
	if meta.FindStatusCondition(tc.Status.Conditions, v1alpha1.ConditionReady) == nil {
		// Say at once that the first pass is under way.
		base := tc.DeepCopy()
		summarizeFirstPass(tc)
		if err := reconcile.PatchStatus(ctx, r.Client, base, tc); err != nil {
			return ctrl.Result{}, err
		}
	}
	// During a burst of changes the passes are spaced (pacer); a change
	// of the catalog itself (a pin set or cleared among them) is not.
	started := r.now()
	if wait := r.pace.wait(req.NamespacedName, started); wait > 0 && tc.Generation == tc.Status.ObservedGeneration {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	// One trace per pass: its steps are child spans (select, read, plan,
	// generate and embed, build, publish). The ToolDefinitions' records
	// and the grading of the version published follow, off the pass,
	// each in a trace of its own.
	ctx, span := telemetry.Tracer().Start(ctx, "ToolCatalog pass", trace.WithAttributes(attribute.String("toolcatalog.catalog", req.String())))
	defer span.End()
	loss := r.Published.TakeLoss(catalogID(tc))
	if loss != nil {
		base := tc.DeepCopy()
		reportLoss(tc, loss)
		if err := reconcile.PatchStatus(ctx, r.Client, base, tc); err != nil {
			return ctrl.Result{}, err
		}
	}
	base := tc.DeepCopy()
	res := r.Pass.Run(ctx, tc)
	if loss == nil {
		// Found by the pass's own read.
		loss = r.Published.TakeLoss(catalogID(tc))
	}
	if loss != nil {
		r.recordLoss(tc, loss, res)
	}
	if res.Err != nil {
		span.SetStatus(codes.Error, res.Err.Error())
	}
	applyStatus(tc, res)
	r.recordEvents(base, tc, res)
	// The catalog's own status says what is published as soon as it is;
	// the ToolDefinitions' records follow, written off the pass.
	patchErr := reconcile.PatchStatus(ctx, r.Client, base, tc)
	if res.Outcome != nil && res.Outcome.Published {
		r.pace.published(req.NamespacedName, started, r.now())
	}
	if patchErr == nil {
		r.Records.Submit(tc, res.Outcome)
		if res.State != nil {
			r.Grades.Submit(tc, res.Embedder, res.State, res.Outcome)
			res.State.Release()
		}
	}
	if reconcile.HasReason(res.Err, v1alpha1.ReasonRedisUnavailable) {
		// Its status says why; the next pass comes within seconds.
		return ctrl.Result{RequeueAfter: r.redisRetry.next(req.NamespacedName)}, nil
	}
	r.redisRetry.forget(req.NamespacedName)
	return requeue(res, patchErr)
}

// requeue says when the catalog is due again. A user-fixable error waits
// for the resync (fixing it changes the catalog or a watched Secret, which
// triggers a pass), even when the status could not be written either;
// other errors go back to the rate-limited queue.
func requeue(res catalog.PassResult, patchErr error) (ctrl.Result, error) {
	if err := errors.Join(res.Err, patchErr); err != nil {
		return reconcile.RequeueFor(err, res.Resync, res.Resync)
	}
	if n := res.Outcome.RetryableFailures(); n > 0 {
		return ctrl.Result{}, fmt.Errorf("%d tools failed to refresh with transient errors; retrying with backoff", n)
	}
	if len(res.Outcome.Pending()) > 0 || len(res.Outcome.Remaining()) > 0 {
		return ctrl.Result{RequeueAfter: pendingRequeue}, nil
	}
	return ctrl.Result{RequeueAfter: res.Resync}, nil
}

func (r *Reconciler) ensureFinalizer(ctx context.Context, tc *v1alpha1.ToolCatalog) error {
	return reconcile.EnsureFinalizer(ctx, r.Client, tc)
}

// reconcileDelete removes the catalog's keys from Redis and forgets its
// records, then lets the catalog go. A Redis outage delays the
// cleanup (the error is retried with backoff); it is not skipped. Keys
// whose head another catalog wrote are left alone.
func (r *Reconciler) reconcileDelete(ctx context.Context, tc *v1alpha1.ToolCatalog) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(tc, v1alpha1.FinalizerCleanup) {
		return ctrl.Result{}, nil
	}
	if err := r.deleteKeys(ctx, tc); err != nil {
		return ctrl.Result{}, err
	}
	// The ToolDefinition reconciler takes the catalog's records off its
	// tools: a catalog being deleted selects none.
	r.Records.Forget(client.ObjectKeyFromObject(tc))
	r.Published.Forget(catalogID(tc))
	r.Grades.Forget(client.ObjectKeyFromObject(tc))
	r.pace.forget(client.ObjectKeyFromObject(tc))
	r.Providers.Forget(catalogID(tc))
	metrics.ForgetCatalog(catalogID(tc))
	patch := client.MergeFrom(tc.DeepCopy())
	controllerutil.RemoveFinalizer(tc, v1alpha1.FinalizerCleanup)
	if err := client.IgnoreNotFound(r.Patch(ctx, tc, patch)); err != nil {
		return ctrl.Result{}, fmt.Errorf("removing finalizer: %w", err)
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) deleteKeys(ctx context.Context, tc *v1alpha1.ToolCatalog) error {
	if catalogconfig.CheckKeyPrefix(tc) != nil {
		return nil // never published: its prefix was refused
	}
	keys := catalogconfig.KeysOf(tc)
	opts, err := r.Resolver.RedisOptions(ctx, tc)
	var cerr *catalogconfig.Error
	switch {
	case errors.As(err, &cerr):
		// The Secret is gone (deleted with the namespace, say): try
		// without it rather than block the deletion forever.
		r.Recorder.Eventf(tc, nil, corev1.EventTypeWarning, cerr.Reason, "Cleanup", "cleaning up without credentials: %s", cerr.Message)
	case err != nil:
		return err
	}
	// Only what this catalog published is deleted: a head with another
	// catalog's UID (written by someone else under these keys) is not its.
	owner, err := r.Published.Remove(ctx, catalogID(tc), string(tc.UID), keys, opts)
	if owner != "" {
		r.Recorder.Eventf(tc, nil, corev1.EventTypeWarning, v1alpha1.ReasonForeignKeys, "Cleanup",
			"the keys under %s hold a version of catalog UID %s, not this catalog's: left in place", keys.Prefix, owner)
		return nil
	}
	if err != nil {
		if !isRedisAuthError(err) {
			r.Recorder.Eventf(tc, nil, corev1.EventTypeWarning, v1alpha1.ReasonRedisUnavailable, "Cleanup", "cannot reach Redis to remove the catalog's keys: %v; retrying", err)
			return fmt.Errorf("removing catalog keys: %w", err)
		}
		r.Recorder.Eventf(tc, nil, corev1.EventTypeWarning, v1alpha1.ReasonRedisUnavailable, "Cleanup",
			"could not remove the catalog's keys under %s: %v; remove them by hand", keys.Prefix, err)
	}
	return nil
}

func isRedisAuthError(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "NOAUTH") || strings.Contains(msg, "WRONGPASS") || strings.Contains(msg, "NOPERM")
}

// SetupWithManager registers the controller and its watches: catalogs
// (spec and annotation changes), the ToolDefinitions they select (spec,
// label and validity changes, before and after), the ToolSources of
// those, and the Secrets they refer to.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.ToolCatalog{}, secretRefIndex, func(o client.Object) []string {
		return catalogconfig.SecretNames(o.(*v1alpha1.ToolCatalog))
	}); err != nil {
		return fmt.Errorf("indexing catalogs by secret: %w", err)
	}
	if r.Pass == nil || r.Published == nil || r.Resolver == nil || r.Providers == nil || r.Grades == nil || r.Records == nil {
		return errors.New("the ToolCatalog reconciler needs its pass, published catalogs, resolver, providers, grading and records writer")
	}
	if err := mgr.Add(r.Grades); err != nil {
		return fmt.Errorf("adding the grading: %w", err)
	}
	if err := mgr.Add(r.Records); err != nil {
		return fmt.Errorf("adding the records writer: %w", err)
	}
	r.lost = make(chan event.GenericEvent, 64)
	if err := mgr.Add(r.lossWatcher()); err != nil {
		return fmt.Errorf("adding the loss probe: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.ToolCatalog{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&v1alpha1.ToolDefinition{}, handler.Funcs{
			CreateFunc: func(ctx context.Context, e event.CreateEvent, q reconcile.Queue) {
				r.enqueueSelecting(ctx, q, e.Object)
			},
			UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q reconcile.Queue) {
				if e.ObjectOld.GetGeneration() == e.ObjectNew.GetGeneration() &&
					labels.Equals(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()) &&
					e.ObjectOld.GetDeletionTimestamp().Equal(e.ObjectNew.GetDeletionTimestamp()) &&
					!validityChanged(e.ObjectOld, e.ObjectNew) {
					return
				}
				r.enqueueSelecting(ctx, q, e.ObjectOld, e.ObjectNew)
			},
			DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q reconcile.Queue) {
				r.enqueueSelecting(ctx, q, e.Object)
			},
		}).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.catalogsForSecret)).
		// A source's record decides which of its tools are served.
		Watches(&v1alpha1.ToolSource{}, handler.EnqueueRequestsFromMapFunc(r.catalogsForSource), builder.WithPredicates(importsChanged)).
		// A catalog whose Redis lost what it published is published again.
		WatchesRawSource(source.Channel(r.lost, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Named("toolcatalog").
		Complete(reconcile.QuietOnShutdown(r))
}

// validityChanged reports whether a ToolDefinition's reconciler changed
// its verdict on the tool (the Valid condition's status or reason), as it
// does without a new generation when the tool's ToolSource confirms or
// denies having created it, which the catalogs' passes check too. A first
// verdict follows the creation, which queued the catalogs already.
func validityChanged(before, after client.Object) bool {
	verdict := func(obj client.Object) *metav1.Condition {
		if td, ok := obj.(*v1alpha1.ToolDefinition); ok {
			return meta.FindStatusCondition(td.Status.Conditions, v1alpha1.ConditionValid)
		}
		return nil
	}
	was, is := verdict(before), verdict(after)
	return was != nil && is != nil && (was.Status != is.Status || was.Reason != is.Reason)
}

// enqueueSelecting queues every catalog whose selector matches any of the
// given versions of a ToolDefinition, so a tool that stops matching is
// dropped as surely as a new match is added.
func (r *Reconciler) enqueueSelecting(ctx context.Context, q reconcile.Queue, objs ...client.Object) {
	seen := map[string]bool{}
	for _, obj := range objs {
		names, err := cached.CatalogsSelecting(ctx, r.Client, obj)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Finding the catalogs of a ToolDefinition", "toolDefinition", client.ObjectKeyFromObject(obj))
		}
		for _, tc := range names {
			key := client.ObjectKey{Namespace: obj.GetNamespace(), Name: tc}
			// Told before it is queued: its pass looks at what changed.
			r.Published.Changed(key.String(), obj.GetName())
			if !seen[tc] {
				seen[tc] = true
				q.Add(ctrl.Request{NamespacedName: key})
			}
		}
	}
}

// catalogsForSource queues the catalogs that select what a ToolSource
// imports: its ToolDefinitions carry its labels and its name.
func (r *Reconciler) catalogsForSource(ctx context.Context, obj client.Object) []ctrl.Request {
	ts, ok := obj.(*v1alpha1.ToolSource)
	if !ok {
		return nil
	}
	stamped := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ts.Namespace, Labels: map[string]string{}}}
	maps.Copy(stamped.Labels, ts.Spec.Labels)
	stamped.Labels[v1alpha1.LabelToolSource] = ts.Name
	names, err := cached.CatalogsSelecting(ctx, r.Client, stamped)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Finding the catalogs of a ToolSource", "toolSource", client.ObjectKeyFromObject(ts))
	}
	// The source's record decides which of the ToolDefinitions naming
	// it are valid, whatever their labels: the next pass of each catalog
	// of the namespace looks at every tool.
	r.Published.AllChangedIn(ts.Namespace)
	reqs := make([]ctrl.Request, 0, len(names))
	for _, name := range names {
		reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ts.Namespace, Name: name}})
	}
	return reqs
}

// importsChanged passes a ToolSource's creation, deletion, and the
// updates that change its record of what it created or its last sync.
var importsChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	before, ok1 := e.ObjectOld.(*v1alpha1.ToolSource)
	after, ok2 := e.ObjectNew.(*v1alpha1.ToolSource)
	return ok1 && ok2 && (!equality.Semantic.DeepEqual(before.Status.Imported, after.Status.Imported) ||
		!equality.Semantic.DeepEqual(before.Status.LastSyncTime, after.Status.LastSyncTime) && before.Status.Imported == nil)
}}

func (r *Reconciler) catalogsForSecret(ctx context.Context, obj client.Object) []ctrl.Request {
	list := &v1alpha1.ToolCatalogList{}
	if err := r.List(ctx, list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{secretRefIndex: obj.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing ToolCatalogs by Secret")
		return nil
	}
	reqs := make([]ctrl.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}
