package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ToolSourceApprovalSpec is what one approver approved of one ToolSource.
// It cannot be changed once made: a new review makes a new approval.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="an approval cannot be changed: make a new one"
// +kubebuilder:validation:XValidation:rule="size(self.tools) > 0 || has(self.changePolicyGeneration)",message="an approval approves tools, a return to changePolicy Apply, or both"
type ToolSourceApprovalSpec struct {
	// source is the name of the ToolSource approved, in this namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Source string `json:"source"`

	// sourceUID is the UID of the ToolSource the approver reviewed: an
	// approval made for an earlier source of the same name approves
	// nothing.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	SourceUID string `json:"sourceUID"`

	// approver is who approves, as the API server authenticated them when
	// the approval was made (kubectl toolcatalog approve fills it in from
	// a SelfSubjectReview). The operator approves nothing unless this user
	// may "approve" the ToolSource (a SubjectAccessReview at each sync);
	// the admission policy refuses an approval that names anyone but the
	// user making it.
	// +required
	Approver Approver `json:"approver"`

	// tools are the pending changes approved, each by the whole spec hash
	// of the version reviewed: a later upstream change needs a new
	// approval.
	// +optional
	// +listType=map
	// +listMapKey=tool
	// +kubebuilder:validation:MaxItems=100
	Tools []ApprovedTool `json:"tools,omitempty"`

	// changePolicyGeneration approves the source's return from
	// RequireApproval to the changePolicy Apply its spec asks for at this
	// metadata.generation; a later generation needs a new approval.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ChangePolicyGeneration *int64 `json:"changePolicyGeneration,omitempty"`
}

// Approver is the user who approves.
type Approver struct {
	// username is the user's name as the API server knows it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Username string `json:"username"`
	// uid is the user's UID, when the authenticator gives one.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	UID string `json:"uid,omitempty"`
	// groups are the user's groups.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=512
	Groups []string `json:"groups,omitempty"`
}

// ApprovedTool is one pending change approved.
type ApprovedTool struct {
	// tool is the tool's name as published (prefix included).
	// +required
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9_-]{1,64}$`
	Tool string `json:"tool"`
	// specHash is the whole spec hash of the version approved
	// (status.pendingChanges[].specHash).
	// +required
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	SpecHash string `json:"specHash"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=tsapproval,categories=toolcatalog
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.spec.source`
// +kubebuilder:printcolumn:name="Approver",type=string,JSONPath=`.spec.approver.username`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ToolSourceApproval approves upstream changes a ToolSource holds under
// changePolicy RequireApproval. Making one is the approve right: grant
// create on toolsourceapprovals (the approver ClusterRole) only to those
// who review a source's changes, since the operator applies what an
// approval names once its approver may "approve" the source. The
// operator deletes an approval once nothing it approves is still held.
type ToolSourceApproval struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ToolSourceApprovalSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// ToolSourceApprovalList is a list of ToolSourceApprovals.
type ToolSourceApprovalList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ToolSourceApproval `json:"items"`
}
