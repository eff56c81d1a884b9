package controllers

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/metrics"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// applyStatus writes what a pass came to into the catalog's status. Each
// step owns its condition: configuration, Redis and the key prefix own
// Published when they fail, the refresh owns EmbeddingsSynced, and Ready is
// derived from them. observedGeneration moves only when the pass got to an
// answer for this generation (an outcome, or a configuration error that
// only a change can fix), and a refresh request is recorded as handled
// only when the pass committed: a write conflict or an outage leaves it
// for the retry.
func applyStatus(tc *v1alpha1.ToolCatalog, res passResult) {
	if res.outcome == nil {
		applyError(tc, res.err)
		return
	}
	o := res.outcome
	st := &tc.Status
	if res.request.Token != "" {
		st.LastHandledRefreshAt = res.request.Token
		st.LastRefresh = res.request.Result(o.Plans)
	}
	counts := o.Counts()
	st.Counts = &counts
	st.Version = max(st.Version, o.Version)
	st.SchemaHash = o.Build.Document.SchemaHash
	if o.Build.Blocked != "" && o.Stored.Doc != nil {
		st.SchemaHash = o.Stored.Doc.SchemaHash
	}
	if o.Published {
		at := metav1.NewTime(res.at)
		st.LastPublishedTime = &at
	}
	st.FailingTools = o.FailingTools()
	st.ObservedGeneration = tc.Generation
	observeCounts(tc, counts)

	pub := condition(metav1.ConditionTrue, v1alpha1.ReasonUpToDate, fmt.Sprintf("version %d is current with %d tools", o.Version, len(o.Build.Document.Tools)))
	switch {
	case o.Build.Blocked != "":
		pub = condition(metav1.ConditionFalse, v1alpha1.ReasonPublishBlocked, o.Build.Blocked)
	case o.Published:
		pub = condition(metav1.ConditionTrue, v1alpha1.ReasonVersionPublished, fmt.Sprintf("version %d published with %d tools", o.Version, len(o.Build.Document.Tools)))
	}
	synced := condition(o.Synced())
	serves := fmt.Sprintf("version %d serves %d tools", o.Version, len(o.Build.Document.Tools))
	ready := condition(metav1.ConditionTrue, v1alpha1.ReasonSucceeded, serves)
	switch {
	case pub.Status != metav1.ConditionTrue:
		ready = pub
	case synced.Status != metav1.ConditionTrue:
		ready = synced
	}
	progress := ""
	if len(o.Remaining()) > 0 {
		progress = o.Progress()
		if ready.Reason == v1alpha1.ReasonRefreshing {
			ready.Message = progress + "; " + serves
		}
	}
	summarize(tc, nil, v1alpha1.ReasonRefreshing, progress)
	setConditions(tc, map[string]metav1.Condition{
		v1alpha1.ConditionPublished: pub, v1alpha1.ConditionEmbeddingsSynced: synced, v1alpha1.ConditionReady: ready,
	})
}

// applyError reports a pass that stopped before an outcome. A write
// conflict (another writer published first) changes nothing: the retry
// follows at once.
func applyError(tc *v1alpha1.ToolCatalog, err error) {
	var se *stepError
	switch {
	case errors.Is(err, contract.ErrConflict):
		if meta.FindStatusCondition(tc.Status.Conditions, v1alpha1.ConditionReady) == nil {
			setCondition(tc, v1alpha1.ConditionReady, metav1.ConditionUnknown, v1alpha1.ReasonReconciling, "first pass in progress")
		}
	case errors.As(err, &se):
		if se.kind == stalled {
			// Only a change can fix it: this generation has its answer.
			tc.Status.ObservedGeneration = tc.Generation
		}
		setFailed(tc, se, se.also...)
		summarize(tc, err, "", "")
	default:
		setCondition(tc, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonAPIError, fmt.Sprintf("the pass failed: %v; retrying with backoff", err))
		summarize(tc, err, "", "")
	}
}

func observeCounts(tc *v1alpha1.ToolCatalog, c v1alpha1.ToolCounts) {
	id := catalogID(tc)
	for state, n := range map[string]int32{"selected": c.Tools, "embedded": c.Embedded, "stale": c.Stale, "invalid": c.Invalid, "failed": c.Failed, "rejected": c.Rejected} {
		metrics.Tools.WithLabelValues(id, state).Set(float64(n))
	}
	metrics.Version.WithLabelValues(id).Set(float64(tc.Status.Version))
}

// recordEvents emits events for what changed, comparing the old status
// with the new one: never on a no-op pass.
func (r *ToolCatalogReconciler) recordEvents(base, tc *v1alpha1.ToolCatalog, res passResult) {
	if o := res.outcome; o != nil {
		if o.Published {
			r.Recorder.Eventf(tc, nil, corev1.EventTypeNormal, v1alpha1.ReasonVersionPublished, "Publish", "published version %d: %s", o.Version, o.Summary())
		}
		if failures := o.Failures(); len(failures) > 0 && failuresChanged(base.Status.FailingTools, tc.Status.FailingTools) {
			var parts []string
			for _, f := range tc.Status.FailingTools {
				parts = append(parts, fmt.Sprintf("%s (%s)", f.Tool, f.Reason))
			}
			r.Recorder.Eventf(tc, nil, corev1.EventTypeWarning, v1alpha1.ReasonToolsFailed, "Refresh", "%d tools not refreshed: %s", len(failures), catalog.ListNames(parts))
		}
		if lr := tc.Status.LastRefresh; res.request.Token != "" && lr != nil && lr.Result != v1alpha1.RefreshSucceeded {
			r.Recorder.Eventf(tc, nil, corev1.EventTypeWarning, v1alpha1.ReasonInvalidRefreshRequest, "Refresh", "%s", lr.Message)
		}
	}
	// Failing tools have the event above.
	recordReady(r.Recorder, base, tc, "Reconcile", v1alpha1.ReasonToolsFailed)
}

func failuresChanged(a, b []v1alpha1.ToolFailure) bool {
	if len(a) != len(b) {
		return true
	}
	for i := range a {
		if a[i].ToolDefinition != b[i].ToolDefinition || a[i].Reason != b[i].Reason {
			return true
		}
	}
	return false
}

// setConditions sets the catalog's Published, EmbeddingsSynced and Ready
// conditions, in that order, from conds.
func setConditions(tc *v1alpha1.ToolCatalog, conds map[string]metav1.Condition) {
	for _, t := range []string{v1alpha1.ConditionPublished, v1alpha1.ConditionEmbeddingsSynced, v1alpha1.ConditionReady} {
		if c, ok := conds[t]; ok {
			setCondition(tc, t, c.Status, c.Reason, c.Message)
		}
	}
}
