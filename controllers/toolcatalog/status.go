package toolcatalog

import (
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/metrics"
	"github.com/toolcatalog/tool-catalog-operator/internal/reconcile"
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
func applyStatus(tc *v1alpha1.ToolCatalog, res catalog.PassResult) {
	if res.Outcome == nil {
		applyError(tc, res.Err)
		return
	}
	o := res.Outcome
	st := &tc.Status
	if res.Request.Token != "" {
		st.LastHandledRefreshAt = res.Request.Token
		st.LastRefresh = res.Request.Result(o.Plans)
	}
	counts := o.Counts()
	st.Counts = &counts
	st.Version = max(st.Version, o.Version)
	st.SchemaHash = o.Build.Document.SchemaHash
	if o.Build.Blocked != "" && o.Stored.Doc != nil {
		st.SchemaHash = o.Stored.Doc.SchemaHash
	}
	if o.Published {
		at := metav1.NewTime(res.At)
		st.LastPublishedTime = &at
		st.PublishedVersions = recordVersion(st.PublishedVersions, o.Version, o.Build.Document.SchemaHash)
	}
	st.FailingTools = o.FailingTools()
	st.ObservedGeneration = tc.Generation
	observeCounts(tc, counts)

	pub := reconcile.Condition(metav1.ConditionTrue, v1alpha1.ReasonUpToDate, fmt.Sprintf("version %d is current with %d tools", o.Version, len(o.Build.Document.Tools)))
	switch {
	case o.Build.Blocked != "":
		pub = reconcile.Condition(metav1.ConditionFalse, v1alpha1.ReasonPublishBlocked, o.Build.Blocked)
	case o.Published:
		pub = reconcile.Condition(metav1.ConditionTrue, v1alpha1.ReasonVersionPublished, fmt.Sprintf("version %d published with %d tools", o.Version, len(o.Build.Document.Tools)))
	}
	synced := reconcile.Condition(o.Synced())
	serves := fmt.Sprintf("version %d serves %d tools", o.Version, len(o.Build.Document.Tools))
	progress := ""
	if len(o.Remaining()) > 0 {
		progress = o.Progress()
		if synced.Reason == v1alpha1.ReasonRefreshing {
			synced.Message = progress + "; " + serves
		}
	}
	reconcile.SetCondition(tc, v1alpha1.ConditionPublished, pub.Status, pub.Reason, pub.Message)
	reconcile.SetCondition(tc, v1alpha1.ConditionEmbeddingsSynced, synced.Status, synced.Reason, synced.Message)
	if res.Held {
		applyPin(tc, res.Hold, o.Version)
	}
	if st.Pin != nil {
		serves = fmt.Sprintf("version %d serves %d tools, held by a pin at version %d", o.Version, len(o.Build.Document.Tools), st.Pin.Version)
	}
	reconcile.Summarize(tc, reconcile.Summary{
		Err:      res.Err,
		Owned:    []string{v1alpha1.ConditionPublished, v1alpha1.ConditionPinned, v1alpha1.ConditionEmbeddingsSynced},
		Ready:    reconcile.Condition(metav1.ConditionTrue, v1alpha1.ReasonSucceeded, serves),
		Reason:   v1alpha1.ReasonRefreshing,
		Progress: progress,
	})
}

// applyPin reports what a pinned catalog serves: status.pin and the
// Pinned condition, both absent when spec.publish.pinVersion is not set.
func applyPin(tc *v1alpha1.ToolCatalog, h catalog.Hold, newest int64) {
	st := &tc.Status
	st.Pin = nil
	if h.Version > 0 {
		summary := fmt.Sprintf("pinned to %d, %d tools changed since", h.Version, h.Changed)
		st.Pin = &v1alpha1.PinStatus{Version: h.Version, ToolsChangedSince: int32(h.Changed), Summary: summary}
	}
	p := tc.Spec.Publish.PinVersion
	switch {
	case p == nil:
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionPinned)
	case h.Refused != nil:
		serving := fmt.Sprintf("the newest, version %d", newest)
		if h.Version > 0 {
			serving = fmt.Sprintf("version %d, pinned before", h.Version)
		}
		reconcile.SetCondition(tc, v1alpha1.ConditionPinned, metav1.ConditionFalse, v1alpha1.ReasonPinUnavailable,
			fmt.Sprintf("%v; serving %s. Set spec.publish.pinVersion to a retained version or clear it", h.Refused, serving))
	default:
		reconcile.SetCondition(tc, v1alpha1.ConditionPinned, metav1.ConditionTrue, v1alpha1.ReasonPinned,
			fmt.Sprintf("consumers are served version %d; version %d is published and served once spec.publish.pinVersion is cleared (%d tools changed since)", h.Version, newest, h.Changed))
	}
}

// summarizeFirstPass says, until a catalog's first pass comes to an
// answer, that it is under way.
func summarizeFirstPass(tc *v1alpha1.ToolCatalog) {
	const progress = "first pass in progress"
	reconcile.Summarize(tc, reconcile.Summary{Ready: reconcile.Condition(metav1.ConditionUnknown, v1alpha1.ReasonReconciling, progress), Reason: v1alpha1.ReasonReconciling, Progress: progress})
}

// applyError reports a pass that stopped before an outcome. A write
// conflict (another writer published first) changes nothing: the retry
// follows at once.
func applyError(tc *v1alpha1.ToolCatalog, err error) {
	se := reconcile.As(err)
	switch {
	case errors.Is(err, contract.ErrConflict):
		if meta.FindStatusCondition(tc.Status.Conditions, v1alpha1.ConditionReady) == nil {
			summarizeFirstPass(tc)
		}
		return
	case se != nil && se.Kind == reconcile.Stalled:
		// Only a change can fix it: this generation has its answer.
		tc.Status.ObservedGeneration = tc.Generation
	case se == nil:
		err = fmt.Errorf("the pass failed: %w", err)
	}
	reconcile.Summarize(tc, reconcile.Summary{Err: err})
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
func (r *Reconciler) recordEvents(base, tc *v1alpha1.ToolCatalog, res catalog.PassResult) {
	if o := res.Outcome; o != nil {
		if o.Published {
			r.Recorder.Eventf(tc, nil, corev1.EventTypeNormal, v1alpha1.ReasonVersionPublished, "Publish", "published version %d: %s", o.Version, o.Summary())
		}
		switch h := res.Hold; {
		case h.Set:
			r.Recorder.Eventf(tc, nil, corev1.EventTypeNormal, v1alpha1.ReasonPinned, "Pin", "serving version %d to consumers; version %d stays published, %d tools changed since", h.Version, o.Version, h.Changed)
		case h.Cleared:
			r.Recorder.Eventf(tc, nil, corev1.EventTypeNormal, v1alpha1.ReasonUnpinned, "Unpin", "serving the newest version, %d, to consumers again", o.Version)
		}
		if failures := o.Failures(); len(failures) > 0 && failuresChanged(base.Status.FailingTools, tc.Status.FailingTools) {
			var parts []string
			for _, f := range tc.Status.FailingTools {
				parts = append(parts, fmt.Sprintf("%s (%s)", f.Tool, f.Reason))
			}
			r.Recorder.Eventf(tc, nil, corev1.EventTypeWarning, v1alpha1.ReasonToolsFailed, "Refresh", "%d tools not refreshed: %s", len(failures), catalog.ListNames(parts))
		}
		if lr := tc.Status.LastRefresh; res.Request.Token != "" && lr != nil && lr.Result != v1alpha1.RefreshSucceeded {
			r.Recorder.Eventf(tc, nil, corev1.EventTypeWarning, v1alpha1.ReasonInvalidRefreshRequest, "Refresh", "%s", lr.Message)
		}
	}
	// Failing tools have the event above.
	reconcile.RecordReady(r.Recorder, base, tc, "Reconcile", v1alpha1.ReasonToolsFailed)
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

// maxPublishedVersions is how many published versions status keeps the
// schema hashes of: more than a catalog retains by default (5).
const maxPublishedVersions = 32

// recordVersion adds a published version to those kept, dropping the
// oldest past maxPublishedVersions.
func recordVersion(kept []v1alpha1.PublishedVersion, version int64, schemaHash string) []v1alpha1.PublishedVersion {
	kept = slices.DeleteFunc(slices.Clone(kept), func(v v1alpha1.PublishedVersion) bool { return v.Version >= version })
	kept = append(kept, v1alpha1.PublishedVersion{Version: version, SchemaHash: schemaHash})
	return kept[max(0, len(kept)-maxPublishedVersions):]
}
