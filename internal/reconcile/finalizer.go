package reconcile

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
)

// EnsureFinalizer adds the operator's cleanup finalizer to obj, with a
// merge patch, unless it has it.
func EnsureFinalizer(ctx context.Context, c client.Client, obj client.Object) error {
	if controllerutil.ContainsFinalizer(obj, v1alpha1.FinalizerCleanup) {
		return nil
	}
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	controllerutil.AddFinalizer(obj, v1alpha1.FinalizerCleanup)
	if err := c.Patch(ctx, obj, patch); err != nil {
		return fmt.Errorf("adding finalizer: %w", err)
	}
	return nil
}
