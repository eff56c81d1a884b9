package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/internal/metrics"
)

// maxFailingTools bounds status.failingTools; counts give the totals.
const maxFailingTools = 20

// toolCurrent reports whether a tool's vector matches its current spec and
// model after the pass.
func (p *pass) toolCurrent(i int) bool {
	name := p.tools[i].entry.Name
	_, embedded := p.results[name]
	return (embedded && p.blocked == "") || !p.plans[i].Stale
}

// applyStatus fills the catalog status from a completed pass.
func (p *pass) applyStatus(st *v1alpha1.ToolCatalogStatus) {
	c := v1alpha1.ToolCounts{Tools: int32(len(p.tools))}
	for i, pl := range p.plans {
		_, embedded := p.results[pl.Name]
		embedded = embedded && p.blocked == ""
		switch {
		case p.toolCurrent(i):
			c.Embedded++
		case pl.Stale:
			c.Stale++
		}
		if pl.Invalid && !embedded {
			c.Invalid++
		}
	}
	for _, f := range p.failures {
		switch f.reason {
		case v1alpha1.ReasonInvalidSpec, v1alpha1.ReasonNameConflict:
			c.Rejected++
		default:
			c.Failed++
		}
	}
	st.Counts = &c
	id := catalogID(p.tc)
	for state, n := range map[string]int32{"selected": c.Tools, "embedded": c.Embedded, "stale": c.Stale, "invalid": c.Invalid, "failed": c.Failed, "rejected": c.Rejected} {
		metrics.Tools.WithLabelValues(id, state).Set(float64(n))
	}
	metrics.Version.WithLabelValues(id).Set(float64(max(st.Version, p.version)))
	st.Version = max(st.Version, p.version)
	st.SchemaHash = p.doc.SchemaHash
	if p.blocked != "" && p.prevDoc != nil {
		st.SchemaHash = p.prevDoc.SchemaHash
	}
	if p.published {
		now := metav1.Now()
		st.LastPublishedTime = &now
	}
	st.FailingTools = nil
	failures := append([]toolFailure(nil), p.failures...)
	sort.Slice(failures, func(i, j int) bool { return failures[i].toolDefinition < failures[j].toolDefinition })
	for i, f := range failures {
		if i == maxFailingTools {
			break
		}
		st.FailingTools = append(st.FailingTools, v1alpha1.ToolFailure{ToolDefinition: f.toolDefinition, Tool: f.tool, Reason: f.reason, Message: truncate(f.message, 512)})
	}
}

// syncedCondition summarises the tools for EmbeddingsSynced.
func (p *pass) syncedCondition() (metav1.ConditionStatus, string, string) {
	count := func(pred func(toolFailure) bool) (n int, names []string) {
		for _, f := range p.failures {
			if pred(f) {
				n++
				names = append(names, f.tool)
			}
		}
		sort.Strings(names)
		return n, names
	}
	byReason := func(reasons ...string) func(toolFailure) bool {
		return func(f toolFailure) bool {
			for _, r := range reasons {
				if f.reason == r {
					return true
				}
			}
			return false
		}
	}
	if n, names := count(func(f toolFailure) bool { return f.kind == embedding.KindAuth }); n > 0 {
		return metav1.ConditionFalse, v1alpha1.ReasonProviderAuthFailed, fmt.Sprintf("the provider rejected the API key for %d tools (%s): check the apiKeySecretRef Secret", n, listNames(names))
	}
	if n, names := count(byReason(v1alpha1.ReasonQueryGenerationFailed, v1alpha1.ReasonEmbeddingError)); n > 0 {
		return metav1.ConditionFalse, v1alpha1.ReasonToolsFailed, fmt.Sprintf("%d tools failed to refresh and keep their previous embedding (%s); see status.failingTools", n, listNames(names))
	}
	if n, names := count(byReason(v1alpha1.ReasonNameConflict)); n > 0 {
		return metav1.ConditionFalse, v1alpha1.ReasonNameConflict, fmt.Sprintf("%d ToolDefinitions share tool names (%s): rename or unselect all but one", n, listNames(names))
	}
	if n, names := count(byReason(v1alpha1.ReasonInvalidSpec)); n > 0 {
		return metav1.ConditionFalse, v1alpha1.ReasonToolsRejected, fmt.Sprintf("%d selected ToolDefinitions are invalid and left out (%s); see their Valid condition", n, listNames(names))
	}
	if p.blocked != "" {
		return metav1.ConditionFalse, v1alpha1.ReasonPublishBlocked, p.blocked
	}
	if pending := p.pendingTools(); len(pending) > 0 {
		return metav1.ConditionFalse, v1alpha1.ReasonRefreshPending, fmt.Sprintf("%d tools wait for the next pass (%s)", len(pending), listNames(pending))
	}
	return metav1.ConditionTrue, v1alpha1.ReasonAllEmbedded, fmt.Sprintf("%d of %d tools embedded with %s", len(p.tools), len(p.tools), p.cfg.Embedder.Model())
}

// pendingTools lists tools a restricted refresh left for the next pass.
func (p *pass) pendingTools() []string {
	var names []string
	for _, pl := range p.plans {
		if pl.Deferred {
			names = append(names, pl.Name)
		}
	}
	return names
}

func listNames(names []string) string {
	const show = 5
	if len(names) <= show {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:show], ", ") + fmt.Sprintf(" and %d more", len(names)-show)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// recordFieldOwner is the server-side apply field manager with which a
// catalog owns its entry in ToolDefinition status.catalogs.
func recordFieldOwner(tc *v1alpha1.ToolCatalog) string {
	return truncate("toolcatalog.dev/catalog-"+tc.Name, 128)
}

// desiredRecords computes each selected ToolDefinition's record for this
// catalog, keyed by ToolDefinition name.
func (p *pass) desiredRecords(existing map[string]*v1alpha1.CatalogEmbeddingStatus) map[string]v1alpha1.CatalogEmbeddingStatus {
	out := map[string]v1alpha1.CatalogEmbeddingStatus{}
	base := func(tdName, tool string) v1alpha1.CatalogEmbeddingStatus {
		rec := v1alpha1.CatalogEmbeddingStatus{Catalog: p.tc.Name}
		m := p.stored[tool].Metadata
		if res, ok := p.results[tool]; ok && p.blocked == "" {
			m = &res.meta
		}
		if m == nil {
			return rec
		}
		rec.SpecHash, rec.Model, rec.QueryCount = m.SpecHash, m.Model, int32(len(m.SyntheticQueries))
		t := metav1.NewTime(m.EmbeddedAt)
		rec.EmbeddedTime = &t
		rec.CatalogVersion = p.version
		if old := existing[tdName]; old != nil && old.SpecHash == rec.SpecHash && old.Model == rec.Model && old.CatalogVersion > 0 {
			if _, fresh := p.results[tool]; !fresh || !p.published {
				rec.CatalogVersion = old.CatalogVersion
			}
		}
		return rec
	}
	for _, t := range p.tools {
		out[t.td.Name] = base(t.td.Name, t.entry.Name)
	}
	for _, f := range p.failures {
		rec := base(f.toolDefinition, f.tool)
		if p.tool(f.tool) == nil || p.tool(f.tool).td.Name != f.toolDefinition {
			// Rejected or conflicting: what is stored under the name may
			// belong to another ToolDefinition.
			rec = v1alpha1.CatalogEmbeddingStatus{Catalog: p.tc.Name}
			if old := existing[f.toolDefinition]; old != nil {
				rec = *old
			}
		}
		rec.Reason, rec.Message = f.reason, truncate(f.message, 1024)
		out[f.toolDefinition] = rec
	}
	return out
}

// syncRecords writes each selected ToolDefinition's record with
// server-side apply under this catalog's field manager, and removes the
// records of ToolDefinitions the catalog no longer selects. Only records
// that differ are written.
func (r *ToolCatalogReconciler) syncRecords(ctx context.Context, p *pass) error {
	list := &v1alpha1.ToolDefinitionList{}
	if err := r.List(ctx, list, client.InNamespace(p.tc.Namespace)); err != nil {
		return fmt.Errorf("listing ToolDefinitions: %w", err)
	}
	existing := map[string]*v1alpha1.CatalogEmbeddingStatus{}
	for i := range list.Items {
		if rec := recordOf(&list.Items[i], p.tc.Name); rec != nil {
			existing[list.Items[i].Name] = rec
		}
	}
	desired := p.desiredRecords(existing)
	for i := range list.Items {
		td := &list.Items[i]
		want, selected := desired[td.Name]
		have := existing[td.Name]
		switch {
		case selected && have != nil && sameRecord(*have, want):
			continue
		case !selected && have == nil:
			continue
		}
		var rec *v1alpha1.CatalogEmbeddingStatus
		if selected {
			rec = &want
		}
		if err := r.applyRecord(ctx, p.tc, td, rec); err != nil {
			return err
		}
	}
	return nil
}

// applyRecord sets (or, with nil, removes) this catalog's record on a
// ToolDefinition.
func (r *ToolCatalogReconciler) applyRecord(ctx context.Context, tc *v1alpha1.ToolCatalog, td *v1alpha1.ToolDefinition, rec *v1alpha1.CatalogEmbeddingStatus) error {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(v1alpha1.GroupVersion.String())
	u.SetKind("ToolDefinition")
	u.SetNamespace(td.Namespace)
	u.SetName(td.Name)
	records := []any{}
	if rec != nil {
		m, err := toUnstructured(rec)
		if err != nil {
			return err
		}
		records = append(records, m)
	}
	if err := unstructured.SetNestedSlice(u.Object, records, "status", "catalogs"); err != nil {
		return err
	}
	err := r.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(recordFieldOwner(tc)), client.ForceOwnership)
	if err != nil {
		return fmt.Errorf("recording catalog status on ToolDefinition %s: %w", td.Name, client.IgnoreNotFound(err))
	}
	return nil
}

func recordOf(td *v1alpha1.ToolDefinition, catalog string) *v1alpha1.CatalogEmbeddingStatus {
	for i := range td.Status.Catalogs {
		if td.Status.Catalogs[i].Catalog == catalog {
			return &td.Status.Catalogs[i]
		}
	}
	return nil
}

func sameRecord(a, b v1alpha1.CatalogEmbeddingStatus) bool {
	ta, tb := int64(0), int64(0)
	if a.EmbeddedTime != nil {
		ta = a.EmbeddedTime.Unix()
	}
	if b.EmbeddedTime != nil {
		tb = b.EmbeddedTime.Unix()
	}
	return a.Catalog == b.Catalog && a.SpecHash == b.SpecHash && a.Model == b.Model && a.QueryCount == b.QueryCount &&
		a.CatalogVersion == b.CatalogVersion && ta == tb && a.Reason == b.Reason && a.Message == b.Message
}

// recordEvents emits events for what changed, comparing the old status
// with the new one: never on a no-op pass.
func (r *ToolCatalogReconciler) recordEvents(base, tc *v1alpha1.ToolCatalog, p *pass) {
	if p != nil && p.published {
		r.Recorder.Eventf(tc, nil, corev1.EventTypeNormal, v1alpha1.ReasonVersionPublished, "Publish", "published version %d: %s", p.version, p.summary())
	}
	if p != nil && len(p.failures) > 0 && failuresChanged(base.Status.FailingTools, tc.Status.FailingTools) {
		var parts []string
		for _, f := range tc.Status.FailingTools {
			parts = append(parts, fmt.Sprintf("%s (%s)", f.Tool, f.Reason))
		}
		r.Recorder.Eventf(tc, nil, corev1.EventTypeWarning, v1alpha1.ReasonToolsFailed, "Refresh", "%d tools not refreshed: %s", len(p.failures), listNames(parts))
	}
	before := meta.FindStatusCondition(base.Status.Conditions, v1alpha1.ConditionReady)
	after := meta.FindStatusCondition(tc.Status.Conditions, v1alpha1.ConditionReady)
	if after == nil || (before != nil && before.Status == after.Status && before.Reason == after.Reason) {
		return
	}
	switch {
	case after.Status == metav1.ConditionTrue && before != nil && before.Status == metav1.ConditionFalse:
		r.Recorder.Eventf(tc, nil, corev1.EventTypeNormal, "Recovered", "Reconcile", "catalog recovered: %s", after.Message)
	case after.Status == metav1.ConditionFalse && after.Reason != v1alpha1.ReasonToolsFailed:
		r.Recorder.Eventf(tc, nil, corev1.EventTypeWarning, after.Reason, "Reconcile", "%s", after.Message)
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

// summary says what a published version changed.
func (p *pass) summary() string {
	var embedded []string
	for name := range p.results {
		embedded = append(embedded, name)
	}
	sort.Strings(embedded)
	parts := []string{fmt.Sprintf("%d tools", len(p.doc.Tools))}
	if len(embedded) > 0 {
		parts = append(parts, fmt.Sprintf("embedded %d (%s)", len(embedded), listNames(embedded)))
	}
	if len(p.removed) > 0 {
		parts = append(parts, fmt.Sprintf("removed %d (%s)", len(p.removed), listNames(p.removed)))
	}
	return strings.Join(parts, ", ")
}
