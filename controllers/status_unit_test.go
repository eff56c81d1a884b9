package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// The status model's pure parts, as plain table tests: no API server.

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
		{"stalled waits for a change or the resync", &stepError{kind: stalled, reason: "InvalidConfiguration"}, resync, false},
		{"stalled stays stalled when the status write failed too", errors.Join(&stepError{kind: stalled}, apiErr), resync, false},
		{"waiting is tried again after the delay", &stepError{kind: waiting, reason: "ServerUnreachable"}, wait, false},
		{"transient backs off", &stepError{kind: transient, reason: "ApplyFailed", err: apiErr}, 0, true},
		{"an unclassified error backs off", apiErr, 0, true},
		{"a wrapped stalled error is still stalled", fmt.Errorf("pass: %w", &stepError{kind: stalled}), resync, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := requeueFor(tt.err, resync, wait)
			if res.RequeueAfter != tt.after || (err != nil) != tt.retried {
				t.Fatalf("requeueFor = %+v, %v; want RequeueAfter %s, error returned %t", res, err, tt.after, tt.retried)
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

// outcome is a pass that selected tools and came to what the options set.
func outcome(version int64, published bool, opts ...func(*catalog.Outcome)) *catalog.Outcome {
	o := &catalog.Outcome{Catalog: "c", Version: version, Published: published,
		Build:     catalog.Build{Document: &contract.Document{SchemaHash: "s" + strconv.FormatInt(version, 10), Tools: []contract.Tool{{Name: "a"}, {Name: "b"}}}},
		Refreshed: catalog.Refreshed{Results: map[string]catalog.Result{}},
		Plans:     []catalog.ToolPlan{{Name: "a"}, {Name: "b"}},
	}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

func TestApplyStatus(t *testing.T) {
	cond := func(tc *v1alpha1.ToolCatalog, t string) string {
		if c := meta.FindStatusCondition(tc.Status.Conditions, t); c != nil {
			return string(c.Status) + "/" + c.Reason
		}
		return "-"
	}
	tests := []struct {
		name                      string
		res                       passResult
		published, synced, ready  string
		observed, version         int64
		reconciling, handledToken bool
		// stalled says Stalled is True: kstatus reads it as Failed, and
		// Reconciling (a failure retried, work left) as InProgress.
		stalled bool
	}{
		{name: "a version published", res: passResult{outcome: outcome(3, true)},
			published: "True/VersionPublished", synced: "True/" + v1alpha1.ReasonAllEmbedded, ready: "True/Succeeded", observed: 2, version: 3},
		{name: "nothing to publish", res: passResult{outcome: outcome(3, false)},
			published: "True/UpToDate", synced: "True/" + v1alpha1.ReasonAllEmbedded, ready: "True/Succeeded", observed: 2, version: 3},
		{name: "publishing blocked", res: passResult{outcome: outcome(3, false, func(o *catalog.Outcome) { o.Build.Blocked = "model change staged" })},
			published: "False/PublishBlocked", synced: "False/PublishBlocked", ready: "False/PublishBlocked", observed: 2, version: 3},
		{name: "work left for the next pass", res: passResult{outcome: outcome(3, true, func(o *catalog.Outcome) { o.Refreshed.Unreached = []string{"b"} })},
			published: "True/VersionPublished", ready: "-", observed: 2, version: 3, reconciling: true},
		{name: "a refresh request handled", res: passResult{outcome: outcome(3, true), request: catalog.Request{Token: "t1"}},
			published: "True/VersionPublished", synced: "True/" + v1alpha1.ReasonAllEmbedded, ready: "True/Succeeded", observed: 2, version: 3, handledToken: true},
		{name: "a stalled configuration moves observedGeneration", res: passResult{err: &stepError{kind: stalled, also: []string{v1alpha1.ConditionPublished}, reason: v1alpha1.ReasonSecretNotFound, message: "secret x"}},
			published: "False/SecretNotFound", synced: "-", ready: "False/SecretNotFound", observed: 2, version: 1, stalled: true},
		{name: "Redis down keeps observedGeneration", res: passResult{err: &stepError{kind: transient, also: []string{v1alpha1.ConditionPublished}, reason: v1alpha1.ReasonRedisUnavailable, message: "down"}},
			published: "False/RedisUnavailable", synced: "-", ready: "False/RedisUnavailable", observed: 1, version: 1, reconciling: true},
		{name: "an API error touches only Ready", res: passResult{err: &stepError{kind: transient, reason: v1alpha1.ReasonAPIError, message: "listing"}},
			published: "-", synced: "-", ready: "False/" + v1alpha1.ReasonAPIError, observed: 1, version: 1, reconciling: true},
		{name: "a write conflict changes nothing but says a first pass is under way", res: passResult{err: fmt.Errorf("publish: %w", contract.ErrConflict)},
			published: "-", synced: "-", ready: "Unknown/Reconciling", observed: 1, version: 1, reconciling: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := &v1alpha1.ToolCatalog{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Generation: 2}}
			tc.Status.ObservedGeneration, tc.Status.Version = 1, 1
			at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			tt.res.at = at
			applyStatus(tc, tt.res)
			if published := tt.res.outcome != nil && tt.res.outcome.Published; published != (tc.Status.LastPublishedTime != nil) ||
				(published && !tc.Status.LastPublishedTime.Time.Equal(at)) {
				t.Errorf("lastPublishedTime = %v; want the pass's clock reading when it published", tc.Status.LastPublishedTime)
			}
			got := []string{cond(tc, v1alpha1.ConditionPublished), cond(tc, v1alpha1.ConditionEmbeddingsSynced), cond(tc, v1alpha1.ConditionReady)}
			want := []string{tt.published, tt.synced, tt.ready}
			if tt.reconciling && tt.res.outcome != nil {
				want[1], want[2] = got[1], got[2] // Refreshing; checked below
			}
			if !slices.Equal(got, want) {
				t.Errorf("Published, EmbeddingsSynced, Ready = %v; want %v", got, want)
			}
			if tc.Status.ObservedGeneration != tt.observed || tc.Status.Version != tt.version {
				t.Errorf("observedGeneration %d, version %d; want %d, %d", tc.Status.ObservedGeneration, tc.Status.Version, tt.observed, tt.version)
			}
			if r := meta.FindStatusCondition(tc.Status.Conditions, v1alpha1.ConditionReconciling); (r != nil) != tt.reconciling {
				t.Errorf("Reconciling = %v; want present %t", r, tt.reconciling)
			}
			if st := meta.FindStatusCondition(tc.Status.Conditions, v1alpha1.ConditionStalled); (st != nil) != tt.stalled {
				t.Errorf("Stalled = %v; want present %t", st, tt.stalled)
			}
			if handled := tc.Status.LastHandledRefreshAt == "t1"; handled != tt.handledToken {
				t.Errorf("lastHandledRefreshAt = %q", tc.Status.LastHandledRefreshAt)
			}
		})
	}
}

func TestPassResultRequeue(t *testing.T) {
	const resync = 5 * time.Minute
	apiErr := errors.New("patching status: conflict")
	tests := []struct {
		name     string
		res      passResult
		patchErr error
		after    time.Duration
		retried  bool
	}{
		{"done waits for the resync", passResult{outcome: outcome(1, true), resync: resync}, nil, resync, false},
		{"pending work follows at once", passResult{outcome: outcome(1, true, func(o *catalog.Outcome) { o.Refreshed.Unreached = []string{"b"} }), resync: resync}, nil, pendingRequeue, false},
		{"transient tool failures back off", passResult{outcome: outcome(1, true, func(o *catalog.Outcome) {
			o.Refreshed.Failures = []catalog.Failure{{Object: "b", Tool: "b", Reason: "ProviderUnavailable", Kind: embedding.KindUnavailable}}
		}), resync: resync}, nil, 0, true},
		{"a user's failure waits even when the status write failed", passResult{err: &stepError{kind: stalled}, resync: resync}, apiErr, resync, false},
		{"a failed status write backs off", passResult{outcome: outcome(1, true), resync: resync}, apiErr, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := tt.res.requeue(tt.patchErr)
			if res.RequeueAfter != tt.after || (err != nil) != tt.retried {
				t.Fatalf("requeue = %+v, %v; want RequeueAfter %s, error returned %t", res, err, tt.after, tt.retried)
			}
		})
	}
}

func TestConfusableTools(t *testing.T) {
	q := &v1alpha1.CatalogQuality{ConfusablePairs: []v1alpha1.ConfusablePair{
		{Tools: []string{"a", "b"}, Similarity: "0.97"},
		{Tools: []string{"a", "c"}, Similarity: "0.91"},
		{Tools: []string{"broken"}, Similarity: "0.90"},
	}}
	got := confusableTools(q)
	if got["a"].Name != "b" || got["b"].Name != "a" || got["c"].Name != "a" || got["c"].Similarity != "0.91" || len(got) != 3 {
		t.Fatalf("confusableTools = %v; a tool names its most similar other tool", got)
	}
	if len(confusableTools(nil)) != 0 {
		t.Fatal("no grading, no confusable tools")
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
		s       summary
		ready   string
		kstatus status.Status
	}{
		{"every owned condition True: the ready condition", set(published, synced),
			summary{owned: owned, ready: condition(metav1.ConditionTrue, "Succeeded", "serves")}, "True/Succeeded", status.CurrentStatus},
		{"no ready condition: the last owned one", set(published, synced),
			summary{owned: owned}, "True/AllEmbedded", status.CurrentStatus},
		{"the first owned condition not True, in order", set(c(v1alpha1.ConditionPublished, metav1.ConditionFalse, "PublishBlocked"), c(v1alpha1.ConditionEmbeddingsSynced, metav1.ConditionFalse, "ToolsFailed")),
			summary{owned: owned, ready: condition(metav1.ConditionTrue, "Succeeded", "serves")}, "False/PublishBlocked", status.InProgressStatus},
		{"an absent owned condition is skipped", set(c(v1alpha1.ConditionEmbeddingsSynced, metav1.ConditionFalse, "ToolsFailed")),
			summary{owned: owned}, "False/ToolsFailed", status.InProgressStatus},
		{"work under way is Reconciling", set(published, c(v1alpha1.ConditionEmbeddingsSynced, metav1.ConditionFalse, "Refreshing")),
			summary{owned: owned, reason: "Refreshing", progress: "3 of 9 tools embedded"}, "False/Refreshing", status.InProgressStatus},
		{"a stalled failure sets what it names, Ready and Stalled", set(published, synced),
			summary{owned: owned, err: &stepError{kind: stalled, reason: "SecretNotFound", message: "opt in", also: []string{v1alpha1.ConditionPublished}}}, "False/SecretNotFound", status.FailedStatus},
		{"a transient failure is retried", set(published, synced),
			summary{owned: owned, err: &stepError{kind: transient, reason: "RedisUnavailable", message: "down"}}, "False/RedisUnavailable", status.InProgressStatus},
		{"an unclassified error is an API error", set(published, synced),
			summary{owned: owned, err: errors.New("etcd timeout")}, "False/" + v1alpha1.ReasonAPIError, status.InProgressStatus},
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
			summarize(tc, tt.s)
			ready := meta.FindStatusCondition(tc.Status.Conditions, v1alpha1.ConditionReady)
			if got := string(ready.Status) + "/" + ready.Reason; got != tt.ready {
				t.Errorf("Ready = %s; want %s", got, tt.ready)
			}
			var se *stepError
			if errors.As(tt.s.err, &se) {
				for _, also := range se.also {
					if got := meta.FindStatusCondition(tc.Status.Conditions, also); got == nil || got.Status != metav1.ConditionFalse || got.Reason != se.reason {
						t.Errorf("%s = %v; want False/%s", also, got, se.reason)
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
	r := quietOnShutdown(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, fail }))
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
		if _, err := r.Reconcile(c.ctx, reconcile.Request{}); (err != nil) != c.wantErr {
			t.Errorf("error %v while the context is %v: got %v", c.err, c.ctx.Err(), err)
		}
	}
}
