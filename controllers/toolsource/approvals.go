package toolsource

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/mcpsource"
	"github.com/toolcatalog/tool-catalog-operator/pkg/clip"
)

// The approvals of one source a sync reads are bounded, the newest kept,
// and so are the spent ones a sync deletes and the distinct approvers
// whose right it reviews.
const (
	maxApprovals = 200
	maxApprovers = 20
)

// VerbApprove is the right to approve a ToolSource's held changes: the
// verb "approve" on toolsources (the tool-catalog-approver ClusterRole).
const VerbApprove = "approve"

// spendApprovals deletes the approvals of ts that approve nothing it
// still holds, as the status a sync just wrote says: an approval is read
// until what it approves is applied, and no longer.
func (r *Reconciler) spendApprovals(ctx context.Context, ts *v1alpha1.ToolSource) {
	var list v1alpha1.ToolSourceApprovalList
	if err := r.List(ctx, &list, client.InNamespace(ts.Namespace)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the approvals to delete the spent ones; the next sync tries again")
		return
	}
	spent := 0
	for i := range list.Items {
		ap := &list.Items[i]
		if spent < maxApprovals && mcpsource.For(ts, ap) && mcpsource.Spent(ts, ap) {
			err := r.Delete(ctx, ap, client.Preconditions{UID: &ap.UID})
			if client.IgnoreNotFound(err) != nil {
				ctrl.LoggerFrom(ctx).Error(err, "Deleting a spent approval; the next sync tries again", "approval", ap.Name)
			}
			spent++
		}
	}
}

// sourceApprovals are the approvals of a source a sync found.
type sourceApprovals struct {
	// set is what the approvals whose approver may approve approve.
	set mcpsource.Approvals
	// all are every approval of the source read, refused ones included.
	all []v1alpha1.ToolSourceApproval
	// refused say which approvals approve nothing, and why.
	refused []string
}

// approvals reads the approvals of ts and keeps those whose approver may
// approve it now, asked of the API server's authorizer (a
// SubjectAccessReview per approver): who may merely edit the source, or
// make an approval in its name, approves nothing. The right to review
// comes from the manager's reviews ClusterRole (TokenReviews and
// SubjectAccessReviews), which every install binds.
func (r *Reconciler) approvals(ctx context.Context, ts *v1alpha1.ToolSource) (*sourceApprovals, error) {
	var list v1alpha1.ToolSourceApprovalList
	if err := r.List(ctx, &list, client.InNamespace(ts.Namespace)); err != nil {
		return nil, fmt.Errorf("listing the ToolSourceApprovals of namespace %s: %w", ts.Namespace, err)
	}
	out := &sourceApprovals{}
	for _, ap := range list.Items {
		// A spent approval approves nothing still held; the sync that
		// recorded so deletes it (spendApprovals).
		if mcpsource.For(ts, &ap) && !mcpsource.Spent(ts, &ap) {
			out.all = append(out.all, ap)
		}
	}
	// Newest first.
	slices.SortFunc(out.all, func(a, b v1alpha1.ToolSourceApproval) int {
		if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	if len(out.all) > maxApprovals {
		out.refused = append(out.refused, fmt.Sprintf("%d approvals past the newest %d are not read", len(out.all)-maxApprovals, maxApprovals))
		out.all = out.all[:maxApprovals]
	}
	allowed := map[string]error{}
	for i := range out.all {
		ap := &out.all[i]
		who := ap.Spec.Approver
		key := approverKey(who)
		err, seen := allowed[key]
		if !seen {
			if len(allowed) >= maxApprovers {
				out.refused = append(out.refused, fmt.Sprintf("%s by %s: more than %d approvers, not reviewed", ap.Name, who.Username, maxApprovers))
				continue
			}
			err = r.mayApprove(ctx, ts, who)
			if refused := (*refusal)(nil); err != nil && !errors.As(err, &refused) {
				// Unanswered (the manager may not review, or the API
				// server failed): nobody's approval counts meanwhile.
				return nil, fmt.Errorf("asking the API server whether %s may approve: %w", who.Username, err)
			}
			allowed[key] = err
		}
		if err != nil {
			out.refused = append(out.refused, fmt.Sprintf("%s by %s: %v", ap.Name, who.Username, err))
			continue
		}
		out.set.Approve(ts, ap)
	}
	return out, nil
}

// refusal is an approver's lack of the approve right.
type refusal struct{ msg string }

func (e *refusal) Error() string { return e.msg }

// mayApprove asks the API server whether who may approve ts; a refusal
// says what the approver lacks.
func (r *Reconciler) mayApprove(ctx context.Context, ts *v1alpha1.ToolSource, who v1alpha1.Approver) error {
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: who.Username, UID: who.UID, Groups: who.Groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ts.Namespace, Verb: VerbApprove, Group: v1alpha1.GroupVersion.Group, Resource: "toolsources", Name: ts.Name,
		},
	}}
	if err := r.Create(ctx, review); err != nil {
		return err
	}
	if !review.Status.Allowed || review.Status.Denied {
		return &refusal{fmt.Sprintf("%s may not approve ToolSource %s (the %s verb on toolsources: bind the tool-catalog-approver ClusterRole in namespace %s)",
			who.Username, ts.Name, VerbApprove, ts.Namespace)}
	}
	return nil
}

// approverKey tells approvers apart for one sync's reviews.
func approverKey(a v1alpha1.Approver) string {
	groups := slices.Clone(a.Groups)
	slices.Sort(groups)
	return fmt.Sprintf("%q %q %q", a.Username, a.UID, groups)
}

// recordApprovals reports the approvals that approve nothing, and an
// approve annotation left on the source, which approves nothing either.
func (r *Reconciler) recordApprovals(ts *v1alpha1.ToolSource, found *sourceApprovals) {
	if len(found.refused) > 0 {
		r.Recorder.Eventf(ts, nil, corev1.EventTypeWarning, v1alpha1.ReasonApprovalRefused, "Approve", "%s",
			clip.Truncate("approvals that approve nothing: "+strings.Join(found.refused, "; "), 1024))
	}
	if strings.TrimSpace(ts.Annotations[v1alpha1.AnnotationApprove]) != "" {
		r.Recorder.Eventf(ts, nil, corev1.EventTypeWarning, v1alpha1.ReasonApprovalIgnored, "Approve",
			"annotation %s approves nothing: an approval is a ToolSourceApproval, made with kubectl toolcatalog approve %s TOOL; remove the annotation",
			v1alpha1.AnnotationApprove, ts.Name)
	}
}

// sourceForApproval is the source an approval approves.
func sourceForApproval(_ context.Context, obj client.Object) []ctrl.Request {
	ap, ok := obj.(*v1alpha1.ToolSourceApproval)
	if !ok || ap.Spec.Source == "" {
		return nil
	}
	return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: ap.Namespace, Name: ap.Spec.Source}}}
}
