package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// recordFieldOwner is the server-side apply field manager with which a
// catalog owns its entry in ToolDefinition status.catalogs. Field managers
// are at most 128 bytes: a long name is shortened with a hash of the whole
// name, so two long names never share a manager.
func recordFieldOwner(tc *v1alpha1.ToolCatalog) string {
	const prefix, limit = "toolcatalog.dev/catalog-", 128
	if len(prefix)+len(tc.Name) <= limit {
		return prefix + tc.Name
	}
	sum := sha256.Sum256([]byte(tc.Name))
	suffix := "-" + hex.EncodeToString(sum[:8])
	return prefix + tc.Name[:limit-len(prefix)-len(suffix)] + suffix
}

// syncRecords writes each selected ToolDefinition's record with
// server-side apply under this catalog's field manager, and removes the
// records of ToolDefinitions the catalog no longer selects. Only records
// that differ are written, with the Embedded and Ready conditions they
// imply, so the ToolDefinition controller has nothing left to write: one
// status write per change. A tool the catalog has not processed yet gets
// no record until it has. At most maxRecordsPerTurn are written per call,
// so other catalogs take turns when thousands change; more says some are
// left for the next call.
func (r *ToolCatalogReconciler) syncRecords(ctx context.Context, tc *v1alpha1.ToolCatalog, recs *catalog.Records) (more bool, err error) {
	selecting, err := selectingCatalogs(ctx, r.Client, tc.Namespace)
	if err != nil {
		return false, err
	}
	// Read-only, as in the pass.
	tds, err := r.toolDefinitions(ctx, tc.Namespace, labels.Everything())
	if err != nil {
		return false, fmt.Errorf("listing ToolDefinitions: %w", err)
	}
	confusable := confusableTools(tc.Status.Quality)
	written := 0
	for _, td := range tds {
		have := recordOf(td, tc.Name)
		want, selected := recs.For(td.Name, have)
		if selected {
			want.ConfusableWith = confusable[td.Spec.Name]
		}
		switch {
		case selected && have != nil && catalog.SameRecord(*have, want):
			continue
		case selected && have == nil && want.SpecHash == "" && want.Reason == "":
			continue // not processed yet
		case !selected && have == nil:
			continue
		}
		if written == maxRecordsPerTurn {
			return true, nil
		}
		var rec *v1alpha1.CatalogEmbeddingStatus
		if selected {
			rec = &want
		}
		if err := r.applyRecord(ctx, tc, td, rec, selecting(td)); err != nil {
			return false, err
		}
		written++
	}
	return false, nil
}

// maxRecordsPerTurn bounds the ToolDefinition records written in one turn
// of a catalog: about five seconds at the manager's default 50 requests
// per second.
const maxRecordsPerTurn = 250

// applyRecord sets (or, with nil, removes) this catalog's record on a
// ToolDefinition, with the Embedded and Ready conditions the records then
// imply (deriveEmbedded, given the catalogs that select it) once the
// ToolDefinition controller has written a status. Those conditions go with
// every apply from then on: server-side apply would remove fields this
// catalog's field manager applied before and now leaves out.
func (r *ToolCatalogReconciler) applyRecord(ctx context.Context, tc *v1alpha1.ToolCatalog, td *v1alpha1.ToolDefinition, rec *v1alpha1.CatalogEmbeddingStatus, selecting []string) error {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(v1alpha1.GroupVersion.String())
	u.SetKind("ToolDefinition")
	u.SetNamespace(td.Namespace)
	u.SetName(td.Name)
	records := []any{}
	if rec != nil {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rec)
		if err != nil {
			return err
		}
		records = append(records, m)
	}
	if err := unstructured.SetNestedSlice(u.Object, records, "status", "catalogs"); err != nil {
		return err
	}
	// A ToolDefinition the catalog embedded before the ToolDefinition
	// controller's first status is known to this catalog: valid (it was
	// selected) with the spec hash just embedded. Deriving from that, the
	// ToolDefinition controller's first write finds the conditions set.
	embeddedFirst := td.Status.SpecHash == "" && rec != nil && rec.Reason == "" && rec.SpecHash != ""
	if td.Status.SpecHash != "" || embeddedFirst {
		after := td.DeepCopy()
		after.Status.Catalogs = slices.DeleteFunc(after.Status.Catalogs, func(c v1alpha1.CatalogEmbeddingStatus) bool { return c.Catalog == tc.Name })
		if rec != nil {
			after.Status.Catalogs = append(after.Status.Catalogs, *rec)
		}
		if embeddedFirst {
			after.Status.SpecHash = rec.SpecHash
			setCondition(after, v1alpha1.ConditionValid, metav1.ConditionTrue, v1alpha1.ReasonSpecValid, "tool spec is valid")
		}
		deriveEmbedded(after, selecting)
		if rec != nil && rec.ConfusableWith != nil {
			setCondition(after, v1alpha1.ConditionConfusable, metav1.ConditionTrue, v1alpha1.ReasonConfusableWith, confusableMessage(tc.Name, rec.ConfusableWith))
		} else {
			meta.RemoveStatusCondition(&after.Status.Conditions, v1alpha1.ConditionConfusable)
		}
		var conds []any
		for _, t := range []string{v1alpha1.ConditionEmbedded, v1alpha1.ConditionReady, v1alpha1.ConditionConfusable} {
			c := meta.FindStatusCondition(after.Status.Conditions, t)
			if c == nil {
				continue
			}
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
			if err != nil {
				return err
			}
			conds = append(conds, m)
		}
		if len(conds) > 0 {
			if err := unstructured.SetNestedSlice(u.Object, conds, "status", "conditions"); err != nil {
				return err
			}
		}
	}
	err := r.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(recordFieldOwner(tc)), client.ForceOwnership)
	if err = client.IgnoreNotFound(err); err != nil {
		return fmt.Errorf("recording catalog status on ToolDefinition %s: %w", td.Name, err)
	}
	return nil
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

// recordConfusable warns of each confusable pair a grading found that the
// previous one did not.
func (r *ToolCatalogReconciler) recordConfusable(base, tc *v1alpha1.ToolCatalog) {
	seen := map[string]bool{}
	if q := base.Status.Quality; q != nil {
		for _, p := range q.ConfusablePairs {
			seen[strings.Join(p.Tools, "\x00")] = true
		}
	}
	for _, p := range tc.Status.Quality.ConfusablePairs {
		if len(p.Tools) != 2 || seen[strings.Join(p.Tools, "\x00")] {
			continue
		}
		r.Recorder.Eventf(tc, nil, corev1.EventTypeWarning, v1alpha1.ReasonConfusableTools, "Grade",
			"tools %s and %s are confusable: the queries of each retrieve the other (similarity %s); reword one description so a model can tell them apart",
			p.Tools[0], p.Tools[1], p.Similarity)
	}
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
