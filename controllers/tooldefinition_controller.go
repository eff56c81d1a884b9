package controllers

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
)

// ToolDefinitionReconciler validates ToolDefinitions and records their spec
// hash, which catalogs compare with what they embedded to detect drift.
type ToolDefinitionReconciler struct {
	client.Client
	Recorder events.EventRecorder
}

// +kubebuilder:rbac:groups=toolcatalog.dev,resources=tooldefinitions,verbs=get;list;watch
// +kubebuilder:rbac:groups=toolcatalog.dev,resources=tooldefinitions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile validates one ToolDefinition and writes its status.
func (r *ToolDefinitionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
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
		if err := r.patchStatus(ctx, base, td); err != nil {
			retErr = kerrors.NewAggregate([]error{retErr, err})
		}
	}()

	if err := r.reconcileSpec(ctx, base, td); err != nil {
		return ctrl.Result{}, err
	}
	td.Status.ObservedGeneration = td.Generation
	return ctrl.Result{}, nil
}

// reconcileSpec computes the spec hash and the Valid and Ready conditions.
func (r *ToolDefinitionReconciler) reconcileSpec(ctx context.Context, base, td *v1alpha1.ToolDefinition) error {
	params := parametersBytes(td)
	hash, err := catalog.SpecHash(td.Spec.Name, td.Spec.Description, params)
	if err != nil {
		// The API server only stores JSON objects here, so this is a bug
		// rather than user input; surface it and let the queue back off.
		return fmt.Errorf("hashing spec: %w", err)
	}
	td.Status.SpecHash = hash

	reason, message := v1alpha1.ReasonSpecValid, "tool spec is valid"
	status := metav1.ConditionTrue
	if err := catalog.ValidateParameters(params); err != nil {
		status, message = metav1.ConditionFalse, err.Error()
		reason = v1alpha1.ReasonInvalidParametersSchema
		var pe *catalog.ParametersError
		if errors.As(err, &pe) && pe.NotObject {
			reason = v1alpha1.ReasonParametersNotObject
		}
	}
	setCondition(td, v1alpha1.ConditionValid, status, reason, message)
	// Until catalogs report embeddings, a tool is ready when it is valid.
	setCondition(td, v1alpha1.ConditionReady, status, reason, message)

	r.recordValidTransition(base, td)
	if status == metav1.ConditionFalse {
		ctrl.LoggerFrom(ctx).Info("Tool spec rejected", "reason", reason, "detail", message)
	}
	return nil
}

// recordValidTransition emits an event when validity changes, or when a
// still-invalid spec is invalid for a new reason, never on a no-op pass.
func (r *ToolDefinitionReconciler) recordValidTransition(base, td *v1alpha1.ToolDefinition) {
	before := meta.FindStatusCondition(base.Status.Conditions, v1alpha1.ConditionValid)
	after := meta.FindStatusCondition(td.Status.Conditions, v1alpha1.ConditionValid)
	if after == nil || (before != nil && before.Status == after.Status && before.Message == after.Message) {
		return
	}
	switch {
	case after.Status == metav1.ConditionFalse:
		r.Recorder.Eventf(td, nil, corev1.EventTypeWarning, after.Reason, "Validate", "tool %s rejected: %s", td.Spec.Name, after.Message)
	case before != nil && before.Status == metav1.ConditionFalse:
		r.Recorder.Eventf(td, nil, corev1.EventTypeNormal, after.Reason, "Validate", "tool %s is valid again", td.Spec.Name)
	}
}

func (r *ToolDefinitionReconciler) patchStatus(ctx context.Context, base, td *v1alpha1.ToolDefinition) error {
	patch := client.MergeFrom(base)
	data, err := patch.Data(td)
	if err != nil {
		return fmt.Errorf("computing status patch: %w", err)
	}
	if string(data) == "{}" {
		return nil
	}
	if err := r.Status().Patch(ctx, td, patch); err != nil {
		return fmt.Errorf("patching status: %w", client.IgnoreNotFound(err))
	}
	return nil
}

// SetupWithManager registers the controller. Status-only updates do not
// trigger a pass: the outcome depends on the spec alone.
func (r *ToolDefinitionReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.ToolDefinition{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("tooldefinition").
		Complete(r)
}

func parametersBytes(td *v1alpha1.ToolDefinition) []byte {
	if td.Spec.Parameters == nil {
		return nil
	}
	return td.Spec.Parameters.Raw
}

// setCondition sets a condition stamped with the object's generation.
func setCondition(obj interface {
	client.Object
	GetConditions() *[]metav1.Condition
}, condType string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(obj.GetConditions(), metav1.Condition{
		Type:               condType,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: obj.GetGeneration(),
	})
}
