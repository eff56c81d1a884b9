package toolcatalog

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/internal/reconcile"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// The status model's pure parts, as plain table tests: no API server.

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
		res                       catalog.PassResult
		published, synced, ready  string
		observed, version         int64
		reconciling, handledToken bool
		// stalled says Stalled is True: kstatus reads it as Failed, and
		// Reconciling (a failure retried, work left) as InProgress.
		stalled bool
	}{
		{name: "a version published", res: catalog.PassResult{Outcome: outcome(3, true)},
			published: "True/VersionPublished", synced: "True/" + v1alpha1.ReasonAllEmbedded, ready: "True/Succeeded", observed: 2, version: 3},
		{name: "nothing to publish", res: catalog.PassResult{Outcome: outcome(3, false)},
			published: "True/UpToDate", synced: "True/" + v1alpha1.ReasonAllEmbedded, ready: "True/Succeeded", observed: 2, version: 3},
		{name: "publishing blocked", res: catalog.PassResult{Outcome: outcome(3, false, func(o *catalog.Outcome) { o.Build.Blocked = "model change staged" })},
			published: "False/PublishBlocked", synced: "False/PublishBlocked", ready: "False/PublishBlocked", observed: 2, version: 3},
		{name: "work left for the next pass", res: catalog.PassResult{Outcome: outcome(3, true, func(o *catalog.Outcome) { o.Refreshed.Unreached = []string{"b"} })},
			published: "True/VersionPublished", ready: "-", observed: 2, version: 3, reconciling: true},
		{name: "a refresh request handled", res: catalog.PassResult{Outcome: outcome(3, true), Request: catalog.Request{Token: "t1"}},
			published: "True/VersionPublished", synced: "True/" + v1alpha1.ReasonAllEmbedded, ready: "True/Succeeded", observed: 2, version: 3, handledToken: true},
		{name: "a stalled configuration moves observedGeneration", res: catalog.PassResult{Err: &reconcile.Error{Kind: reconcile.Stalled, Also: []string{v1alpha1.ConditionPublished}, Reason: v1alpha1.ReasonSecretNotFound, Message: "secret x"}},
			published: "False/SecretNotFound", synced: "-", ready: "False/SecretNotFound", observed: 2, version: 1, stalled: true},
		{name: "Redis down keeps observedGeneration", res: catalog.PassResult{Err: &reconcile.Error{Kind: reconcile.Transient, Also: []string{v1alpha1.ConditionPublished}, Reason: v1alpha1.ReasonRedisUnavailable, Message: "down"}},
			published: "False/RedisUnavailable", synced: "-", ready: "False/RedisUnavailable", observed: 1, version: 1, reconciling: true},
		{name: "an API error touches only Ready", res: catalog.PassResult{Err: &reconcile.Error{Kind: reconcile.Transient, Reason: v1alpha1.ReasonAPIError, Message: "listing"}},
			published: "-", synced: "-", ready: "False/" + v1alpha1.ReasonAPIError, observed: 1, version: 1, reconciling: true},
		{name: "a write conflict changes nothing but says a first pass is under way", res: catalog.PassResult{Err: fmt.Errorf("publish: %w", contract.ErrConflict)},
			published: "-", synced: "-", ready: "Unknown/Reconciling", observed: 1, version: 1, reconciling: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := &v1alpha1.ToolCatalog{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Generation: 2}}
			tc.Status.ObservedGeneration, tc.Status.Version = 1, 1
			at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			tt.res.At = at
			applyStatus(tc, tt.res)
			if published := tt.res.Outcome != nil && tt.res.Outcome.Published; published != (tc.Status.LastPublishedTime != nil) ||
				(published && !tc.Status.LastPublishedTime.Time.Equal(at)) {
				t.Errorf("lastPublishedTime = %v; want the pass's clock reading when it published", tc.Status.LastPublishedTime)
			}
			got := []string{cond(tc, v1alpha1.ConditionPublished), cond(tc, v1alpha1.ConditionEmbeddingsSynced), cond(tc, v1alpha1.ConditionReady)}
			want := []string{tt.published, tt.synced, tt.ready}
			if tt.reconciling && tt.res.Outcome != nil {
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
		res      catalog.PassResult
		patchErr error
		after    time.Duration
		retried  bool
	}{
		{"done waits for the resync", catalog.PassResult{Outcome: outcome(1, true), Resync: resync}, nil, resync, false},
		{"pending work follows at once", catalog.PassResult{Outcome: outcome(1, true, func(o *catalog.Outcome) { o.Refreshed.Unreached = []string{"b"} }), Resync: resync}, nil, pendingRequeue, false},
		{"transient tool failures back off", catalog.PassResult{Outcome: outcome(1, true, func(o *catalog.Outcome) {
			o.Refreshed.Failures = []catalog.Failure{{Object: "b", Tool: "b", Reason: "ProviderUnavailable", Kind: embedding.KindUnavailable}}
		}), Resync: resync}, nil, 0, true},
		{"a user's failure waits even when the status write failed", catalog.PassResult{Err: &reconcile.Error{Kind: reconcile.Stalled}, Resync: resync}, apiErr, resync, false},
		{"a failed status write backs off", catalog.PassResult{Outcome: outcome(1, true), Resync: resync}, apiErr, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := requeue(tt.res, tt.patchErr)
			if res.RequeueAfter != tt.after || (err != nil) != tt.retried {
				t.Fatalf("requeue = %+v, %v; want RequeueAfter %s, error returned %t", res, err, tt.after, tt.retried)
			}
		})
	}
}

// The events of a pass follow from what it came to: tools that failed,
// a refresh request not handled as asked, a recovery; none on a no-op.
func TestRecordEvents(t *testing.T) {
	rec := events.NewFakeRecorder(16)
	r := &Reconciler{Recorder: rec}
	failed := func(o *catalog.Outcome) {
		o.Refreshed.Failures = []catalog.Failure{{Object: "b", Tool: "b", Reason: v1alpha1.ReasonQueryGenerationFailed, Kind: embedding.KindServer}}
	}
	pass := func(base *v1alpha1.ToolCatalog, res catalog.PassResult) (*v1alpha1.ToolCatalog, []string) {
		tc := base.DeepCopy()
		applyStatus(tc, res)
		r.recordEvents(base, tc, res)
		var got []string
		for {
			select {
			case e := <-rec.Events:
				got = append(got, e)
			default:
				return tc, got
			}
		}
	}
	tc := &v1alpha1.ToolCatalog{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Generation: 1}}
	tc, got := pass(tc, catalog.PassResult{Outcome: outcome(1, true)})
	if len(got) != 1 || !strings.HasPrefix(got[0], "Normal VersionPublished") {
		t.Fatalf("a first version: %q", got)
	}
	invalid := catalog.Request{Token: "t1", Mode: "everything", Invalid: `refresh request "t1" ignored`}
	tc, got = pass(tc, catalog.PassResult{Outcome: outcome(1, false, failed), Request: invalid})
	if len(got) != 2 || !strings.HasPrefix(got[0], "Warning ToolsFailed 1 tools not refreshed: b (QueryGenerationFailed)") ||
		!strings.HasPrefix(got[1], `Warning InvalidRefreshRequest refresh request "t1" ignored`) {
		t.Fatalf("a failed tool and an invalid request: %q", got)
	}
	if tc, got = pass(tc, catalog.PassResult{Outcome: outcome(1, false, failed)}); len(got) != 0 {
		t.Fatalf("the same failure again: %q", got)
	}
	if _, got = pass(tc, catalog.PassResult{Outcome: outcome(2, true)}); len(got) != 2 || !strings.HasPrefix(got[1], "Normal Recovered") {
		t.Fatalf("recovered: %q", got)
	}
}
