package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ToolDefinitionSpec describes one tool as a language model sees it.
type ToolDefinitionSpec struct {
	// name is the function name the model sees and calls. Unlike
	// metadata.name it may contain underscores and upper case letters.
	// tool_search, tool_describe and tool_call are reserved for progressive
	// disclosure.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9_-]{1,64}$`
	// +kubebuilder:validation:XValidation:rule="!(self in ['tool_search', 'tool_describe', 'tool_call'])",message="tool_search, tool_describe and tool_call are reserved for progressive disclosure: choose another name"
	Name string `json:"name"`

	// description is the only prose the model reads when it selects tools,
	// and the text the catalog embeds. Changing it makes the tool stale in
	// every catalog that selects it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self.trim().size() > 0",message="description must not be blank"
	Description string `json:"description"`

	// parameters is the JSON Schema of the tool's arguments; it must describe
	// an object (`type: object`). It is kept verbatim and checked by the
	// controller with a JSON Schema validator; a tool whose schema is invalid
	// is reported (Valid=False) and never published. Omit it for a tool
	// without arguments.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Parameters *apiextensionsv1.JSON `json:"parameters,omitempty"`

	// outputSchema is the JSON Schema of the tool's structured result
	// (MCP's outputSchema); it must describe an object. It is checked like
	// parameters, published with the tool and listed to MCP clients, which
	// check results against it; it is not embedded.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	OutputSchema *apiextensionsv1.JSON `json:"outputSchema,omitempty"`

	// toolset groups related tools, for example the tools of one MCP server
	// (`mcp-github`).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9]([a-zA-Z0-9_.-]*[a-zA-Z0-9])?$`
	Toolset string `json:"toolset,omitempty"`

	// alwaysInclude marks a core tool: it is never deferred and is sent to
	// the model with every request, whatever the search returns.
	// +optional
	AlwaysInclude bool `json:"alwaysInclude,omitempty"`

	// allowRepeat allows the agent to call the tool more than once for the
	// same request.
	// +optional
	AllowRepeat bool `json:"allowRepeat,omitempty"`

	// noBackground forbids calling the tool from background (unattended)
	// agent runs.
	// +optional
	NoBackground bool `json:"noBackground,omitempty"`

	// permissions restricts who may use the tool. Absent means everyone.
	// +optional
	Permissions *ToolPermissions `json:"permissions,omitempty"`

	// exampleQueries are curated user requests this tool answers. They count
	// toward the catalog's queriesPerTool and are never replaced by
	// generated queries.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.all(q, q.trim().size() > 0)",message="exampleQueries must not contain blank entries"
	ExampleQueries []string `json:"exampleQueries,omitempty"`

	// annotations are hints about the tool's behaviour, as MCP defines
	// them. They are published with the tool; they are not embedded.
	// +optional
	Annotations *ToolAnnotations `json:"annotations,omitempty"`

	// icons are images a client may show for the tool (MCP's icons). Each
	// src is an https URL (clients fetch it themselves) or a base64 data
	// URI of a PNG, JPEG, GIF or WebP image; SVG is refused, as it can
	// carry scripts. Published with the tool; not embedded.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Icons []ToolIcon `json:"icons,omitempty"`

	// source says where the tool is served, so a runtime or gateway knows
	// where to call it. Set by a ToolSource for the tools it imports.
	// +optional
	Source *ToolSourceReference `json:"source,omitempty"`
}

// ToolAnnotations are MCP's tool annotations: hints from the tool's
// provider, never guarantees.
type ToolAnnotations struct {
	// title is a human-readable name for the tool.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Title string `json:"title,omitempty"`
	// readOnlyHint: the tool does not modify its environment.
	// +optional
	ReadOnlyHint *bool `json:"readOnlyHint,omitempty"`
	// destructiveHint: the tool may perform destructive updates.
	// +optional
	DestructiveHint *bool `json:"destructiveHint,omitempty"`
	// idempotentHint: calling it again with the same arguments has no
	// further effect.
	// +optional
	IdempotentHint *bool `json:"idempotentHint,omitempty"`
	// openWorldHint: the tool interacts with external entities.
	// +optional
	OpenWorldHint *bool `json:"openWorldHint,omitempty"`
}

// ToolIcon is an image a client may show for a tool.
type ToolIcon struct {
	// src is an https URL without credentials, or a data URI
	// (data:image/png;base64,...) of at most 16 KiB.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=16384
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') || self.startsWith('data:image/')",message="src must be an https URL or a data URI of an image"
	Src string `json:"src"`
	// mimeType is the image's type, when src does not say it.
	// +optional
	// +kubebuilder:validation:Enum=image/png;image/jpeg;image/gif;image/webp
	MIMEType string `json:"mimeType,omitempty"`
	// sizes the image fits, like 48x48, or any.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:Pattern=`^([1-9][0-9]{0,3}x[1-9][0-9]{0,3}|any)$`
	Sizes []string `json:"sizes,omitempty"`
	// theme is the background the icon is drawn for: light or dark.
	// +optional
	// +kubebuilder:validation:Enum=light;dark
	Theme string `json:"theme,omitempty"`
}

// ToolSourceReference says where a tool is served.
type ToolSourceReference struct {
	// toolSource is the ToolSource that imported the tool, in the same
	// namespace; empty for a tool written by hand.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ToolSource string `json:"toolSource,omitempty"`
	// mcpURL is the Streamable HTTP endpoint of the MCP server serving
	// the tool.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	MCPURL string `json:"mcpURL,omitempty"`
	// tool is the tool's name on that server (before any prefix).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Tool string `json:"tool"`
}

// ToolPermissions restricts the principals that may use a tool.
type ToolPermissions struct {
	// allowedPrincipals lists the users, groups or service accounts allowed
	// to use the tool, as the consuming agent runtime names them; an entry
	// "group:G" allows every member of group G (the gateway takes users
	// and groups from Kubernetes service-account tokens or its static
	// tokens, for example system:serviceaccount:agents:planner and
	// group:system:serviceaccounts:agents). Absent means everyone, as does
	// a list containing "*"; an empty list ([]) means nobody.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	AllowedPrincipals []string `json:"allowedPrincipals"`
}

// ToolDefinitionStatus is the observed state of a ToolDefinition.
type ToolDefinitionStatus struct {
	// observedGeneration is the metadata.generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// specHash is the sha256 (hex) of the canonical encoding of name,
	// description and parameters. It changes exactly when what the model
	// reads changes; key order in parameters does not matter.
	// +optional
	SpecHash string `json:"specHash,omitempty"`

	// catalogs records, per selecting ToolCatalog, what was last embedded
	// and published for this tool. The ToolDefinition controller writes
	// every entry, from what the catalogs' passes came to.
	// +optional
	// +listType=map
	// +listMapKey=catalog
	// +kubebuilder:validation:MaxItems=64
	Catalogs []CatalogEmbeddingStatus `json:"catalogs,omitempty"`

	// conditions: Valid, Embedded and Ready; Confusable when a catalog
	// cannot tell this tool from another.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// CatalogEmbeddingStatus is what one ToolCatalog embedded for a tool.
type CatalogEmbeddingStatus struct {
	// catalog is the name of the ToolCatalog, in the same namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Catalog string `json:"catalog"`

	// specHash is the tool's spec hash at the time it was embedded.
	// +optional
	SpecHash string `json:"specHash,omitempty"`

	// model is the embedding model id that produced the vector.
	// +optional
	Model string `json:"model,omitempty"`

	// queryCount is the number of queries the vector was computed from.
	// +optional
	QueryCount int32 `json:"queryCount,omitempty"`

	// catalogVersion is the catalog version that first contained this
	// embedding.
	// +optional
	CatalogVersion int64 `json:"catalogVersion,omitempty"`

	// embeddedTime is when the embedding was computed.
	// +optional
	EmbeddedTime *metav1.Time `json:"embeddedTime,omitempty"`

	// reason is why the current spec is not embedded in this catalog
	// (InvalidSpec, NameConflict, QueryGenerationFailed, EmbeddingError);
	// empty when it is, or while it is pending.
	// +optional
	Reason string `json:"reason,omitempty"`

	// message explains reason.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// confusableWith is the tool of this catalog that the catalog's
	// self-grading found confusable with this one: each tool's own queries
	// retrieve the other first.
	// +optional
	ConfusableWith *ConfusableTool `json:"confusableWith,omitempty"`
}

// ConfusableTool is another tool a catalog cannot tell apart from this one.
type ConfusableTool struct {
	// name is the other tool's spec.name.
	// +required
	Name string `json:"name"`

	// similarity is the cosine similarity of the two tools' vectors, with
	// two decimals ("0.97").
	// +optional
	Similarity string `json:"similarity,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=td,categories=toolcatalog
// +kubebuilder:printcolumn:name="Tool",type=string,JSONPath=`.spec.name`
// +kubebuilder:printcolumn:name="Toolset",type=string,JSONPath=`.spec.toolset`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Hash",type=string,JSONPath=`.status.specHash`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ToolDefinition is one tool an LLM agent can call: its name, the
// description the model reads, the JSON Schema of its parameters, flags and
// permissions. ToolCatalogs select ToolDefinitions by label, embed them and
// publish them to Redis.
type ToolDefinition struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the tool as the model sees it.
	// +required
	Spec ToolDefinitionSpec `json:"spec"`

	// status is the observed state of the tool.
	// +optional
	Status ToolDefinitionStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ToolDefinitionList is a list of ToolDefinitions.
type ToolDefinitionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ToolDefinition `json:"items"`
}

// GetConditions returns a pointer to the status conditions, for helpers that
// set conditions on either kind.
func (t *ToolDefinition) GetConditions() *[]metav1.Condition { return &t.Status.Conditions }
