package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ServerKind names a kind of server object a template discovers.
type ServerKind struct {
	// apiVersion is v1 for a Service, else GROUP/VERSION, as in a
	// ToolSource's serverRef.
	// +required
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([a-z0-9.-]+/)?v[0-9]+((alpha|beta)[0-9]+)?$`
	APIVersion string `json:"apiVersion"`
	// kind is Service, MCPServer, MCPRemoteProxy, VirtualMCPServer or
	// RemoteMCPServer.
	// +required
	// +kubebuilder:validation:Enum=Service;MCPServer;MCPRemoteProxy;VirtualMCPServer;RemoteMCPServer
	Kind string `json:"kind"`
}

// ToolSourceTemplateSpec says which server objects of the namespace become
// ToolSources, and how those import their tools.
type ToolSourceTemplateSpec struct {
	// kinds are the kinds of server objects discovered.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	Kinds []ServerKind `json:"kinds"`

	// selector selects the server objects, of those kinds in this
	// namespace, by label; {} selects every one.
	// +required
	Selector metav1.LabelSelector `json:"selector"`

	// template is the ToolSource made for each server: spec.mcp.serverRef
	// names the server, and toolNamePrefix may hold {name}, the server
	// object's name with every character a tool name may not hold
	// replaced by _ (each server's tools then keep names of their own).
	// +required
	Template ToolSourceTemplateSource `json:"template"`
}

// ToolSourceTemplateSource is what a template's ToolSources share.
type ToolSourceTemplateSource struct {
	// toolNamePrefix is put before every imported tool's name; {name} is
	// replaced by the server's name. It must stay within 32 characters
	// once replaced: a server whose name makes it longer is reported, not
	// imported.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([a-zA-Z0-9_-]|\{name\})*$`
	ToolNamePrefix string `json:"toolNamePrefix,omitempty"`
	// include and exclude are glob patterns of the servers' tool names,
	// as in a ToolSource.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	Include []string `json:"include,omitempty"`
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	Exclude []string `json:"exclude,omitempty"`
	// labels are set on every ToolDefinition the ToolSources create.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// permissions are given to every ToolDefinition the ToolSources
	// create.
	// +optional
	Permissions *ToolPermissions `json:"permissions,omitempty"`
	// syncInterval is each ToolSource's.
	// +optional
	SyncInterval *metav1.Duration `json:"syncInterval,omitempty"`
	// changePolicy is each ToolSource's: under RequireApproval a
	// discovered server's tools are held until approved, as a hand-written
	// source's are.
	// +optional
	// +kubebuilder:default=Apply
	ChangePolicy ChangePolicy `json:"changePolicy,omitempty"`
}

// DiscoveredServer is a server a template made a ToolSource for.
type DiscoveredServer struct {
	// kind and name are the server object's.
	// +required
	Kind string `json:"kind"`
	// +required
	Name string `json:"name"`
	// toolSource is the ToolSource made for it.
	// +optional
	ToolSource string `json:"toolSource,omitempty"`
	// uid is the UID the API server gave that ToolSource when the
	// template created it: only a ToolSource of this UID is the
	// template's to change or delete.
	// +optional
	UID types.UID `json:"uid,omitempty"`
	// reason says why a server has no ToolSource (a name taken, a prefix
	// too long).
	// +optional
	Reason string `json:"reason,omitempty"`
}

// ToolSourceTemplateStatus is what the last discovery found.
type ToolSourceTemplateStatus struct {
	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// serverCount is how many servers the template selects.
	// +optional
	ServerCount int32 `json:"serverCount"`
	// servers are the servers selected, with their ToolSources, sorted by
	// kind and name; at most the manager's --template-max-servers.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=500
	Servers []DiscoveredServer `json:"servers,omitempty"`
	// conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tst,categories=toolcatalog
// +kubebuilder:printcolumn:name="Servers",type=integer,JSONPath=`.status.serverCount`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ToolSourceTemplate makes a ToolSource for every MCP server object of its
// namespace its selector selects, and removes it when the server goes.
type ToolSourceTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ToolSourceTemplateSpec   `json:"spec,omitempty"`
	Status ToolSourceTemplateStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions.
func (t *ToolSourceTemplate) GetConditions() *[]metav1.Condition { return &t.Status.Conditions }

// +kubebuilder:object:root=true

// ToolSourceTemplateList is a list of ToolSourceTemplates.
type ToolSourceTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ToolSourceTemplate `json:"items"`
}
