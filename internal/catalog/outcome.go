package catalog

import (
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/pkg/clip"
)

// MaxFailingTools bounds status.failingTools; counts give the totals.
const MaxFailingTools = 20

// Outcome is a completed pass: what it planned, refreshed, built and
// wrote. Status, records and events are derived from it.
type Outcome struct {
	// Catalog is the ToolCatalog's name; Model the configured model.
	Catalog, Model string
	Plans          []ToolPlan
	// Reuse says which plans repeat an earlier pass's (Planner.Plan);
	// the zero value, that none do.
	Reuse     Reuse
	Rejected  []Failure
	Refreshed Refreshed
	Build     Build
	Stored    Stored
	// Version is the current version after the pass; Published says the
	// pass wrote it.
	Version   int64
	Published bool
	// Reused counts what the pass found in the query store instead of
	// asking a provider: query sets, and texts' vectors.
	Reused Reused
}

// Reused counts provider requests a pass saved.
type Reused struct {
	QuerySets, Vectors int
}

// Failures lists the rejected ToolDefinitions, then the failed refreshes.
func (o *Outcome) Failures() []Failure {
	return append(append([]Failure(nil), o.Rejected...), o.Refreshed.Failures...)
}

// embedded reports whether the pass gave a tool a new embedding that is
// (or may be) published.
func (o *Outcome) embedded(name string) bool {
	_, ok := o.Refreshed.Results[name]
	return ok && o.Build.Blocked == ""
}

// current reports whether a tool's published vector matches its spec and
// model after the pass.
func (o *Outcome) current(pl ToolPlan) bool { return o.embedded(pl.Name) || !pl.Stale }

// Counts tallies the selected tools by state.
func (o *Outcome) Counts() v1alpha1.ToolCounts {
	c := v1alpha1.ToolCounts{Tools: int32(len(o.Plans))}
	for _, pl := range o.Plans {
		switch {
		case o.current(pl):
			c.Embedded++
		case pl.Stale:
			c.Stale++
		}
		if pl.Invalid && !o.embedded(pl.Name) {
			c.Invalid++
		}
	}
	for _, f := range o.Failures() {
		if f.Rejected() {
			c.Rejected++
		} else {
			c.Failed++
		}
	}
	return c
}

// FailingTools is status.failingTools: the first MaxFailingTools failures
// by ToolDefinition name.
func (o *Outcome) FailingTools() []v1alpha1.ToolFailure {
	failures := o.Failures()
	sort.SliceStable(failures, func(i, j int) bool { return failures[i].Object < failures[j].Object })
	var out []v1alpha1.ToolFailure
	for _, f := range failures[:min(len(failures), MaxFailingTools)] {
		out = append(out, v1alpha1.ToolFailure{ToolDefinition: f.Object, Tool: f.Tool, Reason: f.Reason, Message: clip.Truncate(f.Message, 512)})
	}
	return out
}

// Pending lists the tools a restricted refresh left for the next pass.
func (o *Outcome) Pending() []string {
	var names []string
	for _, pl := range o.Plans {
		if pl.Deferred {
			names = append(names, pl.Name)
		}
	}
	return names
}

// Remaining lists the tools with work this pass did not get to; the next
// pass follows at once.
func (o *Outcome) Remaining() []string { return o.Refreshed.Unreached }

// Progress says how far a refresh spread over several passes has got, for
// the Reconciling condition: how many selected tools are embedded, how
// many are left and, from this pass's rate, about how long they take.
func (o *Outcome) Progress() string {
	c := o.Counts()
	left := len(o.Remaining())
	msg := fmt.Sprintf("refreshing: %d/%d tools embedded, %d to go", c.Embedded, c.Tools, left)
	if done := o.Refreshed.Done(); done > 0 && o.Refreshed.Elapsed > 0 {
		eta := time.Duration(float64(o.Refreshed.Elapsed) / float64(done) * float64(left))
		msg += fmt.Sprintf(", about %s left", roundETA(eta))
	}
	if o.Refreshed.TimedOut {
		msg += fmt.Sprintf("; the last pass reached its time limit after %d tools and published them", o.Refreshed.Done())
	}
	return msg
}

// roundETA rounds an estimate to what a person reads: seconds under a
// minute, minutes after.
func roundETA(d time.Duration) time.Duration {
	if d < time.Minute {
		return max(d.Round(time.Second), time.Second)
	}
	return d.Round(time.Minute)
}

// RetryableFailures counts the tools that failed with transient errors.
func (o *Outcome) RetryableFailures() int {
	n := 0
	for _, f := range o.Refreshed.Failures {
		if f.Kind.Retryable() {
			n++
		}
	}
	return n
}

// Synced is the EmbeddingsSynced condition: the most important reason a
// selected tool is not current, or AllEmbedded.
func (o *Outcome) Synced() (metav1.ConditionStatus, string, string) {
	failures := o.Failures()
	matching := func(pred func(Failure) bool) []string {
		var names []string
		for _, f := range failures {
			if pred(f) {
				names = append(names, f.Tool)
			}
		}
		sort.Strings(names)
		return names
	}
	byReason := func(reasons ...string) func(Failure) bool {
		return func(f Failure) bool {
			for _, r := range reasons {
				if f.Reason == r {
					return true
				}
			}
			return false
		}
	}
	if names := matching(func(f Failure) bool { return f.Kind == embedding.KindAuth }); len(names) > 0 {
		return metav1.ConditionFalse, v1alpha1.ReasonProviderAuthFailed, fmt.Sprintf("the provider rejected the API key for %d tools (%s): check the apiKeySecretRef Secret", len(names), ListNames(names))
	}
	if names := matching(func(f Failure) bool { return f.Kind == embedding.KindDenied }); len(names) > 0 {
		return metav1.ConditionFalse, v1alpha1.ReasonEgressDenied, fmt.Sprintf("the egress policy refused the provider's address for %d tools (%s), nothing was sent: ask the platform operators to allow the endpoint (--egress-allow) or use another one", len(names), ListNames(names))
	}
	if names := matching(byReason(v1alpha1.ReasonQueryGenerationFailed, v1alpha1.ReasonEmbeddingError)); len(names) > 0 {
		return metav1.ConditionFalse, v1alpha1.ReasonToolsFailed, fmt.Sprintf("%d tools failed to refresh and keep their previous embedding (%s); see status.failingTools", len(names), ListNames(names))
	}
	if names := matching(byReason(v1alpha1.ReasonNameConflict)); len(names) > 0 {
		return metav1.ConditionFalse, v1alpha1.ReasonNameConflict, fmt.Sprintf("%d ToolDefinitions share tool names (%s): rename or unselect all but one", len(names), ListNames(names))
	}
	if names := matching(byReason(v1alpha1.ReasonInvalidSpec)); len(names) > 0 {
		return metav1.ConditionFalse, v1alpha1.ReasonToolsRejected, fmt.Sprintf("%d selected ToolDefinitions are invalid and left out (%s); see their Valid condition", len(names), ListNames(names))
	}
	if o.Build.Blocked != "" {
		return metav1.ConditionFalse, v1alpha1.ReasonPublishBlocked, o.Build.Blocked
	}
	if len(o.Remaining()) > 0 {
		return metav1.ConditionFalse, v1alpha1.ReasonRefreshing, o.Progress()
	}
	if pending := o.Pending(); len(pending) > 0 {
		return metav1.ConditionFalse, v1alpha1.ReasonRefreshPending, fmt.Sprintf("%d tools wait for the next pass (%s)", len(pending), ListNames(pending))
	}
	return metav1.ConditionTrue, v1alpha1.ReasonAllEmbedded, fmt.Sprintf("%d of %d tools embedded with %s", len(o.Plans), len(o.Plans), o.Model)
}

// Summary says what a published version changed, for its event.
func (o *Outcome) Summary() string {
	var embedded []string
	for name := range o.Refreshed.Results {
		embedded = append(embedded, name)
	}
	sort.Strings(embedded)
	parts := []string{fmt.Sprintf("%d tools", len(o.Build.Document.Tools))}
	if len(embedded) > 0 {
		parts = append(parts, fmt.Sprintf("embedded %d (%s)", len(embedded), ListNames(embedded)))
	}
	relearned := 0
	for _, p := range o.Plans {
		if _, ok := o.Refreshed.Results[p.Name]; ok && p.Relearn {
			relearned++
		}
	}
	if relearned > 0 {
		parts = append(parts, fmt.Sprintf("%d of them for new learned requests", relearned))
	}
	if len(o.Build.Removed) > 0 {
		parts = append(parts, fmt.Sprintf("removed %d (%s)", len(o.Build.Removed), ListNames(o.Build.Removed)))
	}
	if r := o.Reused; r.QuerySets+r.Vectors > 0 {
		parts = append(parts, fmt.Sprintf("found %d query sets and %d vectors in the query store instead of asking the provider", r.QuerySets, r.Vectors))
	}
	return strings.Join(parts, ", ")
}

// SameRecord reports whether two records say the same, to the second.
func SameRecord(a, b v1alpha1.CatalogEmbeddingStatus) bool {
	unix := func(t *metav1.Time) int64 {
		if t == nil {
			return 0
		}
		return t.Unix()
	}
	return a.Catalog == b.Catalog && a.SpecHash == b.SpecHash && a.Model == b.Model && a.QueryCount == b.QueryCount &&
		a.CatalogVersion == b.CatalogVersion && unix(a.EmbeddedTime) == unix(b.EmbeddedTime) && a.Reason == b.Reason && a.Message == b.Message &&
		(a.ConfusableWith == nil) == (b.ConfusableWith == nil) && (a.ConfusableWith == nil || *a.ConfusableWith == *b.ConfusableWith)
}

// ListNames joins names, showing the first five and how many more.
func ListNames(names []string) string {
	const show = 5
	if len(names) <= show {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:show], ", ") + fmt.Sprintf(" and %d more", len(names)-show)
}
