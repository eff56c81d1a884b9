package toolsource

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/mcpsource"
	"github.com/toolcatalog/tool-catalog-operator/internal/reconcile"
	"github.com/toolcatalog/tool-catalog-operator/pkg/clip"
)

// Bounds of what a source's status lists.
const (
	maxSkippedTools   = 20
	maxPendingChanges = 50
	// maxPendingDiffBytes bounds the diffs of all pending changes
	// together, well below what an object may hold.
	maxPendingDiffBytes = 192 << 10
)

// inventory is what a source finds in its namespace before it applies.
type inventory struct {
	// owned are the source's ToolDefinitions by tool name (spec.name):
	// those it created, by its record.
	owned map[string]*v1alpha1.ToolDefinition
	// others are the ToolDefinitions the source did not create, by tool
	// name.
	others map[string]other
	// used are the object names taken.
	used map[string]bool
	// adopted counts the ToolDefinitions a source that kept no record
	// yet took as its own (catalog.Created).
	adopted int
	// edited are the owned ToolDefinitions, by tool name, whose spec is
	// not one the source wrote (catalog.Unedited): somebody else's edit.
	edited map[string]bool
}

// other is a ToolDefinition a source did not create that has the name of
// a tool it imports.
type other struct {
	object string
	// claimed is set when it names the source, or has an owner
	// reference to it, as the source's own tools do: written by
	// somebody else to pass for one of them.
	claimed bool
}

func (r *Reconciler) inventory(ctx context.Context, ts *v1alpha1.ToolSource) (*inventory, error) {
	list := &v1alpha1.ToolDefinitionList{}
	if err := r.List(ctx, list, client.InNamespace(ts.Namespace)); err != nil {
		return nil, fmt.Errorf("listing ToolDefinitions: %w", err)
	}
	inv := &inventory{owned: map[string]*v1alpha1.ToolDefinition{}, others: map[string]other{}, used: map[string]bool{}, edited: map[string]bool{}}
	for i := range list.Items {
		td := &list.Items[i]
		inv.used[td.Name] = true
		if catalog.Created(ts, td) {
			if !catalog.Unedited(ts, td) {
				// The cache may hold the spec of before the last sync's
				// write: only the API server's copy says it was edited.
				live := &v1alpha1.ToolDefinition{}
				if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(td), live); client.IgnoreNotFound(err) != nil {
					return nil, fmt.Errorf("reading ToolDefinition %s: %w", td.Name, err)
				} else if err == nil && live.UID == td.UID {
					td = live
				}
				inv.edited[td.Spec.Name] = !catalog.Unedited(ts, td)
			}
			inv.owned[td.Spec.Name] = td
			if ts.Status.Imported == nil {
				inv.adopted++
			}
			continue
		}
		claimed := metav1.IsControlledBy(td, ts) || (td.Spec.Source != nil && td.Spec.Source.ToolSource == ts.Name)
		if o, seen := inv.others[td.Spec.Name]; !seen || (claimed && !o.claimed) {
			inv.others[td.Spec.Name] = other{object: td.Name, claimed: claimed}
		}
	}
	return inv, nil
}

// record is the source's record of what it created after a sync: the
// UIDs of the ToolDefinitions it keeps, sorted, each with the hash of the
// spec it wrote there (written). A recorded ToolDefinition the cache does
// not hold is looked up on the API server before it is forgotten: the
// cache may not have seen a creation of the last sync yet; it keeps the
// hashes recorded for it.
func (r *Reconciler) record(ctx context.Context, ts *v1alpha1.ToolSource, written map[types.UID]recorded, removed map[types.UID]bool, inv *inventory) (*v1alpha1.ImportRecord, error) {
	specs := maps.Clone(written)
	if specs == nil {
		specs = map[types.UID]recorded{}
	}
	var unseen []types.UID
	if rec := ts.Status.Imported; rec != nil {
		cached := map[types.UID]bool{}
		for _, td := range inv.owned {
			cached[td.UID] = true
		}
		for _, uid := range rec.UIDs {
			if _, kept := specs[uid]; !kept && !removed[uid] && !cached[uid] {
				unseen = append(unseen, uid)
			}
		}
	}
	if len(unseen) > 0 {
		live := &metav1.PartialObjectMetadataList{}
		live.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("ToolDefinitionList"))
		if err := r.APIReader.List(ctx, live, client.InNamespace(ts.Namespace)); err != nil {
			return nil, fmt.Errorf("listing ToolDefinitions: %w", err)
		}
		exists := map[types.UID]bool{}
		for i := range live.Items {
			exists[live.Items[i].UID] = true
		}
		for _, uid := range unseen {
			if exists[uid] {
				specs[uid] = recordedOf(ts.Status.Imported, uid)
			}
		}
	}
	return newRecord(specs), nil
}

// recorded is what a record holds of one ToolDefinition: the hashes of
// the specs the source wrote there, and its tool name.
type recorded struct {
	specs, tool string
}

// newRecord makes a record of the ToolDefinitions given.
func newRecord(entries map[types.UID]recorded) *v1alpha1.ImportRecord {
	rec := &v1alpha1.ImportRecord{UIDs: slices.Sorted(maps.Keys(entries))}
	rec.Specs, rec.Tools = make([]string, len(rec.UIDs)), make([]string, len(rec.UIDs))
	for i, uid := range rec.UIDs {
		rec.Specs[i], rec.Tools[i] = entries[uid].specs, entries[uid].tool
	}
	return rec
}

// recordedOf is what rec holds of uid: nothing (vouching for no spec)
// from a record that kept no hashes, or that does not hold it.
func recordedOf(rec *v1alpha1.ImportRecord, uid types.UID) recorded {
	if rec == nil || len(rec.Specs) != len(rec.UIDs) {
		return recorded{}
	}
	i, found := slices.BinarySearch(rec.UIDs, uid)
	if !found {
		return recorded{}
	}
	out := recorded{specs: rec.Specs[i]}
	if len(rec.Tools) == len(rec.UIDs) {
		out.tool = rec.Tools[i]
	}
	return out
}

// announce writes, before the source rewrites ToolDefinitions it created,
// a record that holds both the hash of each one's spec now and of the
// spec it is about to write, so catalogs serve the tool throughout
// instead of leaving it out between the write and the sync's final
// record.
// rewrites holds, by UID, the hash of the spec now and of the next,
// space separated.
func (r *Reconciler) announce(ctx context.Context, ts *v1alpha1.ToolSource, rewrites map[types.UID]string) error {
	rec := ts.Status.Imported
	if len(rewrites) == 0 || rec == nil || len(rec.Specs) != len(rec.UIDs) {
		return nil
	}
	entries := map[types.UID]recorded{}
	for _, uid := range rec.UIDs {
		entries[uid] = recordedOf(rec, uid)
		if both, ok := rewrites[uid]; ok {
			entries[uid] = recorded{specs: both, tool: entries[uid].tool}
		}
	}
	base := ts.DeepCopy()
	announced := ts.DeepCopy()
	announced.Status.Imported = newRecord(entries)
	if err := r.Status().Patch(ctx, announced, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("recording the ToolDefinitions about to be rewritten: %w", err)
	}
	return nil
}

// approvalGate decides, tool by tool, which upstream version a source
// applies under the change policy in force. Under RequireApproval nothing
// opens it but an approval: not a first sync, a new selection, a source
// made again with the same name, nor a spec asking for Apply (until the
// return to Apply is approved).
type approvalGate struct {
	requireApproval bool
	// approvals are what the source's approvals approve.
	approvals mcpsource.Approvals
	// previous are the changes pending before this sync, by tool.
	previous map[string]v1alpha1.PendingChange
	now      metav1.Time
	// written are the spec hashes of the source's record; spec makes
	// the spec the source writes for a tool's upstream version.
	written map[string]bool
	spec    func(v1alpha1.ToolDefinitionSpec) v1alpha1.ToolDefinitionSpec
}

func newApprovalGate(ts *v1alpha1.ToolSource, approvals mcpsource.Approvals, now metav1.Time) *approvalGate {
	g := &approvalGate{
		approvals: approvals,
		previous:  map[string]v1alpha1.PendingChange{},
		now:       now,
		spec: func(upstream v1alpha1.ToolDefinitionSpec) v1alpha1.ToolDefinitionSpec {
			upstream.Permissions = ts.Spec.Permissions.DeepCopy()
			return upstream
		},
	}
	g.requireApproval = mcpsource.PolicyInForce(ts, approvals) == v1alpha1.ChangePolicyRequireApproval
	for _, p := range ts.Status.PendingChanges {
		g.previous[p.Tool] = p
	}
	if rec := ts.Status.Imported; rec != nil {
		g.written = map[string]bool{}
		for _, h := range rec.Specs {
			for _, one := range strings.Fields(h) {
				g.written[one] = true
			}
		}
	}
	return g
}

// decision is what the gate decided for one tool.
type decision struct {
	// spec is what to apply; nil when nothing is (a new tool held).
	spec *v1alpha1.ToolDefinitionSpec
	// pending is the held change, if any.
	pending *v1alpha1.PendingChange
	// approved is set when an approval let a change through.
	approved *v1alpha1.PendingChange
}

// check decides for tool t, which the source owns as have (nil when it
// has not imported it). When somebody else edited have, its spec is no
// baseline: the source writes back upstream's version if that is what
// it wrote last (restores), and otherwise holds the change as if the
// tool were new to it, leaving the edited one unserved.
func (g *approvalGate) check(t mcpsource.Imported, have *v1alpha1.ToolDefinition, edited bool) (decision, error) {
	upstream := t.Spec
	if !g.requireApproval {
		return decision{spec: &upstream}, nil
	}
	if edited && g.restores(upstream) {
		return decision{spec: &upstream}, nil
	}
	hash, err := mcpsource.SurfaceHash(upstream)
	if err != nil {
		return decision{}, err
	}
	change := v1alpha1.PendingChange{Tool: upstream.Name, UpstreamTool: t.Upstream, SpecHash: hash}
	switch {
	case have == nil:
		change.Change = v1alpha1.ChangeAdded
		change.Summary = "new tool: " + clip.Truncate(upstream.Description, 200)
		change.Diff = mcpsource.Review(nil, upstream)
	case edited:
		// What was approved is known only by its hash: the change is
		// shown whole, as for a new tool, not against the edit.
		change.Change = v1alpha1.ChangeModified
		change.ToolDefinition = have.Name
		change.Summary = clip.Truncate("ToolDefinition "+have.Name+" was edited by somebody other than this source and is not served; approving writes the server's version: "+upstream.Description, 300)
		change.Diff = mcpsource.Review(nil, upstream)
	default:
		current, err := mcpsource.SurfaceHash(have.Spec)
		if err != nil {
			return decision{}, err
		}
		if current == hash {
			return decision{spec: &upstream}, nil
		}
		change.Change = v1alpha1.ChangeModified
		change.ToolDefinition = have.Name
		change.Summary = mcpsource.Diff(have.Spec, upstream)
		change.Diff = mcpsource.Review(&have.Spec, upstream)
	}
	if g.approved(upstream.Name, hash) {
		return decision{spec: &upstream, approved: &change}, nil
	}
	change.Since = &g.now
	if p, ok := g.previous[change.Tool]; ok && p.SpecHash == hash && p.Since != nil {
		change.Since = p.Since
	}
	if have == nil || edited {
		return decision{pending: &change}, nil
	}
	kept := mcpsource.KeepSurface(upstream, have.Spec)
	return decision{spec: &kept, pending: &change}, nil
}

// restores reports whether upstream, as the source writes it, is a spec
// the source's record holds: the version it last wrote, which an edit
// replaced.
func (g *approvalGate) restores(upstream v1alpha1.ToolDefinitionSpec) bool {
	return g.written != nil && g.written[catalog.WrittenHash(g.spec(upstream))]
}

// approved says whether an approval of the source approves hash. No
// annotation approves anything: whoever may edit an object could write
// it.
func (g *approvalGate) approved(tool, hash string) bool {
	return g.approvals.Approves(tool, hash)
}

// syncResult is what one sync did.
type syncResult struct {
	kept                      int
	created, updated, removed int
	skipped                   []v1alpha1.SkippedTool
	pending                   []v1alpha1.PendingChange
	approved                  []v1alpha1.PendingChange
	// inForce is the change policy the sync enforced.
	inForce v1alpha1.ChangePolicy
	// ignoredApprovals are the source's ToolDefinitions whose own
	// approval annotation names a pending change.
	ignoredApprovals []string
	// written are the ToolDefinitions the source keeps, with the hashes
	// of the specs it wrote there; removedUIDs those it deleted; record
	// is its record after the sync (nil when it could not be made),
	// adopted what it took as its own from before it kept one.
	written     map[types.UID]recorded
	removedUIDs map[types.UID]bool
	record      *v1alpha1.ImportRecord
	adopted     int
}

// apply makes the source's ToolDefinitions match the listed tools, as the
// change policy allows, and makes its record of them. The result is
// returned with an error too: what was created before the error is in
// its record.
func (r *Reconciler) apply(ctx context.Context, ts *v1alpha1.ToolSource, tools []mcpsource.Imported, rejected []mcpsource.Rejected, approvals mcpsource.Approvals) (*syncResult, error) {
	inv, err := r.inventory(ctx, ts)
	if err != nil {
		return nil, err
	}
	res := &syncResult{written: map[types.UID]recorded{}, removedUIDs: map[types.UID]bool{}, adopted: inv.adopted,
		inForce: mcpsource.PolicyInForce(ts, approvals)}
	for _, rj := range rejected {
		res.skipped = append(res.skipped, v1alpha1.SkippedTool{Tool: rj.Upstream, Reason: rj.Reason})
	}
	err = r.applyTools(ctx, ts, tools, inv, res, approvals)
	rec, recErr := r.record(ctx, ts, res.written, res.removedUIDs, inv)
	res.record = rec
	return res, errors.Join(err, recErr)
}

// applyTools applies each listed tool the gate lets through and deletes
// the source's tools no longer listed. Before it rewrites a tool it
// created, it records the spec it is about to write (announce).
func (r *Reconciler) applyTools(ctx context.Context, ts *v1alpha1.ToolSource, tools []mcpsource.Imported, inv *inventory, res *syncResult, approvals mcpsource.Approvals) error {
	gate := newApprovalGate(ts, approvals, metav1.NewTime(reconcile.Now(r.Now)))
	var plans []toolPlan
	rewrites := map[types.UID]string{}
	for _, t := range tools {
		if o, ok := inv.others[t.Spec.Name]; ok {
			reason := fmt.Sprintf("tool name %s is already ToolDefinition %s's: the first one is kept; set spec.toolNamePrefix", t.Spec.Name, o.object)
			if o.claimed {
				reason = fmt.Sprintf("ToolDefinition %s passes for this source's %s (spec.source or an owner reference), but the source did not create it: it is not served; delete it and the source imports the tool", o.object, t.Spec.Name)
			}
			res.skipped = append(res.skipped, v1alpha1.SkippedTool{Tool: t.Upstream, Reason: reason})
			continue
		}
		have := inv.owned[t.Spec.Name]
		edited := inv.edited[t.Spec.Name]
		d, err := gate.check(t, have, edited)
		if err != nil {
			return fmt.Errorf("checking tool %s: %w", t.Spec.Name, err)
		}
		if d.pending != nil {
			res.pending = append(res.pending, *d.pending)
			if have != nil && strings.TrimSpace(have.Annotations[v1alpha1.AnnotationApprove]) != "" {
				res.ignoredApprovals = append(res.ignoredApprovals, have.Name)
			}
		}
		if d.approved != nil {
			res.approved = append(res.approved, *d.approved)
		}
		p := toolPlan{tool: t, have: have, decision: d}
		switch {
		case d.spec == nil && have != nil:
			// Edited, and the server's version waits for approval: the
			// edit is kept unserved (its record is not its spec's).
			p.keep = recordedOf(ts.Status.Imported, have.UID)
			p.keep.tool = have.Spec.Name
		case d.spec == nil:
			continue
		case have != nil:
			p.want = r.wanted(ts, have.Name, *d.spec, d.pending)
			if now, then := catalog.WrittenHash(have.Spec), catalog.WrittenHash(p.want.Spec); now != then && !edited {
				rewrites[have.UID] = now + " " + then
			}
		default:
			p.want = r.wanted(ts, mcpsource.ObjectName(t.Spec.Name, inv.used), *d.spec, d.pending)
		}
		plans = append(plans, p)
	}
	if err := r.announce(ctx, ts, rewrites); err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, p := range plans {
		name := p.tool.Spec.Name
		if p.want == nil {
			keep[name] = true
			res.written[p.have.UID] = p.keep
			continue
		}
		changed, uid, written, err := r.applyTool(ctx, ts, p.want, p.have)
		if errors.Is(err, errWrittenByOthers) {
			res.skipped = append(res.skipped, v1alpha1.SkippedTool{Tool: p.tool.Upstream, Reason: fmt.Sprintf(
				"ToolDefinition %s was written by somebody else before this source could create it: it is not served; delete it and the source imports the tool", p.want.Name)})
			continue
		}
		if err != nil {
			return err
		}
		keep[name] = true
		res.written[uid] = recorded{specs: written, tool: p.want.Spec.Name}
		switch {
		case !changed, p.decision.pending != nil: // a held change is reported as pending
		case p.have == nil:
			res.created++
		default:
			res.updated++
		}
	}
	for toolName, td := range inv.owned {
		if keep[toolName] {
			continue
		}
		if err := r.Delete(ctx, td, client.Preconditions{UID: &td.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting ToolDefinition %s: %w", td.Name, err)
		}
		res.removedUIDs[td.UID] = true
		res.removed++
	}
	res.kept = len(keep)
	return nil
}

// toolPlan is what a sync does with one listed tool: apply want, or keep
// have as it is with the record keep.
type toolPlan struct {
	tool     mcpsource.Imported
	have     *v1alpha1.ToolDefinition
	decision decision
	want     *v1alpha1.ToolDefinition
	keep     recorded
}

// wanted is the ToolDefinition the source applies for spec; pending marks
// a held change on it.
func (r *Reconciler) wanted(ts *v1alpha1.ToolSource, name string, spec v1alpha1.ToolDefinitionSpec, pending *v1alpha1.PendingChange) *v1alpha1.ToolDefinition {
	want := r.desired(ts, name, spec)
	if pending != nil {
		want.Annotations = map[string]string{v1alpha1.AnnotationPendingChange: pending.SpecHash + " " + pending.Summary}
	}
	return want
}

// errWrittenByOthers is applyTool's error for a new tool whose object
// name was taken, between the source's look and its apply, by an object
// somebody else wrote.
var errWrittenByOthers = errors.New("written by others")

// applyTool server-side applies one ToolDefinition, unless it already is
// as wanted. It returns whether it wrote, the UID of the ToolDefinition
// and the hash of its spec as the API server keeps it (its answer to the
// apply). A new one counts as created only when the API server's answer
// shows that the source's apply alone wrote it; errWrittenByOthers
// otherwise.
func (r *Reconciler) applyTool(ctx context.Context, ts *v1alpha1.ToolSource, want, have *v1alpha1.ToolDefinition) (bool, types.UID, string, error) {
	name := want.Name
	if have != nil && equality.Semantic.DeepEqual(have.Spec, want.Spec) && equality.Semantic.DeepEqual(have.Labels, want.Labels) &&
		equality.Semantic.DeepEqual(have.OwnerReferences, want.OwnerReferences) &&
		have.Annotations[v1alpha1.AnnotationPendingChange] == want.Annotations[v1alpha1.AnnotationPendingChange] {
		return false, have.UID, catalog.WrittenHash(have.Spec), nil
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(want)
	if err != nil {
		return false, "", "", err
	}
	delete(u, "status")
	unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
	if have != nil {
		// The one the source created, not another of the same name.
		u["metadata"].(map[string]any)["uid"] = string(have.UID)
	}
	applied := &unstructured.Unstructured{Object: u}
	if err := r.Apply(ctx, client.ApplyConfigurationFromUnstructured(applied), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return false, "", "", fmt.Errorf("applying ToolDefinition %s: %w", name, err)
	}
	if have == nil && !catalog.Created(ts, &v1alpha1.ToolDefinition{ObjectMeta: metav1.ObjectMeta{UID: applied.GetUID()}}) && !appliedAlone(applied) {
		return false, "", "", errWrittenByOthers
	}
	stored := &v1alpha1.ToolDefinition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(applied.Object, stored); err != nil {
		return false, "", "", fmt.Errorf("reading the API server's answer for ToolDefinition %s: %w", name, err)
	}
	return true, applied.GetUID(), catalog.WrittenHash(stored.Spec), nil
}

// appliedAlone reports whether the API server's answer to an apply shows
// an object whose metadata and spec only the source's applies wrote: one
// it has just created. An object somebody else created first shows their
// write too (as "before-first-apply" when they took the record of it
// away). Status writes (the catalogs', the validation's) do not count.
func appliedAlone(u *unstructured.Unstructured) bool {
	writers := 0
	for _, f := range u.GetManagedFields() {
		if f.Subresource != "" {
			continue
		}
		if f.Manager != FieldOwner || f.Operation != metav1.ManagedFieldsOperationApply {
			return false
		}
		writers++
	}
	return writers == 1
}

// recordSync writes what a sync did into the status, and the events.
func (r *Reconciler) recordSync(ts *v1alpha1.ToolSource, server mcpsource.Server, res *syncResult) {
	skipped := res.skipped
	sort.Slice(skipped, func(i, j int) bool { return skipped[i].Tool < skipped[j].Tool })
	skipped = skipped[:min(len(skipped), maxSkippedTools)]
	newlySkipped := len(skipped) > 0 && !equality.Semantic.DeepEqual(ts.Status.SkippedTools, skipped)
	pending := res.pending
	sort.Slice(pending, func(i, j int) bool { return pending[i].Tool < pending[j].Tool })
	newlyPending := newPendingChanges(ts.Status.PendingChanges, pending)

	syncedAt := metav1.NewTime(reconcile.Now(r.Now))
	st := &ts.Status
	st.Server = &v1alpha1.MCPServerInfo{Name: server.Name, Version: server.Version, ProtocolVersion: server.ProtocolVersion, Instructions: server.Instructions}
	st.ToolCount = int32(res.kept)
	st.LastSyncTime = &syncedAt
	st.SkippedTools = skipped
	st.PendingChanges = boundDiffs(pending[:min(len(pending), maxPendingChanges)], maxPendingDiffBytes)

	msg := fmt.Sprintf("%d tools from %s %s", res.kept, server.Name, server.Version)
	if len(skipped) > 0 {
		msg += fmt.Sprintf("; %d skipped (see status.skippedTools)", len(skipped))
	}
	if len(pending) > 0 {
		msg += fmt.Sprintf("; %d upstream changes await approval (see status.pendingChanges)", len(pending))
	}
	reconcile.SetCondition(ts, v1alpha1.ConditionSynced, metav1.ConditionTrue, v1alpha1.ReasonSynced, msg)
	inForce := res.inForce
	st.ChangePolicy = inForce
	switchHeld := inForce != cmp.Or(ts.Spec.ChangePolicy, v1alpha1.ChangePolicyApply)
	switch {
	case inForce != v1alpha1.ChangePolicyRequireApproval && len(pending) == 0:
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionChangePending)
	case len(pending) == 0 && !switchHeld:
		reconcile.SetCondition(ts, v1alpha1.ConditionChangePending, metav1.ConditionFalse, v1alpha1.ReasonNoPendingChanges, "no upstream change waits for approval")
	default:
		var parts []string
		for _, p := range pending {
			parts = append(parts, fmt.Sprintf("%s (%s)", p.Tool, strings.ToLower(string(p.Change))))
		}
		waiting := ""
		if len(pending) > 0 {
			waiting = fmt.Sprintf("%d upstream changes wait for approval: %s; the approved versions are served meanwhile; review status.pendingChanges, then kubectl toolcatalog approve %s TOOL",
				len(pending), strings.Join(parts, ", "), ts.Name)
		}
		if switchHeld {
			waiting = strings.TrimPrefix(waiting+fmt.Sprintf("; spec.changePolicy %s waits for approval, and RequireApproval holds meanwhile: kubectl toolcatalog approve %s --change-policy", ts.Spec.ChangePolicy, ts.Name), "; ")
		}
		reconcile.SetCondition(ts, v1alpha1.ConditionChangePending, metav1.ConditionTrue, v1alpha1.ReasonAwaitingApproval, clip.Truncate(waiting, 2048))
	}

	if res.created+res.updated+res.removed > 0 {
		r.Recorder.Eventf(ts, nil, corev1.EventTypeNormal, v1alpha1.ReasonSynced, "Sync", "%d ToolDefinitions created, %d updated, %d deleted; %s", res.created, res.updated, res.removed, msg)
	}
	if newlySkipped {
		var parts []string
		for _, s := range skipped {
			parts = append(parts, s.Tool+": "+s.Reason)
		}
		r.Recorder.Eventf(ts, nil, corev1.EventTypeWarning, v1alpha1.ReasonToolsSkipped, "Sync", "%d tools skipped: %s", len(skipped), strings.Join(parts, "; "))
	}
	// One event per sync lists every new change: events of one object,
	// reason and action merge into a series that keeps the first note.
	if len(newlyPending) > 0 {
		var parts []string
		for _, p := range newlyPending {
			parts = append(parts, fmt.Sprintf("%s: %s (spec hash %s)", p.Tool, clip.Truncate(p.Summary, 300), p.SpecHash[:mcpsource.ShortHash]))
		}
		// A first import held whole is an action of its own, so the
		// changes the server makes later are a series of their own too.
		action := "Sync"
		if st.Imported == nil || len(st.Imported.UIDs) == 0 {
			action = "HoldImport"
		}
		r.Recorder.Eventf(ts, nil, corev1.EventTypeWarning, v1alpha1.ReasonChangePending, action, "%s",
			clip.Truncate(fmt.Sprintf("approve with kubectl toolcatalog approve %s TOOL: %s", ts.Name, strings.Join(parts, "; ")), 1024))
	}
	for _, a := range res.approved {
		r.Recorder.Eventf(ts, nil, corev1.EventTypeNormal, v1alpha1.ReasonChangeApproved, "Approve", "%s",
			clip.Truncate(fmt.Sprintf("applied the approved %s change of %s (spec hash %s): %s", strings.ToLower(string(a.Change)), a.Tool, a.SpecHash[:mcpsource.ShortHash], a.Summary), 1024))
	}
	if res.adopted > 0 {
		r.Recorder.Eventf(ts, nil, corev1.EventTypeNormal, v1alpha1.ReasonImportsRecorded, "Sync",
			"recorded %d ToolDefinitions this source controlled before its last sync as its own (status.imported); from now on only the ToolDefinitions it creates are", res.adopted)
	}
	if len(res.ignoredApprovals) > 0 {
		r.Recorder.Eventf(ts, nil, corev1.EventTypeWarning, v1alpha1.ReasonApprovalIgnored, "Sync",
			"annotation %s on ToolDefinitions %s approves nothing: approve on the ToolSource, with kubectl toolcatalog approve %s TOOL (editing a tool is not approving it)",
			v1alpha1.AnnotationApprove, strings.Join(res.ignoredApprovals, ", "), ts.Name)
	}
}

// boundDiffs keeps the changes' diffs, in order, while they fit in budget
// bytes together; the diffs of the changes after that say why they are
// left out.
func boundDiffs(pending []v1alpha1.PendingChange, budget int) []v1alpha1.PendingChange {
	used := 0
	for i := range pending {
		used += len(pending[i].Diff)
		if used > budget {
			pending[i].Diff = fmt.Sprintf("(not shown: the pending changes of this source have more than %d KiB of diffs; review and approve the ones listed before this one, and this one is shown)\n", budget>>10)
		}
	}
	return pending
}

// newPendingChanges are the changes of now not pending, with that hash,
// before.
func newPendingChanges(before, now []v1alpha1.PendingChange) []v1alpha1.PendingChange {
	seen := map[string]string{}
	for _, p := range before {
		seen[p.Tool] = p.SpecHash
	}
	var out []v1alpha1.PendingChange
	for _, p := range now {
		if seen[p.Tool] != p.SpecHash {
			out = append(out, p)
		}
	}
	return out
}
