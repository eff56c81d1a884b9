package samples

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/kube/crkube"
	"github.com/toolcatalog/tool-catalog-operator/internal/mcpsource"
)

// ApproveFirstImport waits until the ToolSource at key holds its first
// import for approval (RequireApproval holds every tool nobody approved)
// and approves all of it, as `kubectl toolcatalog approve SOURCE --all`
// does, with a ToolSourceApproval made as c's user. It returns the number of tools approved.
func ApproveFirstImport(ctx context.Context, c client.Client, key client.ObjectKey, timeout time.Duration) (int, error) {
	ts := &v1alpha1.ToolSource{}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, key, ts); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return len(ts.Status.PendingChanges) > 0, nil
	})
	if err != nil {
		return 0, fmt.Errorf("waiting for ToolSource %s to hold its first import: %w", key, err)
	}
	if _, err := mcpsource.Approve(ctx, crkube.Creator(c), ts, ts.Status.PendingChanges); err != nil {
		return 0, fmt.Errorf("approving the first import of ToolSource %s: %w", key, err)
	}
	return len(ts.Status.PendingChanges), nil
}
