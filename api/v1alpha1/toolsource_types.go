package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ToolSourceSpec says where tools come from and how they are imported.
type ToolSourceSpec struct {
	// mcp is the MCP server whose tools are imported.
	// +required
	MCP MCPServerSpec `json:"mcp"`

	// toolNamePrefix is put before every imported tool's name; names must
	// stay within ^[a-zA-Z0-9_-]{1,64}$.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9_-]*$`
	ToolNamePrefix string `json:"toolNamePrefix,omitempty"`

	// include lists glob patterns of the server's tool names to import;
	// all when empty.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	Include []string `json:"include,omitempty"`

	// exclude lists glob patterns of the server's tool names to leave out.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	Exclude []string `json:"exclude,omitempty"`

	// labels are set on every ToolDefinition the source creates, so
	// catalogs select them with their usual selector.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// permissions are given to every ToolDefinition the source creates:
	// who may see and call the imported tools. Absent means everyone who
	// may open a catalog selecting them.
	// +optional
	Permissions *ToolPermissions `json:"permissions,omitempty"`

	// syncInterval is how often the tools are listed again when the server
	// sends no notifications/tools/list_changed.
	// +optional
	// +kubebuilder:default="5m"
	SyncInterval *metav1.Duration `json:"syncInterval,omitempty"`

	// changePolicy says what happens when the server offers a tool or
	// changes one. Apply imports and updates the ToolDefinitions at once.
	// RequireApproval holds every tool not yet approved (those of the
	// first sync, of a new selection, of a source made again with the
	// same name, and those the server adds later) and every change to a
	// tool's description, parameters or annotations, until a person who
	// may approve the source approves its spec hash (kubectl toolcatalog
	// approve, which makes a ToolSourceApproval); meanwhile
	// catalogs keep serving the approved versions. Going back to Apply
	// is itself held until approved (status.changePolicy). Tools the
	// server removes are removed either way.
	// +optional
	// +kubebuilder:default=Apply
	ChangePolicy ChangePolicy `json:"changePolicy,omitempty"`
}

// ChangePolicy is spec.changePolicy.
// +kubebuilder:validation:Enum=Apply;RequireApproval
type ChangePolicy string

const (
	// ChangePolicyApply applies upstream changes as they are listed.
	ChangePolicyApply ChangePolicy = "Apply"
	// ChangePolicyRequireApproval holds upstream changes until approved.
	ChangePolicyRequireApproval ChangePolicy = "RequireApproval"
)

// ChangeKind says what a pending change does.
// +kubebuilder:validation:Enum=Added;Modified
type ChangeKind string

const (
	// ChangeAdded is a tool the server offers that was never imported.
	ChangeAdded ChangeKind = "Added"
	// ChangeModified is a new description, schema or annotations of an
	// imported tool.
	ChangeModified ChangeKind = "Modified"
)

// PendingChange is an upstream change held for approval.
type PendingChange struct {
	// tool is the tool's name as catalogs publish it (prefix included).
	// +required
	Tool string `json:"tool"`
	// upstreamTool is the tool's name on the server.
	// +optional
	UpstreamTool string `json:"upstreamTool,omitempty"`
	// toolDefinition is the ToolDefinition that keeps the approved
	// version; empty for a tool not imported yet.
	// +optional
	ToolDefinition string `json:"toolDefinition,omitempty"`
	// change is Added or Modified.
	// +required
	Change ChangeKind `json:"change"`
	// specHash is the sha256 of the new version (name, description,
	// parameters, annotations and output schema); approving it applies
	// that version and no other.
	// +required
	SpecHash string `json:"specHash"`
	// summary says what changed, readably.
	// +optional
	Summary string `json:"summary,omitempty"`
	// diff is the whole change for a reviewer: a unified diff of the
	// approved version and the pending one (description, parameters
	// schema, annotations) with every line of both, at most 12 KiB; a
	// longer one is cut and says so.
	// +optional
	Diff string `json:"diff,omitempty"`
	// since is when the change was first seen.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
}

// MCPServerSpec is how to reach an MCP server: by URL, or by reference
// to an object of the cluster that serves it.
// +kubebuilder:validation:XValidation:rule="has(self.url) != has(self.serverRef)",message="set exactly one of url and serverRef"
type MCPServerSpec struct {
	// url is the server's Streamable HTTP endpoint, reached as the egress
	// policy allows.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	URL string `json:"url,omitempty"`

	// serverRef names an object of the cluster that serves MCP: a Service,
	// an mcp-lifecycle-operator MCPServer, a ToolHive MCPServer,
	// MCPRemoteProxy or VirtualMCPServer, or a kagent RemoteMCPServer. The
	// reference authorizes what it names and nothing more: the operator
	// dials only the ready Pods behind the Service it resolves to (an
	// address outside the cluster is still the egress policy's to
	// decide).
	// +optional
	ServerRef *ServerReference `json:"serverRef,omitempty"`

	// bearerTokenSecretRef selects a Secret key holding a bearer token sent
	// as the Authorization header.
	// +optional
	BearerTokenSecretRef *SecretKeySelector `json:"bearerTokenSecretRef,omitempty"`

	// headers are sent with every request.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Headers []HTTPHeader `json:"headers,omitempty"`

	// caSecretRef selects a Secret key holding the PEM CA bundle that signs
	// the server's certificate; the system roots are used when absent.
	// +optional
	CASecretRef *SecretKeySelector `json:"caSecretRef,omitempty"`

	// callerIdentity says how the gateway tells the server who is calling
	// a tool: not at all (None, the default: the server sees the gateway),
	// in headers naming the caller's user and groups (Headers: only for a
	// server that accepts them from the gateway alone), or by passing the
	// caller's own bearer token on (Passthrough: only a token issued for
	// the audience given here; on calls it replaces bearerTokenSecretRef's
	// token, which then only lists the tools).
	// +optional
	CallerIdentity *CallerIdentitySpec `json:"callerIdentity,omitempty"`
}

// ServerReference names an object of the cluster that serves MCP.
type ServerReference struct {
	// apiVersion is the referent's: v1 for a Service, else GROUP/VERSION
	// (mcp.x-k8s.io/v1beta1, toolhive.stacklok.dev/v1alpha1,
	// kagent.dev/v1alpha2, ...).
	// +required
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([a-z0-9.-]+/)?v[0-9]+((alpha|beta)[0-9]+)?$`
	APIVersion string `json:"apiVersion"`
	// kind is Service, MCPServer, MCPRemoteProxy, VirtualMCPServer or
	// RemoteMCPServer.
	// +required
	// +kubebuilder:validation:Enum=Service;MCPServer;MCPRemoteProxy;VirtualMCPServer;RemoteMCPServer
	Kind string `json:"kind"`
	// name is the referent's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Name string `json:"name"`
	// namespace is the referent's, the ToolSource's own when empty. A
	// reference to another namespace is followed only where that
	// namespace grants it with a Gateway API ReferenceGrant.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`
	// port is the Service port to use: needed when the Service has more
	// than one; for a server object, it replaces the port of the URL the
	// object reports.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
	// path is the server's MCP endpoint path: /mcp for a Service when
	// empty; for a server object, it replaces the path of the URL the
	// object reports.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/[-A-Za-z0-9._~!$&'()*+,;=:@%/]*$`
	Path string `json:"path,omitempty"`
}

// ServerEndpoint is where a ToolSource's serverRef led.
type ServerEndpoint struct {
	// kind, namespace and name are the object the reference named.
	// +optional
	Kind string `json:"kind,omitempty"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// +optional
	Name string `json:"name,omitempty"`
	// url is the server's endpoint as resolved from the object.
	// +optional
	URL string `json:"url,omitempty"`
	// ready says the object reports its server ready and, for a server
	// inside the cluster, a Pod behind its Service is ready.
	// +optional
	Ready bool `json:"ready"`
}

// CallerIdentityMode is how a caller's identity reaches an MCP server.
// +kubebuilder:validation:Enum=None;Headers;Passthrough
type CallerIdentityMode string

const (
	CallerIdentityNone        CallerIdentityMode = "None"
	CallerIdentityHeaders     CallerIdentityMode = "Headers"
	CallerIdentityPassthrough CallerIdentityMode = "Passthrough"
)

// CallerIdentitySpec says how the gateway tells an MCP server who calls.
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || self.mode != 'Passthrough' || (has(self.audience) && size(self.audience) > 0)",message="mode Passthrough needs audience: only a caller token issued for the server's audience is passed on"
// +kubebuilder:validation:XValidation:rule="(has(self.userHeader) ? [self.userHeader] : []).all(h, !(h.lowerAscii() in ['authorization', 'host', 'cookie', 'content-type', 'content-length', 'accept', 'mcp-session-id', 'mcp-protocol-version'])) && (has(self.groupsHeader) ? [self.groupsHeader] : []).all(h, !(h.lowerAscii() in ['authorization', 'host', 'cookie', 'content-type', 'content-length', 'accept', 'mcp-session-id', 'mcp-protocol-version']))",message="userHeader and groupsHeader may not name a header the MCP transport or credentials use"
type CallerIdentitySpec struct {
	// mode is None, Headers or Passthrough.
	// +kubebuilder:default=None
	// +optional
	Mode CallerIdentityMode `json:"mode,omitempty"`
	// userHeader names the header that carries the caller's user name
	// (Headers).
	// +kubebuilder:default="X-Toolcatalog-User"
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9-]{1,64}$`
	// +optional
	UserHeader string `json:"userHeader,omitempty"`
	// groupsHeader names the header that carries the caller's groups,
	// comma-separated (Headers).
	// +kubebuilder:default="X-Toolcatalog-Groups"
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9-]{1,64}$`
	// +optional
	GroupsHeader string `json:"groupsHeader,omitempty"`
	// audience is the audience a caller's token must have been issued for
	// to be passed on (Passthrough).
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Audience string `json:"audience,omitempty"`
}

// HTTPHeader is a header with a literal value or one from a Secret.
type HTTPHeader struct {
	// name is the header's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`
	// value is the header's value.
	// +optional
	Value string `json:"value,omitempty"`
	// valueFrom selects a Secret key holding the value.
	// +optional
	ValueFrom *SecretKeySelector `json:"valueFrom,omitempty"`
}

// MCPServerInfo is what the server said of itself at initialization.
type MCPServerInfo struct {
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	Version string `json:"version,omitempty"`
	// +optional
	ProtocolVersion string `json:"protocolVersion,omitempty"`
	// instructions are the server's instructions to a client, at most
	// 1024 characters, what a person would not see escaped.
	// +optional
	Instructions string `json:"instructions,omitempty"`
}

// SkippedTool is an upstream tool not imported, and why.
type SkippedTool struct {
	// tool is the tool's name on the server.
	// +required
	Tool string `json:"tool"`
	// reason says why and what to fix.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// ToolSourceStatus is what the last sync found.
type ToolSourceStatus struct {
	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// selectionHash identifies the selection (spec.mcp.url or serverRef,
	// toolNamePrefix, include and exclude) of the last successful sync.
	// +optional
	SelectionHash string `json:"selectionHash,omitempty"`
	// changePolicy is the change policy the last sync enforced:
	// RequireApproval from the first sync under it until an approver
	// approves the return to Apply that spec.changePolicy asks for (a
	// ToolSourceApproval whose changePolicyGeneration is the source's
	// metadata.generation that asks for it).
	// +optional
	ChangePolicy ChangePolicy `json:"changePolicy,omitempty"`
	// imported records the ToolDefinitions this source created, by the
	// UIDs the API server returned to it. Only these are the source's own:
	// a ToolDefinition that names the source, or carries an owner
	// reference to it, without being recorded here is refused by the
	// source, the catalogs and the gateway. Only the operator writes it;
	// granting toolsources/status to anyone else grants them the source's
	// credentials.
	// +optional
	Imported *ImportRecord `json:"imported,omitempty"`
	// server is what the server said of itself.
	// +optional
	Server *MCPServerInfo `json:"server,omitempty"`
	// endpoint is where spec.mcp.serverRef led at the last resolution.
	// +optional
	Endpoint *ServerEndpoint `json:"endpoint,omitempty"`
	// toolCount is the number of ToolDefinitions the source keeps.
	// +optional
	ToolCount int32 `json:"toolCount"`
	// lastSyncTime is when the tools were last listed.
	// +optional
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`
	// skippedTools lists upstream tools not imported (malformed, or a
	// name another ToolDefinition already has); at most 20.
	// +optional
	// +listType=map
	// +listMapKey=tool
	// +kubebuilder:validation:MaxItems=20
	SkippedTools []SkippedTool `json:"skippedTools,omitempty"`
	// pendingChanges are the upstream changes held for approval under
	// changePolicy RequireApproval, at most 50.
	// +optional
	// +listType=map
	// +listMapKey=tool
	// +kubebuilder:validation:MaxItems=50
	PendingChanges []PendingChange `json:"pendingChanges,omitempty"`
	// conditions: Ready, Synced and, under RequireApproval, ChangePending.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ImportRecord is the operator's record of what a ToolSource created.
type ImportRecord struct {
	// uids are the UIDs of the ToolDefinitions the source created and
	// keeps, sorted.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=10000
	UIDs []types.UID `json:"uids,omitempty"`
	// specs are, in the order of uids, the hashes of the specs the
	// source wrote to those ToolDefinitions: one, or two (space
	// separated) while the source rewrites one. A ToolDefinition whose
	// spec hashes to neither was edited by somebody else: no catalog
	// serves the edit, and the source writes its own version back.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MaxLength=64
	Specs []string `json:"specs,omitempty"`
	// tools are, in the order of uids, the tool names (spec.name) of
	// those ToolDefinitions: the gateway calls a source's server only for
	// a tool listed here.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MaxLength=64
	Tools []string `json:"tools,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ts,categories=toolcatalog
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.mcp.url`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.status.endpoint.url`
// +kubebuilder:printcolumn:name="Server",type=string,JSONPath=`.status.server.name`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Tools",type=integer,JSONPath=`.status.toolCount`
// +kubebuilder:printcolumn:name="Pending",type=string,JSONPath=`.status.conditions[?(@.type=="ChangePending")].status`
// +kubebuilder:printcolumn:name="Synced",type=date,JSONPath=`.status.lastSyncTime`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ToolSource imports the tools an MCP server offers as ToolDefinitions it
// owns, and keeps them in step with the server.
type ToolSource struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ToolSourceSpec `json:"spec"`
	// +optional
	Status ToolSourceStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ToolSourceList is a list of ToolSources.
type ToolSourceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ToolSource `json:"items"`
}

// GetConditions returns a pointer to the status conditions.
func (t *ToolSource) GetConditions() *[]metav1.Condition { return &t.Status.Conditions }
