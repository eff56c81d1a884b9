package tooldefinition

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/kube/cached"
	"github.com/toolcatalog/tool-catalog-operator/internal/reconcile"
	"github.com/toolcatalog/tool-catalog-operator/internal/records"
	"github.com/toolcatalog/tool-catalog-operator/pkg/clip"
)

// Reconciler validates ToolDefinitions and records their spec
// hash, which catalogs compare with what they embedded to detect drift. It
// is the one writer of ToolDefinition status: the catalogs' records come
// to it through the Ledger.
type Reconciler struct {
	client.Client
	Recorder events.EventRecorder
	// Ledger holds the catalogs' records of the tools; the ToolCatalog
	// reconciler shares it.
	Ledger *records.Ledger
}

// +kubebuilder:rbac:groups=toolcatalog.dev,resources=tooldefinitions,verbs=get;list;watch
// +kubebuilder:rbac:groups=toolcatalog.dev,resources=toolcatalogs,verbs=get;list;watch
// +kubebuilder:rbac:groups=toolcatalog.dev,resources=tooldefinitions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile validates one ToolDefinition and writes its status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	td := &v1alpha1.ToolDefinition{}
	if err := r.Get(ctx, req.NamespacedName, td); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !td.DeletionTimestamp.IsZero() {
		// Nothing external belongs to a ToolDefinition: catalogs drop it
		// from their next version when it no longer exists.
		return ctrl.Result{}, nil
	}

	base := td.DeepCopy()
	defer func() {
		err := reconcile.PatchStatusGuarded(ctx, r.Client, base, td, client.FieldOwner(FieldOwner))
		if retErr == nil && apierrors.IsConflict(err) {
			// The cache had not caught up with the last write (this
			// reconciler's own, or a source's): read again, without
			// logging an error for it.
			result, err = ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		retErr = errors.Join(retErr, err)
	}()

	source, err := r.namedSource(ctx, td)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.reconcileSpec(ctx, base, td, source); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.reconcileCatalogs(ctx, td); err != nil {
		summarizeTool(td, err)
		return ctrl.Result{}, err
	}
	r.reconcilePendingChange(base, td)
	td.Status.ObservedGeneration = td.Generation
	summarizeTool(td, nil)
	return ctrl.Result{}, nil
}

// summarizeTool sets Ready from Valid and Embedded, and Stalled and
// Reconciling: a spec only its author can fix is stalled; a tool its
// source has yet to record is in progress. A valid tool no catalog
// selects has nothing to wait for and is Ready; one a catalog has yet to
// embed is Ready=False, which kstatus reads as in progress too.
func summarizeTool(td *v1alpha1.ToolDefinition, err error) {
	s := reconcile.Summary{Owned: []string{v1alpha1.ConditionValid, v1alpha1.ConditionEmbedded}, Err: err}
	if embedded := meta.FindStatusCondition(td.Status.Conditions, v1alpha1.ConditionEmbedded); embedded != nil && embedded.Reason == v1alpha1.ReasonNotSelected {
		s.Owned = s.Owned[:1]
		s.Ready = reconcile.Condition(metav1.ConditionTrue, v1alpha1.ReasonSpecValid, "tool spec is valid; no catalog selects it")
	}
	valid := meta.FindStatusCondition(td.Status.Conditions, v1alpha1.ConditionValid)
	switch {
	case err != nil:
	case valid != nil && valid.Status == metav1.ConditionFalse && valid.Reason == v1alpha1.ReasonSourceUnconfirmed:
		s.Reason, s.Progress = valid.Reason, valid.Message
	case valid != nil && valid.Status == metav1.ConditionFalse:
		s.Err = &reconcile.Error{Kind: reconcile.Stalled, Reason: valid.Reason, Message: valid.Message}
	}
	reconcile.Summarize(td, s)
}

// namedSource reads the ToolSource that spec.source.toolSource names:
// nil when it names none or the source does not exist.
func (r *Reconciler) namedSource(ctx context.Context, td *v1alpha1.ToolDefinition) (*v1alpha1.ToolSource, error) {
	src := td.Spec.Source
	if src == nil || src.ToolSource == "" {
		return nil, nil
	}
	ts := &v1alpha1.ToolSource{}
	err := r.Get(ctx, client.ObjectKey{Namespace: td.Namespace, Name: src.ToolSource}, ts, client.UnsafeDisableDeepCopy)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading ToolSource %s: %w", src.ToolSource, err)
	}
	return ts, nil
}

// reconcileSpec computes the spec hash and the Valid condition.
// source is the ToolSource spec.source names, if any.
func (r *Reconciler) reconcileSpec(ctx context.Context, base, td *v1alpha1.ToolDefinition, source *v1alpha1.ToolSource) error {
	params := catalog.Parameters(td)
	hash, err := catalog.SpecHash(td.Spec.Name, td.Spec.Description, params)
	if err != nil {
		// The API server only stores JSON objects here, so this is a bug
		// rather than user input; surface it and let the queue back off.
		return fmt.Errorf("hashing spec: %w", err)
	}
	td.Status.SpecHash = hash

	reason, message := v1alpha1.ReasonSpecValid, "tool spec is valid"
	status := metav1.ConditionTrue
	if invalid := catalog.ValidateSpec(td, source); invalid != nil {
		status, reason, message = metav1.ConditionFalse, invalid.Reason, invalid.Message
	}
	reconcile.SetCondition(td, v1alpha1.ConditionValid, status, reason, message)
	r.recordValidTransition(base, td)
	if status == metav1.ConditionFalse {
		ctrl.LoggerFrom(ctx).Info("Tool spec rejected", "reason", reason, "detail", message)
	}
	return nil
}

// reconcileCatalogs sets the records of the catalogs that select the tool
// from the ledger, and derives Embedded, Ready and Confusable from them.
func (r *Reconciler) reconcileCatalogs(ctx context.Context, td *v1alpha1.ToolDefinition) error {
	catalogs, err := cached.CatalogsSelecting(ctx, r.Client, td)
	if err != nil {
		// Without the list, "not selected" could be a lie: keep the
		// records and conditions as they are and retry.
		return err
	}
	setRecords(td, catalogs, r.Ledger.RecordFor)
	deriveEmbedded(td, catalogs)
	deriveConfusable(td)
	return nil
}

// reconcilePendingChange shows, as the ChangePending condition, the
// upstream change a ToolSource holds for approval on this tool (its
// toolcatalog.dev/pending-change annotation), with a Warning event when a
// new change starts waiting.
func (r *Reconciler) reconcilePendingChange(base, td *v1alpha1.ToolDefinition) {
	value, ok := td.Annotations[v1alpha1.AnnotationPendingChange]
	// Only a source's own tool holds its changes; the annotation on any
	// other is somebody's writing.
	if valid := meta.FindStatusCondition(td.Status.Conditions, v1alpha1.ConditionValid); valid != nil && (valid.Reason == v1alpha1.ReasonSourceNotOwned || valid.Reason == v1alpha1.ReasonSourceUnconfirmed) {
		ok = false
	}
	if !ok {
		meta.RemoveStatusCondition(&td.Status.Conditions, v1alpha1.ConditionChangePending)
		return
	}
	hash, summary, _ := strings.Cut(value, " ")
	source := ""
	if td.Spec.Source != nil {
		source = td.Spec.Source.ToolSource
	}
	message := clip.Truncate(fmt.Sprintf("ToolSource %s holds an upstream change to this tool for approval (spec hash %s): %s; catalogs serve the approved version until kubectl toolcatalog approve %s %s",
		source, hash, summary, source, td.Spec.Name), 2048)
	reconcile.SetCondition(td, v1alpha1.ConditionChangePending, metav1.ConditionTrue, v1alpha1.ReasonAwaitingApproval, message)
	if before := meta.FindStatusCondition(base.Status.Conditions, v1alpha1.ConditionChangePending); before == nil || before.Message != message {
		r.Recorder.Eventf(td, nil, corev1.EventTypeWarning, v1alpha1.ReasonAwaitingApproval, "HoldChange", "%s", clip.Truncate(message, 1024))
	}
}

// recordValidTransition emits an event when validity changes, or when a
// still-invalid spec is invalid for a new reason, never on a no-op pass.
func (r *Reconciler) recordValidTransition(base, td *v1alpha1.ToolDefinition) {
	before := meta.FindStatusCondition(base.Status.Conditions, v1alpha1.ConditionValid)
	after := meta.FindStatusCondition(td.Status.Conditions, v1alpha1.ConditionValid)
	if after == nil || (before != nil && before.Status == after.Status && before.Message == after.Message) {
		return
	}
	// A tool waits for its source's record only while the source's sync
	// that created it is under way: that is no news.
	if after.Reason == v1alpha1.ReasonSourceUnconfirmed || (before != nil && before.Reason == v1alpha1.ReasonSourceUnconfirmed && after.Status == metav1.ConditionTrue) {
		return
	}
	switch {
	case after.Status == metav1.ConditionFalse:
		r.Recorder.Eventf(td, nil, corev1.EventTypeWarning, after.Reason, "Validate", "tool %s rejected: %s", td.Spec.Name, after.Message)
	case before != nil && before.Status == metav1.ConditionFalse:
		r.Recorder.Eventf(td, nil, corev1.EventTypeNormal, after.Reason, "Validate", "tool %s is valid again", td.Spec.Name)
	}
}

// SetupWithManager registers the controller. It runs on spec, label,
// annotation and owner changes, when the ledger has a new record for the
// tool, and when a catalog that selects (or selected) the tool is
// created, changed, deleted or being deleted; its own status updates do
// not trigger it.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Ledger == nil {
		return errors.New("the ToolDefinition reconciler needs a Ledger, shared with the ToolCatalog reconciler")
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.ToolDefinition{}, sourceRefIndex, func(o client.Object) []string {
		if src := o.(*v1alpha1.ToolDefinition).Spec.Source; src != nil && src.ToolSource != "" {
			return []string{src.ToolSource}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing ToolDefinitions by source: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.ToolDefinition{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}, ownersChanged,
			r.Ledger.Behind()))).
		WatchesRawSource(r.Ledger.Source()).
		Watches(&v1alpha1.ToolCatalog{}, handler.Funcs{
			CreateFunc: func(ctx context.Context, e event.CreateEvent, q reconcile.Queue) {
				r.enqueueSelected(ctx, q, e.Object)
			},
			UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q reconcile.Queue) {
				if e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
					e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero() {
					r.enqueueSelected(ctx, q, e.ObjectOld, e.ObjectNew)
				}
			},
			DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q reconcile.Queue) {
				r.enqueueSelected(ctx, q, e.Object)
			},
		}).
		// A source's record and last sync decide whether the tools naming
		// it are valid.
		Watches(&v1alpha1.ToolSource{}, handler.Funcs{
			CreateFunc: func(ctx context.Context, e event.CreateEvent, q reconcile.Queue) {
				r.enqueueNaming(ctx, q, nil, e.Object)
			},
			UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q reconcile.Queue) {
				r.enqueueNaming(ctx, q, e.ObjectOld, e.ObjectNew)
			},
			DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q reconcile.Queue) {
				r.enqueueNaming(ctx, q, nil, e.Object)
			},
		}).
		// A bulk apply brings thousands of tools, each needing a status
		// write: a few at a time keep the API server's round trips
		// overlapping.
		WithOptions(controller.Options{MaxConcurrentReconciles: toolDefinitionWorkers}).
		Named("tooldefinition").
		Complete(reconcile.QuietOnShutdown(r))
}

// conflictRetry is how soon a ToolDefinition whose status write met a
// newer resourceVersion is read and written again: the cache is about
// that far behind.
const conflictRetry = 100 * time.Millisecond

// toolDefinitionWorkers is how many ToolDefinitions are reconciled at
// once.
const toolDefinitionWorkers = 4

// sourceRefIndex indexes ToolDefinitions by the ToolSource they name.
const sourceRefIndex = ".spec.source.toolSource"

// enqueueNaming queues the ToolDefinitions that name a ToolSource: after
// an update (before is set), only those whose validity it changes, so a
// sync that records nothing new costs no reconcile of its tools.
func (r *Reconciler) enqueueNaming(ctx context.Context, q reconcile.Queue, before, after client.Object) {
	list := &v1alpha1.ToolDefinitionList{}
	if err := r.List(ctx, list, client.InNamespace(after.GetNamespace()), client.MatchingFields{sourceRefIndex: after.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the ToolDefinitions of a ToolSource")
		return
	}
	old, _ := before.(*v1alpha1.ToolSource)
	now, _ := after.(*v1alpha1.ToolSource)
	for i := range list.Items {
		td := &list.Items[i]
		if old != nil && now != nil {
			was, _ := catalog.SourceReason(td, old)
			is, _ := catalog.SourceReason(td, now)
			if was == is {
				continue
			}
		}
		q.Add(ctrl.Request{NamespacedName: client.ObjectKeyFromObject(td)})
	}
}

// enqueueSelected queues the ToolDefinitions any version of a catalog
// selects.
func (r *Reconciler) enqueueSelected(ctx context.Context, q reconcile.Queue, objs ...client.Object) {
	for _, obj := range objs {
		tc, ok := obj.(*v1alpha1.ToolCatalog)
		if !ok {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&tc.Spec.Selector)
		if err != nil {
			continue
		}
		list := &v1alpha1.ToolDefinitionList{}
		if err := r.List(ctx, list, client.InNamespace(tc.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing ToolDefinitions")
			continue
		}
		for i := range list.Items {
			q.Add(ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
}

// ownersChanged passes updates of the owner references, which decide
// whether spec.source.toolSource is honoured.
var ownersChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	return !equality.Semantic.DeepEqual(e.ObjectOld.GetOwnerReferences(), e.ObjectNew.GetOwnerReferences())
}}
