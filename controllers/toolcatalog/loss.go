package toolcatalog

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/published"
	"github.com/toolcatalog/tool-catalog-operator/internal/reconcile"
)

// lossWatcher probes, while the manager leads, the published versions of
// the catalogs it has published (published.States.WatchLosses) and
// makes the pass of each catalog found short due at once.
func (r *Reconciler) lossWatcher() manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		r.Published.WatchLosses(ctx, r.LossProbeInterval, func(id string) {
			ns, name, _ := strings.Cut(id, "/")
			select {
			case r.lost <- event.GenericEvent{Object: &v1alpha1.ToolCatalog{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}}:
			case <-ctx.Done():
			}
		})
		return nil
	})
}

// reportLoss says in the status, before the pass that publishes the
// catalog again, that Redis lost what was published: Published and Ready
// are False (reason PublishedDataLost) and the catalog is Reconciling.
func reportLoss(tc *v1alpha1.ToolCatalog, loss *published.Loss) {
	msg := loss.Message() + "; publishing the current state again"
	reconcile.SetCondition(tc, v1alpha1.ConditionPublished, metav1.ConditionFalse, v1alpha1.ReasonPublishedDataLost, msg)
	reconcile.SetCondition(tc, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonPublishedDataLost, msg)
	reconcile.SetCondition(tc, v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonPublishedDataLost, msg)
}

// recordLoss is the Warning event of a loss, once the pass that followed
// it is done: what was lost, and what the pass did about it.
func (r *Reconciler) recordLoss(tc *v1alpha1.ToolCatalog, loss *published.Loss, res catalog.PassResult) {
	then := "it is published again as soon as Redis answers"
	if o := res.Outcome; o != nil && o.Published && res.Err == nil {
		then = fmt.Sprintf("published the current state again as version %d, %s after the loss was found", o.Version, r.now().Sub(loss.At).Round(time.Millisecond))
	}
	r.Recorder.Eventf(tc, nil, corev1.EventTypeWarning, v1alpha1.ReasonPublishedDataLost, "Republish", "%s; %s", loss.Message(), then)
}
