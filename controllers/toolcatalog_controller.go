package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalogconfig"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/internal/metrics"
	"github.com/toolcatalog/tool-catalog-operator/internal/store"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

const (
	// secretRefIndex indexes ToolCatalogs by the Secrets they refer to.
	secretRefIndex = ".spec.secretRefs"
	// defaultPassTimeout bounds one pass's provider and Redis work.
	defaultPassTimeout = 10 * time.Minute
	// pendingRequeue is how soon a pass follows a restricted refresh that
	// left work behind.
	pendingRequeue = time.Second
)

// ToolCatalogReconciler keeps a catalog's embeddings current and publishes
// it to Redis as versions.
type ToolCatalogReconciler struct {
	client.Client
	// APIReader reads Secrets without caching them.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Redis holds one client per catalog.
	Redis *store.Pool
	// RetryPolicy overrides the providers' retry policy (tests shorten it).
	RetryPolicy *embedding.RetryPolicy
	// PassTimeout bounds one pass; defaultPassTimeout when zero.
	PassTimeout time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// +kubebuilder:rbac:groups=toolcatalog.dev,resources=toolcatalogs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=toolcatalog.dev,resources=toolcatalogs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=toolcatalog.dev,resources=toolcatalogs/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch

func (r *ToolCatalogReconciler) resolver() *catalogconfig.Resolver {
	return &catalogconfig.Resolver{Reader: r.APIReader, RetryPolicy: r.RetryPolicy}
}

func (r *ToolCatalogReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// workqueueLimiter is the queue event handlers add requests to.
type workqueueLimiter = workqueue.TypedRateLimitingInterface[reconcile.Request]

func catalogID(tc *v1alpha1.ToolCatalog) string { return tc.Namespace + "/" + tc.Name }

// Reconcile runs one incremental pass for a catalog.
func (r *ToolCatalogReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	tc := &v1alpha1.ToolCatalog{}
	if err := r.Get(ctx, req.NamespacedName, tc); err != nil {
		if client.IgnoreNotFound(err) == nil {
			r.Redis.Forget(req.String())
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !tc.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, tc)
	}
	if !controllerutil.ContainsFinalizer(tc, v1alpha1.FinalizerCleanup) {
		patch := client.MergeFrom(tc.DeepCopy())
		controllerutil.AddFinalizer(tc, v1alpha1.FinalizerCleanup)
		if err := r.Patch(ctx, tc, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding finalizer: %w", err)
		}
	}

	base := tc.DeepCopy()
	var p *pass
	var resync time.Duration
	defer func() {
		r.setStatus(tc, p, retErr)
		r.recordEvents(base, tc, p)
		if err := patchCatalogStatus(ctx, r.Client, base, tc); err != nil {
			retErr = kerrors.NewAggregate([]error{retErr, err})
		}
		var cerr *catalogconfig.Error
		if errors.As(retErr, &cerr) {
			// Fixing it changes the catalog or a watched Secret, which
			// triggers a pass; until then, check back at the resync.
			result, retErr = ctrl.Result{RequeueAfter: resync}, nil
		}
	}()

	resync = 10 * time.Minute
	cfg, err := r.resolver().Resolve(ctx, tc)
	if err != nil {
		return ctrl.Result{}, err
	}
	resync = cfg.Resync
	timeout := r.PassTimeout
	if timeout == 0 {
		timeout = defaultPassTimeout
	}
	passCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if p, err = r.refresh(passCtx, tc, cfg); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.syncRecords(ctx, p); err != nil {
		return ctrl.Result{}, err
	}
	if retryable := p.retryableFailures(); retryable > 0 {
		// Transient provider trouble: let the rate-limited queue back off.
		return ctrl.Result{}, fmt.Errorf("%d tools failed to refresh with transient errors; retrying with backoff", retryable)
	}
	if len(p.pendingTools()) > 0 {
		return ctrl.Result{RequeueAfter: pendingRequeue}, nil
	}
	return ctrl.Result{RequeueAfter: cfg.Resync}, nil
}

func (p *pass) retryableFailures() int {
	n := 0
	for _, f := range p.failures {
		if f.kind.Retryable() {
			n++
		}
	}
	return n
}

// setStatus writes the conditions and summary of a pass (or of the error
// that stopped it).
func (r *ToolCatalogReconciler) setStatus(tc *v1alpha1.ToolCatalog, p *pass, err error) {
	var cerr *catalogconfig.Error
	var rerr *redisError
	switch {
	case errors.As(err, &cerr):
		tc.Status.ObservedGeneration = tc.Generation
		setCondition(tc, v1alpha1.ConditionPublished, metav1.ConditionFalse, cerr.Reason, cerr.Message)
		setCondition(tc, v1alpha1.ConditionReady, metav1.ConditionFalse, cerr.Reason, cerr.Message)
		return
	case errors.As(err, &rerr):
		msg := fmt.Sprintf("cannot reach Redis at %s: %v; retrying with backoff, nothing was written", strings.Join(tc.Spec.Redis.Addresses, ","), rerr.err)
		setCondition(tc, v1alpha1.ConditionPublished, metav1.ConditionFalse, v1alpha1.ReasonRedisUnavailable, msg)
		setCondition(tc, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonRedisUnavailable, msg)
		return
	case p == nil || p.doc == nil || (err != nil && !p.published && p.snap == nil):
		if conditionOfCatalog(tc, v1alpha1.ConditionReady) == nil {
			setCondition(tc, v1alpha1.ConditionReady, metav1.ConditionUnknown, "Reconciling", "first pass in progress")
		}
		return
	}

	if p.refreshToken != "" {
		tc.Status.LastHandledRefreshAt = p.refreshToken
	}
	if err != nil && p.version == p.snap.Version && !p.published && p.blocked == "" && errors.Is(err, contract.ErrConflict) {
		return
	}
	p.applyStatus(&tc.Status)
	tc.Status.ObservedGeneration = tc.Generation

	pubStatus, pubReason := metav1.ConditionTrue, v1alpha1.ReasonUpToDate
	pubMsg := fmt.Sprintf("version %d is current with %d tools", p.version, len(p.doc.Tools))
	switch {
	case p.blocked != "":
		pubStatus, pubReason, pubMsg = metav1.ConditionFalse, v1alpha1.ReasonPublishBlocked, p.blocked
	case p.published:
		pubReason, pubMsg = v1alpha1.ReasonVersionPublished, fmt.Sprintf("version %d published with %d tools", p.version, len(p.doc.Tools))
	}
	setCondition(tc, v1alpha1.ConditionPublished, pubStatus, pubReason, pubMsg)
	synced, syncedReason, syncedMsg := p.syncedCondition()
	setCondition(tc, v1alpha1.ConditionEmbeddingsSynced, synced, syncedReason, syncedMsg)

	switch {
	case pubStatus != metav1.ConditionTrue:
		setCondition(tc, v1alpha1.ConditionReady, pubStatus, pubReason, pubMsg)
	case synced != metav1.ConditionTrue:
		setCondition(tc, v1alpha1.ConditionReady, synced, syncedReason, syncedMsg)
	default:
		setCondition(tc, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSucceeded,
			fmt.Sprintf("version %d serves %d tools", p.version, len(p.doc.Tools)))
	}
	if p.invalidRefresh != "" {
		r.Recorder.Eventf(tc, nil, corev1.EventTypeWarning, v1alpha1.ReasonInvalidRefreshRequest, "Refresh", "%s", p.invalidRefresh)
	}
}

func conditionOfCatalog(tc *v1alpha1.ToolCatalog, t string) *metav1.Condition {
	for i := range tc.Status.Conditions {
		if tc.Status.Conditions[i].Type == t {
			return &tc.Status.Conditions[i]
		}
	}
	return nil
}

func patchCatalogStatus(ctx context.Context, c client.Client, base, tc *v1alpha1.ToolCatalog) error {
	patch := client.MergeFrom(base)
	data, err := patch.Data(tc)
	if err != nil {
		return fmt.Errorf("computing status patch: %w", err)
	}
	if string(data) == "{}" {
		return nil
	}
	if err := c.Status().Patch(ctx, tc, patch); err != nil {
		return fmt.Errorf("patching status: %w", client.IgnoreNotFound(err))
	}
	return nil
}

// reconcileDelete removes the catalog's keys from Redis and its records
// from ToolDefinitions, then lets the catalog go. A Redis outage delays the
// cleanup (the error is retried with backoff); it is not skipped.
func (r *ToolCatalogReconciler) reconcileDelete(ctx context.Context, tc *v1alpha1.ToolCatalog) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(tc, v1alpha1.FinalizerCleanup) {
		return ctrl.Result{}, nil
	}
	keys := catalogconfig.KeysOf(tc)
	opts, err := r.resolver().RedisOptions(ctx, tc)
	var cerr *catalogconfig.Error
	switch {
	case errors.As(err, &cerr):
		// The Secret is gone (deleted with the namespace, say): try
		// without it rather than block the deletion forever.
		r.Recorder.Eventf(tc, nil, corev1.EventTypeWarning, cerr.Reason, "Cleanup", "cleaning up without credentials: %s", cerr.Message)
	case err != nil:
		return ctrl.Result{}, err
	}
	rc := r.Redis.Get(catalogID(tc), opts)
	if err := contract.Delete(ctx, rc, keys); err != nil {
		metrics.RedisErrors.WithLabelValues(catalogID(tc), "delete").Inc()
		if isRedisAuthError(err) {
			r.Recorder.Eventf(tc, nil, corev1.EventTypeWarning, v1alpha1.ReasonRedisUnavailable, "Cleanup",
				"could not remove the catalog's keys under %s: %v; remove them by hand", keys.Prefix, err)
		} else {
			r.Recorder.Eventf(tc, nil, corev1.EventTypeWarning, v1alpha1.ReasonRedisUnavailable, "Cleanup", "cannot reach Redis to remove the catalog's keys: %v; retrying", err)
			return ctrl.Result{}, fmt.Errorf("removing catalog keys: %w", err)
		}
	}
	list := &v1alpha1.ToolDefinitionList{}
	if err := r.List(ctx, list, client.InNamespace(tc.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing ToolDefinitions: %w", err)
	}
	for i := range list.Items {
		if recordOf(&list.Items[i], tc.Name) != nil {
			if err := r.applyRecord(ctx, tc, &list.Items[i], nil); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	r.Redis.Forget(catalogID(tc))
	metrics.ForgetCatalog(catalogID(tc))
	patch := client.MergeFrom(tc.DeepCopy())
	controllerutil.RemoveFinalizer(tc, v1alpha1.FinalizerCleanup)
	if err := r.Patch(ctx, tc, patch); err != nil {
		return ctrl.Result{}, fmt.Errorf("removing finalizer: %w", client.IgnoreNotFound(err))
	}
	return ctrl.Result{}, nil
}

func isRedisAuthError(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "NOAUTH") || strings.Contains(msg, "WRONGPASS") || strings.Contains(msg, "NOPERM")
}

// SetupWithManager registers the controller and its watches: catalogs
// (spec and annotation changes), the ToolDefinitions they select (spec and
// label changes, before and after), and the Secrets they refer to.
func (r *ToolCatalogReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.ToolCatalog{}, secretRefIndex, func(o client.Object) []string {
		return catalogconfig.SecretNames(o.(*v1alpha1.ToolCatalog))
	}); err != nil {
		return fmt.Errorf("indexing catalogs by secret: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.ToolCatalog{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&v1alpha1.ToolDefinition{}, handler.Funcs{
			CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueueLimiter) {
				r.enqueueSelecting(ctx, q, e.Object)
			},
			UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueueLimiter) {
				if e.ObjectOld.GetGeneration() == e.ObjectNew.GetGeneration() &&
					labels.Equals(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()) &&
					e.ObjectOld.GetDeletionTimestamp().Equal(e.ObjectNew.GetDeletionTimestamp()) {
					return
				}
				r.enqueueSelecting(ctx, q, e.ObjectOld, e.ObjectNew)
			},
			DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueueLimiter) {
				r.enqueueSelecting(ctx, q, e.Object)
			},
		}).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.catalogsForSecret)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Named("toolcatalog").
		Complete(r)
}

// enqueueSelecting queues every catalog whose selector matches any of the
// given versions of a ToolDefinition, so a tool that stops matching is
// dropped as surely as a new match is added.
func (r *ToolCatalogReconciler) enqueueSelecting(ctx context.Context, q workqueueLimiter, objs ...client.Object) {
	seen := map[string]bool{}
	for _, obj := range objs {
		for _, tc := range catalogsSelecting(ctx, r.Client, obj) {
			if !seen[tc] {
				seen[tc] = true
				q.Add(reconcile.Request{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: tc}})
			}
		}
	}
}

// catalogsSelecting returns the names of the catalogs in the object's
// namespace whose selector matches its labels.
func catalogsSelecting(ctx context.Context, c client.Client, obj client.Object) []string {
	list := &v1alpha1.ToolCatalogList{}
	if err := c.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing ToolCatalogs")
		return nil
	}
	var out []string
	for i := range list.Items {
		sel, err := metav1.LabelSelectorAsSelector(&list.Items[i].Spec.Selector)
		if err == nil && sel.Matches(labels.Set(obj.GetLabels())) {
			out = append(out, list.Items[i].Name)
		}
	}
	return out
}

func (r *ToolCatalogReconciler) catalogsForSecret(ctx context.Context, obj client.Object) []reconcile.Request {
	list := &v1alpha1.ToolCatalogList{}
	if err := r.List(ctx, list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{secretRefIndex: obj.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing ToolCatalogs by Secret")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

func toUnstructured(obj any) (map[string]any, error) {
	return runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
}
