package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	crreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
)

func TestRequeueFor(t *testing.T) {
	const resync, wait = time.Hour, 30 * time.Second
	apiErr := errors.New("the server is currently unable to handle the request")
	tests := []struct {
		name    string
		err     error
		after   time.Duration
		retried bool
	}{
		{"success waits for the resync", nil, resync, false},
		{"stalled waits for a change or the resync", &Error{Kind: Stalled, Reason: "InvalidConfiguration"}, resync, false},
		{"stalled stays stalled when the status write failed too", errors.Join(&Error{Kind: Stalled}, apiErr), resync, false},
		{"waiting is tried again after the delay", &Error{Kind: Waiting, Reason: "ServerUnreachable"}, wait, false},
		{"transient backs off", &Error{Kind: Transient, Reason: "ApplyFailed", Err: apiErr}, 0, true},
		{"an unclassified error backs off", apiErr, 0, true},
		{"a wrapped stalled error is still stalled", fmt.Errorf("pass: %w", &Error{Kind: Stalled}), resync, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := RequeueFor(tt.err, resync, wait)
			if res.RequeueAfter != tt.after || (err != nil) != tt.retried {
				t.Fatalf("RequeueFor = %+v, %v; want RequeueAfter %s, error returned %t", res, err, tt.after, tt.retried)
			}
		})
	}
}

func TestReadyTransition(t *testing.T) {
	c := func(s metav1.ConditionStatus, reason string) *metav1.Condition {
		return &metav1.Condition{Type: v1alpha1.ConditionReady, Status: s, Reason: reason}
	}
	tests := []struct {
		name           string
		before, after  *metav1.Condition
		eventType, why string
	}{
		{"first failure", nil, c(metav1.ConditionFalse, "RedisUnavailable"), corev1.EventTypeWarning, "RedisUnavailable"},
		{"the same failure again is no event", c(metav1.ConditionFalse, "RedisUnavailable"), c(metav1.ConditionFalse, "RedisUnavailable"), "", ""},
		{"a new reason is an event", c(metav1.ConditionFalse, "RedisUnavailable"), c(metav1.ConditionFalse, "SecretNotFound"), corev1.EventTypeWarning, "SecretNotFound"},
		{"recovery", c(metav1.ConditionFalse, "RedisUnavailable"), c(metav1.ConditionTrue, "Succeeded"), corev1.EventTypeNormal, "Recovered"},
		{"first success is no event", nil, c(metav1.ConditionTrue, "Succeeded"), "", ""},
		{"from unknown to true is no event", c(metav1.ConditionUnknown, "Reconciling"), c(metav1.ConditionTrue, "Succeeded"), "", ""},
		{"no condition", c(metav1.ConditionFalse, "X"), nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eventType, why, ok := readyTransition(tt.before, tt.after)
			if ok != (tt.eventType != "") || eventType != tt.eventType || why != tt.why {
				t.Fatalf("readyTransition = %q %q %t; want %q %q", eventType, why, ok, tt.eventType, tt.why)
			}
		})
	}
}

// Ready is summarised from the conditions a reconciler owns, and kstatus
// reads the summary as a user would expect: a failure only the user can
// fix is Failed, anything retried or under way InProgress, a settled
// object Current.
func TestSummarize(t *testing.T) {
	owned := []string{v1alpha1.ConditionPublished, v1alpha1.ConditionEmbeddingsSynced}
	set := func(conds ...metav1.Condition) []metav1.Condition { return conds }
	c := func(t string, s metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: t, Status: s, Reason: reason, Message: reason + " message"}
	}
	published, synced := c(v1alpha1.ConditionPublished, metav1.ConditionTrue, "VersionPublished"), c(v1alpha1.ConditionEmbeddingsSynced, metav1.ConditionTrue, "AllEmbedded")
	tests := []struct {
		name    string
		conds   []metav1.Condition
		s       Summary
		ready   string
		kstatus status.Status
	}{
		{"every owned condition True: the ready condition", set(published, synced),
			Summary{Owned: owned, Ready: Condition(metav1.ConditionTrue, "Succeeded", "serves")}, "True/Succeeded", status.CurrentStatus},
		{"no ready condition: the last owned one", set(published, synced),
			Summary{Owned: owned}, "True/AllEmbedded", status.CurrentStatus},
		{"the first owned condition not True, in order", set(c(v1alpha1.ConditionPublished, metav1.ConditionFalse, "PublishBlocked"), c(v1alpha1.ConditionEmbeddingsSynced, metav1.ConditionFalse, "ToolsFailed")),
			Summary{Owned: owned, Ready: Condition(metav1.ConditionTrue, "Succeeded", "serves")}, "False/PublishBlocked", status.InProgressStatus},
		{"an absent owned condition is skipped", set(c(v1alpha1.ConditionEmbeddingsSynced, metav1.ConditionFalse, "ToolsFailed")),
			Summary{Owned: owned}, "False/ToolsFailed", status.InProgressStatus},
		{"work under way is Reconciling", set(published, c(v1alpha1.ConditionEmbeddingsSynced, metav1.ConditionFalse, "Refreshing")),
			Summary{Owned: owned, Reason: "Refreshing", Progress: "3 of 9 tools embedded"}, "False/Refreshing", status.InProgressStatus},
		{"a stalled failure sets what it names, Ready and Stalled", set(published, synced),
			Summary{Owned: owned, Err: &Error{Kind: Stalled, Reason: "SecretNotFound", Message: "opt in", Also: []string{v1alpha1.ConditionPublished}}}, "False/SecretNotFound", status.FailedStatus},
		{"a transient failure is retried", set(published, synced),
			Summary{Owned: owned, Err: &Error{Kind: Transient, Reason: "RedisUnavailable", Message: "down"}}, "False/RedisUnavailable", status.InProgressStatus},
		{"an unclassified error is an API error", set(published, synced),
			Summary{Owned: owned, Err: errors.New("etcd timeout")}, "False/" + v1alpha1.ReasonAPIError, status.InProgressStatus},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := &v1alpha1.ToolCatalog{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Generation: 1}}
			tc.Status.ObservedGeneration = 1
			// A condition a previous reconcile left is replaced.
			tc.Status.Conditions = append(slices.Clone(tt.conds), c(v1alpha1.ConditionStalled, metav1.ConditionTrue, "Old"), c(v1alpha1.ConditionReady, metav1.ConditionTrue, "Old"))
			for i := range tc.Status.Conditions {
				tc.Status.Conditions[i].ObservedGeneration = 1
			}
			Summarize(tc, tt.s)
			ready := meta.FindStatusCondition(tc.Status.Conditions, v1alpha1.ConditionReady)
			if got := string(ready.Status) + "/" + ready.Reason; got != tt.ready {
				t.Errorf("Ready = %s; want %s", got, tt.ready)
			}
			var se *Error
			if errors.As(tt.s.Err, &se) {
				for _, also := range se.Also {
					if got := meta.FindStatusCondition(tc.Status.Conditions, also); got == nil || got.Status != metav1.ConditionFalse || got.Reason != se.Reason {
						t.Errorf("%s = %v; want False/%s", also, got, se.Reason)
					}
				}
			}
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tc)
			if err != nil {
				t.Fatal(err)
			}
			res, err := status.Compute(&unstructured.Unstructured{Object: m})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tt.kstatus {
				t.Errorf("kstatus = %s (%s); want %s", res.Status, res.Message, tt.kstatus)
			}
		})
	}
}

// A reconcile that fails because the manager is stopping returns no error
// (controller-runtime would log it at error level); the same error while
// the manager runs, and other errors while it stops, are returned.
func TestQuietOnShutdown(t *testing.T) {
	var fail error
	r := QuietOnShutdown(crreconcile.Func(func(context.Context, crreconcile.Request) (crreconcile.Result, error) {
		return crreconcile.Result{}, fail
	}))
	running := context.Background()
	stopping, stop := context.WithCancel(context.Background())
	stop()
	canceled := fmt.Errorf("removing finalizer: %w", context.Canceled)
	for _, c := range []struct {
		ctx     context.Context
		err     error
		wantErr bool
	}{
		{stopping, canceled, false},
		{running, canceled, true},
		{stopping, errors.New("the object has been modified"), true},
		{stopping, nil, false},
	} {
		fail = c.err
		if _, err := r.Reconcile(c.ctx, crreconcile.Request{}); (err != nil) != c.wantErr {
			t.Errorf("error %v while the context is %v: got %v", c.err, c.ctx.Err(), err)
		}
	}
}
