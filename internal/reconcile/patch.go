package reconcile

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PatchStatus writes the status changes of obj since base, if any.
func PatchStatus(ctx context.Context, c client.Client, base, obj client.Object) error {
	return writeStatus(ctx, c, base, obj, client.MergeFrom(base))
}

// PatchStatusGuarded is PatchStatus that fails with a conflict when the
// object changed since base was read: a patch made from a read that lags
// behind the last write would leave what that write set and this one
// drops (the diff from a stale base does not name it). The queue retries
// with a fresh read.
func PatchStatusGuarded(ctx context.Context, c client.Client, base, obj client.Object, opts ...client.SubResourcePatchOption) error {
	return writeStatus(ctx, c, base, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}), opts...)
}

// writeStatus sends patch unless obj's status equals base's.
func writeStatus(ctx context.Context, c client.Client, base, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	data, err := client.MergeFrom(base).Data(obj)
	if err != nil {
		return fmt.Errorf("computing status patch: %w", err)
	}
	if string(data) == "{}" {
		return nil
	}
	// An object deleted meanwhile has no status to write.
	if err := client.IgnoreNotFound(c.Status().Patch(ctx, obj, patch, opts...)); err != nil {
		return fmt.Errorf("patching status: %w", err)
	}
	return nil
}
