package mcpsource

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/kube"
)

// Approvals are what a source's approvals approve, once their approvers'
// right has been checked: spec hashes by tool, and the generations whose
// return to changePolicy Apply is approved.
type Approvals struct {
	tools  map[string]map[string]bool
	policy map[int64]bool
}

// Approve adds what a approves of ts. An approval made for another
// source, or for an earlier source of the same name, adds nothing.
func (a *Approvals) Approve(ts *v1alpha1.ToolSource, ap *v1alpha1.ToolSourceApproval) {
	if !For(ts, ap) {
		return
	}
	if a.tools == nil {
		a.tools, a.policy = map[string]map[string]bool{}, map[int64]bool{}
	}
	for _, t := range ap.Spec.Tools {
		if !ValidApprovalHash(t.SpecHash) {
			continue
		}
		if a.tools[t.Tool] == nil {
			a.tools[t.Tool] = map[string]bool{}
		}
		a.tools[t.Tool][t.SpecHash] = true
	}
	if g := ap.Spec.ChangePolicyGeneration; g != nil {
		a.policy[*g] = true
	}
}

// Approves says whether the version of tool with spec hash is approved.
func (a Approvals) Approves(tool, hash string) bool {
	return ValidApprovalHash(hash) && a.tools[tool][hash]
}

// For says whether ap is an approval of ts: its name and its UID.
func For(ts *v1alpha1.ToolSource, ap *v1alpha1.ToolSourceApproval) bool {
	return ap.Namespace == ts.Namespace && ap.Spec.Source == ts.Name && ap.Spec.SourceUID == string(ts.UID)
}

// PolicyInForce is the change policy a sync of ts enforces:
// RequireApproval while its spec asks for it, and after, until an
// approval approves the return to Apply at its current generation. A
// status from before the policy in force was recorded shows
// RequireApproval by its ChangePending condition, which only such a
// source has.
func PolicyInForce(ts *v1alpha1.ToolSource, approvals Approvals) v1alpha1.ChangePolicy {
	if ts.Spec.ChangePolicy == v1alpha1.ChangePolicyRequireApproval {
		return v1alpha1.ChangePolicyRequireApproval
	}
	held := ts.Status.ChangePolicy == v1alpha1.ChangePolicyRequireApproval ||
		ts.Status.ChangePolicy == "" && meta.FindStatusCondition(ts.Status.Conditions, v1alpha1.ConditionChangePending) != nil
	if held && !approvals.policy[ts.Generation] {
		return v1alpha1.ChangePolicyRequireApproval
	}
	return v1alpha1.ChangePolicyApply
}

// Spent says whether ap approves nothing that ts still holds: none of its
// tools is pending at the hash it approves, and the return to Apply it
// approves, if any, is no longer held.
func Spent(ts *v1alpha1.ToolSource, ap *v1alpha1.ToolSourceApproval) bool {
	for _, t := range ap.Spec.Tools {
		if slices.ContainsFunc(ts.Status.PendingChanges, func(p v1alpha1.PendingChange) bool { return p.Tool == t.Tool && p.SpecHash == t.SpecHash }) {
			return false
		}
	}
	if g := ap.Spec.ChangePolicyGeneration; g != nil && *g >= ts.Generation && ts.Status.ChangePolicy == v1alpha1.ChangePolicyRequireApproval {
		return false
	}
	return true
}

// ApprovalMaker makes approvals as the user of its credentials:
// kube.Client.
type ApprovalMaker interface {
	// WhoAmI is the user the API server authenticates the client as.
	WhoAmI(ctx context.Context) (v1alpha1.Approver, error)
	Create(ctx context.Context, obj kube.Object) error
}

// Approve approves the chosen pending changes of ts by their spec hashes,
// with an approval the caller makes: what the caller may not do is refused
// by the API server, and what its user may not approve the operator does
// not apply.
func Approve(ctx context.Context, c ApprovalMaker, ts *v1alpha1.ToolSource, chosen []v1alpha1.PendingChange) (*v1alpha1.ToolSourceApproval, error) {
	ap, err := newApproval(ctx, c, ts)
	if err != nil {
		return nil, err
	}
	for _, p := range chosen {
		ap.Spec.Tools = append(ap.Spec.Tools, v1alpha1.ApprovedTool{Tool: p.Tool, SpecHash: p.SpecHash})
	}
	return ap, create(ctx, c, ap)
}

// ApprovePolicyChange approves ts's return from RequireApproval to Apply,
// as its spec asks for at its current generation; it refuses when the
// spec does not ask for it, or nothing holds it.
func ApprovePolicyChange(ctx context.Context, c ApprovalMaker, ts *v1alpha1.ToolSource) (*v1alpha1.ToolSourceApproval, error) {
	if ts.Spec.ChangePolicy == v1alpha1.ChangePolicyRequireApproval {
		return nil, fmt.Errorf("ToolSource %s asks for changePolicy RequireApproval: there is no return to Apply to approve", ts.Name)
	}
	if PolicyInForce(ts, Approvals{}) != v1alpha1.ChangePolicyRequireApproval {
		return nil, fmt.Errorf("ToolSource %s is not held under RequireApproval (status.changePolicy %q): there is nothing to approve", ts.Name, ts.Status.ChangePolicy)
	}
	ap, err := newApproval(ctx, c, ts)
	if err != nil {
		return nil, err
	}
	ap.Spec.ChangePolicyGeneration = ptr.To(ts.Generation)
	return ap, create(ctx, c, ap)
}

// newApproval is an approval of ts by the caller's user, owned by ts so
// that it goes with it.
func newApproval(ctx context.Context, c ApprovalMaker, ts *v1alpha1.ToolSource) (*v1alpha1.ToolSourceApproval, error) {
	who, err := c.WhoAmI(ctx)
	if err != nil {
		return nil, fmt.Errorf("learning who you are (a SelfSubjectReview): %w", err)
	}
	return &v1alpha1.ToolSourceApproval{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:    ts.Namespace,
			GenerateName: ts.Name + "-",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ToolSource",
				Name: ts.Name, UID: ts.UID}},
		},
		Spec: v1alpha1.ToolSourceApprovalSpec{Source: ts.Name, SourceUID: string(ts.UID), Approver: who},
	}, nil
}

func create(ctx context.Context, c ApprovalMaker, ap *v1alpha1.ToolSourceApproval) error {
	if err := c.Create(ctx, ap); err != nil {
		return fmt.Errorf("approving: %w", err)
	}
	return nil
}
