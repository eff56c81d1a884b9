package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
)

// The three reconcilers report status one way, after Flux's summarize and
// Cluster API's patch helper: a reconcile works on a copy of the object,
// sets its conditions in one place from what the steps came to (a step's
// failure is a stepError), writes the status once (patchStatus), emits
// events for transitions only (recordReady), and computes its requeue from
// the error's kind (requeueFor).

// errorKind says what retrying a failed step can achieve.
type errorKind int

const (
	// transient: the API server, a write conflict or an outage; retried
	// with the queue's backoff.
	transient errorKind = iota
	// waiting: something outside the cluster (an MCP server) is not
	// reachable or refused us; retried after a fixed delay.
	waiting
	// stalled: the user must change the object or a Secret; nothing is
	// retried before that change (which triggers a reconcile) or the
	// periodic resync.
	stalled
)

// stepError is a step's failure, classified for status: the condition
// reason, a message that says what happened and what to do, and what
// retrying can do.
type stepError struct {
	kind            errorKind
	reason, message string
	// also are the conditions besides Ready that the failure sets False
	// (a catalog that cannot reach Redis is not Published either).
	also []string
	err  error
}

func (e *stepError) Error() string { return e.message }
func (e *stepError) Unwrap() error { return e.err }

// requeueFor says when an object is due again after a reconcile that
// ended with err: a stalled error waits for resync (a fix triggers a
// reconcile sooner), a waiting one for wait, any other error goes back to
// the rate-limited queue, and success waits for resync.
func requeueFor(err error, resync, wait time.Duration) (ctrl.Result, error) {
	var se *stepError
	switch {
	case errors.As(err, &se) && se.kind == stalled:
		return ctrl.Result{RequeueAfter: resync}, nil
	case errors.As(err, &se) && se.kind == waiting:
		return ctrl.Result{RequeueAfter: wait}, nil
	case err != nil:
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: resync}, nil
}

// now reads clock, time.Now when nil: reconcilers take their clock as a
// field so tests can set it.
func now(clock func() time.Time) time.Time {
	if clock != nil {
		return clock()
	}
	return time.Now()
}

// conditioned is an object with status conditions.
type conditioned interface {
	client.Object
	GetConditions() *[]metav1.Condition
}

// setCondition sets a condition stamped with the object's generation.
func setCondition(obj conditioned, condType string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(obj.GetConditions(), metav1.Condition{
		Type:               condType,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: obj.GetGeneration(),
	})
}

// setFailed sets Ready, and each condition of also, False with the step
// error's reason and message.
func setFailed(obj conditioned, se *stepError, also ...string) {
	for _, t := range slices.Concat(also, []string{v1alpha1.ConditionReady}) {
		setCondition(obj, t, metav1.ConditionFalse, se.reason, se.message)
	}
}

// summarize sets the two conditions kstatus reads beside Ready, with the
// abnormal-true polarity of Flux and Cluster API, from how a reconcile
// ended: Stalled when err is stalled (only a change by the user can help:
// kstatus says Failed), Reconciling when err is any other failure, which
// is retried, or progress says what work goes on (InProgress), neither
// when the object is settled (Current once Ready is True).
func summarize(obj conditioned, err error, reason, progress string) {
	conds := obj.GetConditions()
	var se *stepError
	switch {
	case errors.As(err, &se) && se.kind == stalled:
		meta.RemoveStatusCondition(conds, v1alpha1.ConditionReconciling)
		setCondition(obj, v1alpha1.ConditionStalled, metav1.ConditionTrue, se.reason, se.message)
	case err != nil:
		meta.RemoveStatusCondition(conds, v1alpha1.ConditionStalled)
		setCondition(obj, v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonRetrying, err.Error())
	case progress != "":
		meta.RemoveStatusCondition(conds, v1alpha1.ConditionStalled)
		setCondition(obj, v1alpha1.ConditionReconciling, metav1.ConditionTrue, reason, progress)
	default:
		meta.RemoveStatusCondition(conds, v1alpha1.ConditionStalled)
		meta.RemoveStatusCondition(conds, v1alpha1.ConditionReconciling)
	}
}

func condition(status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Status: status, Reason: reason, Message: message}
}

// readyTransition says what event, if any, a change of Ready from before
// to after deserves: a Warning with the reason when it turns False or
// fails for a new reason, a Normal "Recovered" when it turns True after
// being False, nothing on a no-op reconcile.
func readyTransition(before, after *metav1.Condition) (eventType, reason string, ok bool) {
	if after == nil || (before != nil && before.Status == after.Status && before.Reason == after.Reason) {
		return "", "", false
	}
	switch {
	case after.Status == metav1.ConditionTrue && before != nil && before.Status == metav1.ConditionFalse:
		return corev1.EventTypeNormal, "Recovered", true
	case after.Status == metav1.ConditionFalse:
		return corev1.EventTypeWarning, after.Reason, true
	}
	return "", "", false
}

// recordReady emits the event readyTransition asks for, unless skip names
// the reason (a reason with an event of its own).
func recordReady(rec events.EventRecorder, base, obj conditioned, action string, skip ...string) {
	before := meta.FindStatusCondition(*base.GetConditions(), v1alpha1.ConditionReady)
	after := meta.FindStatusCondition(*obj.GetConditions(), v1alpha1.ConditionReady)
	eventType, reason, ok := readyTransition(before, after)
	if !ok {
		return
	}
	for _, s := range skip {
		if reason == s {
			return
		}
	}
	if eventType == corev1.EventTypeNormal {
		rec.Eventf(obj, nil, eventType, reason, action, "recovered: %s", after.Message)
		return
	}
	rec.Eventf(obj, nil, eventType, reason, action, "%s", after.Message)
}

// patchStatus writes the status changes of obj since base, if any.
func patchStatus(ctx context.Context, c client.Client, base, obj client.Object) error {
	return writeStatus(ctx, c, base, obj, client.MergeFrom(base))
}

// patchStatusGuarded is patchStatus that fails with a conflict when the
// object changed since base was read: a patch made from a read that lags
// behind the last write would leave what that write set and this one
// drops (the diff from a stale base does not name it). The queue retries
// with a fresh read.
func patchStatusGuarded(ctx context.Context, c client.Client, base, obj client.Object, opts ...client.SubResourcePatchOption) error {
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
