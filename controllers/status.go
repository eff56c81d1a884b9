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
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
)

// The three reconcilers report status one way, after Flux's summarize and
// Cluster API's patch helper: a reconcile works on a copy of the object,
// its steps set the conditions they own (a step's failure is a
// stepError), summarize derives Ready, Stalled and Reconciling from them,
// the status is written once (patchStatus), events mark transitions only
// (recordReady), and the requeue follows from the error's kind
// (requeueFor).

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

// quietOnShutdown is r, except that an error a reconcile meets because
// the manager is stopping (its context canceled) is not returned: it is
// no fault, the work is not lost (the next leader reconciles every object
// when it starts), and controller-runtime would log it at error level.
func quietOnShutdown(r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		res, err := r.Reconcile(ctx, req)
		if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return reconcile.Result{}, nil
		}
		return res, err
	})
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

// setFailed sets each condition of also False with the step error's
// reason and message.
func setFailed(obj conditioned, se *stepError, also ...string) {
	for _, t := range also {
		setCondition(obj, t, metav1.ConditionFalse, se.reason, se.message)
	}
}

// summary is what a reconcile came to, for summarize.
type summary struct {
	// owned lists the conditions the reconciler's steps set, with positive
	// polarity, most telling first: Ready is the first of them that is not
	// True. An absent one is skipped.
	owned []string
	// ready is Ready when every owned condition is True; when its status
	// is empty, Ready is the last owned condition.
	ready metav1.Condition
	// err is how the reconcile failed, if it did: a stepError sets False
	// the conditions it names and Ready, with its reason; any other error
	// sets Ready False as an API error retried with backoff.
	err error
	// progress, when set, says what work goes on, for Reconciling, with
	// reason.
	reason, progress string
}

// summarize sets Ready from the conditions a reconcile's steps own, and
// the two conditions kstatus reads beside it, with the abnormal-true
// polarity of Flux and Cluster API: Stalled when the failure is stalled
// (only a change by the user can help: kstatus says Failed), Reconciling
// when it is any other failure, which is retried, or when work goes on
// (InProgress), neither when the object is settled (Current once Ready is
// True). No step sets Ready itself.
func summarize(obj conditioned, s summary) {
	conds := obj.GetConditions()
	var se *stepError
	switch {
	case errors.As(s.err, &se):
		setFailed(obj, se, slices.Concat(se.also, []string{v1alpha1.ConditionReady})...)
	case s.err != nil:
		setCondition(obj, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonAPIError, fmt.Sprintf("%v; retrying with backoff", s.err))
	default:
		if ready, ok := readyOf(*conds, s); ok {
			setCondition(obj, v1alpha1.ConditionReady, ready.Status, ready.Reason, ready.Message)
		}
	}
	switch {
	case se != nil && se.kind == stalled:
		meta.RemoveStatusCondition(conds, v1alpha1.ConditionReconciling)
		setCondition(obj, v1alpha1.ConditionStalled, metav1.ConditionTrue, se.reason, se.message)
	case s.err != nil:
		meta.RemoveStatusCondition(conds, v1alpha1.ConditionStalled)
		setCondition(obj, v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonRetrying, s.err.Error())
	case s.progress != "":
		meta.RemoveStatusCondition(conds, v1alpha1.ConditionStalled)
		setCondition(obj, v1alpha1.ConditionReconciling, metav1.ConditionTrue, s.reason, s.progress)
	default:
		meta.RemoveStatusCondition(conds, v1alpha1.ConditionStalled)
		meta.RemoveStatusCondition(conds, v1alpha1.ConditionReconciling)
	}
}

// readyOf is Ready as the owned conditions in conds make it, false when
// none is set and s gives no ready condition.
func readyOf(conds []metav1.Condition, s summary) (metav1.Condition, bool) {
	var last *metav1.Condition
	for _, t := range s.owned {
		c := meta.FindStatusCondition(conds, t)
		if c == nil {
			continue
		}
		if c.Status != metav1.ConditionTrue {
			return *c, true
		}
		last = c
	}
	switch {
	case s.ready.Status != "":
		return s.ready, true
	case last != nil:
		return *last, true
	}
	return metav1.Condition{}, false
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
