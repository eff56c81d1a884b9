package reconcile

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
)

// Conditioned is an object with status conditions.
type Conditioned interface {
	client.Object
	GetConditions() *[]metav1.Condition
}

// SetCondition sets a condition stamped with the object's generation.
func SetCondition(obj Conditioned, condType string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(obj.GetConditions(), metav1.Condition{
		Type:               condType,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: obj.GetGeneration(),
	})
}

// SetFailed sets each condition of also False with the failure's reason
// and message.
func SetFailed(obj Conditioned, e *Error, also ...string) {
	for _, t := range also {
		SetCondition(obj, t, metav1.ConditionFalse, e.Reason, e.Message)
	}
}

// Condition is a condition without its type, for Summary.Ready.
func Condition(status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Status: status, Reason: reason, Message: message}
}

// Summary is what a reconcile came to, for Summarize.
type Summary struct {
	// Owned lists the conditions the reconciler's steps set, with positive
	// polarity, most telling first: Ready is the first of them that is not
	// True. An absent one is skipped.
	Owned []string
	// Ready is Ready when every owned condition is True; when its status
	// is empty, Ready is the last owned condition.
	Ready metav1.Condition
	// Err is how the reconcile failed, if it did: an *Error sets False
	// the conditions it names and Ready, with its reason; any other error
	// sets Ready False as an API error retried with backoff.
	Err error
	// Progress, when set, says what work goes on, for Reconciling, with
	// Reason.
	Reason, Progress string
}

// Summarize sets Ready from the conditions a reconcile's steps own, and
// the two conditions kstatus reads beside it, with the abnormal-true
// polarity of Flux and Cluster API: Stalled when the failure is stalled
// (only a change by the user can help: kstatus says Failed), Reconciling
// when it is any other failure, which is retried, or when work goes on
// (InProgress), neither when the object is settled (Current once Ready is
// True). No step sets Ready itself.
func Summarize(obj Conditioned, s Summary) {
	conds := obj.GetConditions()
	e := As(s.Err)
	switch {
	case e != nil:
		SetFailed(obj, e, slices.Concat(e.Also, []string{v1alpha1.ConditionReady})...)
	case s.Err != nil:
		SetCondition(obj, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonAPIError, fmt.Sprintf("%v; retrying with backoff", s.Err))
	default:
		if ready, ok := readyOf(*conds, s); ok {
			SetCondition(obj, v1alpha1.ConditionReady, ready.Status, ready.Reason, ready.Message)
		}
	}
	switch {
	case e != nil && e.Kind == Stalled:
		meta.RemoveStatusCondition(conds, v1alpha1.ConditionReconciling)
		SetCondition(obj, v1alpha1.ConditionStalled, metav1.ConditionTrue, e.Reason, e.Message)
	case s.Err != nil:
		meta.RemoveStatusCondition(conds, v1alpha1.ConditionStalled)
		SetCondition(obj, v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonRetrying, s.Err.Error())
	case s.Progress != "":
		meta.RemoveStatusCondition(conds, v1alpha1.ConditionStalled)
		SetCondition(obj, v1alpha1.ConditionReconciling, metav1.ConditionTrue, s.Reason, s.Progress)
	default:
		meta.RemoveStatusCondition(conds, v1alpha1.ConditionStalled)
		meta.RemoveStatusCondition(conds, v1alpha1.ConditionReconciling)
	}
}

// readyOf is Ready as the owned conditions in conds make it, false when
// none is set and s gives no ready condition.
func readyOf(conds []metav1.Condition, s Summary) (metav1.Condition, bool) {
	var last *metav1.Condition
	for _, t := range s.Owned {
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
	case s.Ready.Status != "":
		return s.Ready, true
	case last != nil:
		return *last, true
	}
	return metav1.Condition{}, false
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

// RecordReady emits the event a change of Ready from base to obj
// deserves (readyTransition), unless skip names the reason (a reason with
// an event of its own).
func RecordReady(rec events.EventRecorder, base, obj Conditioned, action string, skip ...string) {
	before := meta.FindStatusCondition(*base.GetConditions(), v1alpha1.ConditionReady)
	after := meta.FindStatusCondition(*obj.GetConditions(), v1alpha1.ConditionReady)
	eventType, reason, ok := readyTransition(before, after)
	if !ok || slices.Contains(skip, reason) {
		return
	}
	if eventType == corev1.EventTypeNormal {
		rec.Eventf(obj, nil, eventType, reason, action, "recovered: %s", after.Message)
		return
	}
	rec.Eventf(obj, nil, eventType, reason, action, "%s", after.Message)
}
