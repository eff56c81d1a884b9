package v1alpha1

// Condition types. Ready is present on both kinds and summarises the others,
// so `kubectl wait --for=condition=Ready` and kstatus-based health checks work.
const (
	// ConditionReady is True when the object is fully reconciled and usable.
	ConditionReady = "Ready"

	// ConditionValid (ToolDefinition) is True when the spec passed every check
	// the API server cannot make, such as the parameters being a valid JSON
	// Schema. A tool that is not valid is never published.
	ConditionValid = "Valid"

	// ConditionEmbedded (ToolDefinition) is True when every catalog selecting
	// the tool has embedded its current spec hash.
	ConditionEmbedded = "Embedded"

	// ConditionPublished (ToolCatalog) is True when the current catalog
	// document is written to Redis and announced.
	ConditionPublished = "Published"

	// ConditionReconciling (all kinds) is True while the object's work goes
	// on: a catalog's tools refreshed over several passes (a first build, a
	// model change; its message says how far it got), a tool waiting for
	// its source to record it, a failure retried. It is removed when the work is done.
	// kstatus (kubectl wait, Flux, the Argo CD health check of
	// docs/gitops.md) reports the object InProgress while it is True.
	ConditionReconciling = "Reconciling"

	// ConditionStalled (all kinds) is True when nothing is retried before
	// the user changes something (the object, a Secret it names): its
	// reason and message are Ready's and say what to change. kstatus
	// reports the object Failed while it is True.
	ConditionStalled = "Stalled"

	// ConditionEmbeddingsSynced (ToolCatalog) is True when every selected,
	// valid tool has an up-to-date embedding.
	ConditionEmbeddingsSynced = "EmbeddingsSynced"

	// ConditionConfusable (ToolDefinition) is True when a catalog's
	// self-grading found that this tool's own queries retrieve another tool
	// of the catalog, and that tool's queries retrieve this one: a model
	// reading the two descriptions cannot tell them apart. The message names
	// the other tool and the similarity of their vectors. It never blocks a
	// publish; it goes away when the descriptions differ enough.
	ConditionConfusable = "Confusable"

	// ReasonConfusableWith is the reason of a True Confusable condition.
	ReasonConfusableWith = "ConfusableWith"

	// ConditionChangePending (ToolSource, ToolDefinition) is True while an
	// upstream change to a tool waits for approval under changePolicy
	// RequireApproval. The ToolDefinition keeps, and catalogs keep
	// serving, the approved version meanwhile.
	ConditionChangePending = "ChangePending"

	// ReasonAwaitingApproval is the reason of a True ChangePending
	// condition.
	ReasonAwaitingApproval = "AwaitingApproval"

	// ReasonNoPendingChanges is the reason of a False ChangePending
	// condition.
	ReasonNoPendingChanges = "NoPendingChanges"
)

// Conditions and reasons of ToolSource.
const (
	// ConditionSynced (ToolSource) is True when the last sync listed the
	// server's tools and applied them as ToolDefinitions.
	ConditionSynced = "Synced"

	// ReasonSynced means the last sync listed and applied the tools.
	ReasonSynced = "Synced"
	// ReasonServerUnreachable means the MCP server could not be reached,
	// did not answer in time or did not speak MCP; the ToolDefinitions
	// already imported are kept.
	ReasonServerUnreachable = "ServerUnreachable"
	// ReasonServerNotReady means the object spec.mcp.serverRef names does
	// not report its server ready (the message names its own condition),
	// or no Pod behind its Service is ready; the source waits.
	ReasonServerNotReady = "ServerNotReady"
	// ReasonServerRefNotFound means the object spec.mcp.serverRef names
	// does not exist, or its kind is not installed; the source waits.
	ReasonServerRefNotFound = "ServerRefNotFound"
	// ReasonServerRefRefused means spec.mcp.serverRef names what a
	// reference may not lead to (another namespace without a
	// ReferenceGrant, an ExternalName Service, endpoints that are not the
	// Service's Pods, a URL naming another namespace or the API server);
	// the message says which.
	ReasonServerRefRefused = "ServerRefRefused"
	// ReasonDiscovered (ToolSourceTemplate Ready=True): every server
	// selected has its ToolSource.
	ReasonDiscovered = "Discovered"
	// ReasonTooManyServers (ToolSourceTemplate Ready=False): the template
	// selects more servers than --template-max-servers; the first by kind
	// and name have ToolSources.
	ReasonTooManyServers = "TooManyServers"
	// ReasonServerSkipped (ToolSourceTemplate Ready=False): a selected
	// server has no ToolSource (status.servers says why).
	ReasonServerSkipped = "ServerSkipped"
	// ReasonAuthFailed means the MCP server refused the credentials (401
	// or 403).
	ReasonAuthFailed = "AuthFailed"
	// ReasonApplyFailed means the tools were listed but creating, updating
	// or deleting their ToolDefinitions failed (the API server refused or
	// was unreachable); the sync is retried with backoff.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonToolsSkipped is the Warning event of a sync that skipped tools
	// it could not import (status.skippedTools says why).
	ReasonToolsSkipped = "ToolsSkipped"
	// ReasonChangePending is the Warning event of a sync that found
	// upstream changes to hold for approval.
	ReasonChangePending = "ChangePending"
	// ReasonChangeApproved is the event of an approved change applied.
	ReasonChangeApproved = "ChangeApproved"
	// ReasonApprovalIgnored is the Warning event of an approve annotation,
	// which approves nothing: approvals are ToolSourceApprovals.
	ReasonApprovalIgnored = "ApprovalIgnored"
	// ReasonApprovalRefused is the Warning event of ToolSourceApprovals
	// that approve nothing: their approver may not approve the source.
	ReasonApprovalRefused = "ApprovalRefused"
	// ReasonImportsRecorded is the event of a source that took the
	// ToolDefinitions it controlled before it kept a record
	// (status.imported) as its own, once.
	ReasonImportsRecorded = "ImportsRecorded"
)

// Annotations of change approval (ToolSource changePolicy RequireApproval).
const (
	// AnnotationApprove approves nothing, on a ToolSource or a
	// ToolDefinition: whoever may edit an object could write it. An
	// approval is a ToolSourceApproval; a sync that finds the annotation
	// says so in a Warning event.
	AnnotationApprove = "toolcatalog.dev/approve"

	// AnnotationPendingChange is set by a ToolSource on a ToolDefinition
	// whose upstream change waits for approval: "SPECHASH SUMMARY".
	AnnotationPendingChange = "toolcatalog.dev/pending-change"

	// AnnotationCheckIgnore silences rules of kubectl toolcatalog check
	// for one object: a line "RULE: reason" per rule. The operator does
	// not read it.
	AnnotationCheckIgnore = "toolcatalog.dev/check-ignore"

	// LabelToolSource marks the ToolDefinitions a ToolSource created with
	// its name.
	LabelToolSource = "toolcatalog.dev/tool-source"
)

// Secrets opt in to being read by the operator and the gateway.
const (
	// LabelSecret must be set to LabelSecretValue on a Secret before a
	// ToolCatalog or ToolSource of its namespace may use it. A Secret
	// without it is treated as missing: whoever may create catalogs and
	// sources in a namespace cannot make the operator read, or send
	// upstream, a Secret its owner never offered.
	LabelSecret = "toolcatalog.dev/secret"

	// LabelSecretValue is the value of LabelSecret that opts a Secret in.
	LabelSecretValue = "true"
)

// Condition reasons of ToolDefinition.
const (
	// ReasonSpecValid means the spec passed validation.
	ReasonSpecValid = "SpecValid"

	// ReasonInvalidParametersSchema means spec.parameters is not a valid JSON
	// Schema; the message names the offending keyword and location.
	ReasonInvalidParametersSchema = "InvalidParametersSchema"

	// ReasonParametersNotObject means spec.parameters is a valid JSON Schema
	// but does not describe an object (`type: object`), which function
	// calling requires.
	ReasonParametersNotObject = "ParametersNotObject"

	// ReasonInvalidOutputSchema means spec.outputSchema is not a valid JSON
	// Schema or does not describe an object.
	ReasonInvalidOutputSchema = "InvalidOutputSchema"

	// ReasonInvalidIcons means an icon of spec.icons is not an https URL
	// without credentials or a base64 data URI of a PNG, JPEG, GIF or WebP
	// image, or says something else that is not allowed.
	ReasonInvalidIcons = "InvalidIcons"

	// ReasonInvisibleCharacters means a text a model reads (the
	// description, the title, a string of a schema) holds a character a
	// person reviewing it would not see: a control, format, private-use or
	// default-ignorable character, a variation selector, a noncharacter, or
	// a line or paragraph separator.
	ReasonInvisibleCharacters = "InvisibleCharacters"

	// ReasonSourceNotOwned means spec.source.toolSource names a ToolSource
	// that does not control this ToolDefinition: its credentials are not
	// lent to it, and catalogs leave it out.
	ReasonSourceNotOwned = "SourceNotOwned"
	// ReasonSourceUnconfirmed means spec.source.toolSource names a
	// ToolSource that has not yet recorded this ToolDefinition as one it
	// created (status.imported): catalogs leave it out until the source's
	// sync records it, or refuses it.
	ReasonSourceUnconfirmed = "SourceUnconfirmed"
	// ReasonImportEdited means a ToolSource created this ToolDefinition
	// but its spec is not one the source wrote (status.imported.specs):
	// somebody else edited it. Catalogs leave it out; the source writes it
	// back at its next sync. An imported tool changes on its server or
	// through its ToolSource, never by editing the ToolDefinition.
	ReasonImportEdited = "ImportEdited"
)

// Annotations that request a refresh of a ToolCatalog. A new value of
// AnnotationRefreshRequestedAt is handled once and echoed in
// status.lastHandledRefreshAt.
const (
	// AnnotationRefreshRequestedAt carries an opaque token (a timestamp is
	// customary); a value different from status.lastHandledRefreshAt
	// requests one refresh.
	AnnotationRefreshRequestedAt = "toolcatalog.dev/refresh-requested-at"

	// AnnotationRefreshMode selects what a requested refresh does; one of
	// the RefreshMode values. Without it, a requested refresh re-embeds
	// stale and invalid tools, as a normal pass does.
	AnnotationRefreshMode = "toolcatalog.dev/refresh-mode"

	// AnnotationRefreshTools limits a requested refresh to a comma-separated
	// list of tool names (spec.name).
	AnnotationRefreshTools = "toolcatalog.dev/refresh-tools"
)

// RefreshMode is the value of AnnotationRefreshMode.
type RefreshMode string

const (
	// RefreshModeForce regenerates queries and re-embeds every targeted tool.
	RefreshModeForce RefreshMode = "force"

	// RefreshModeInvalidOnly regenerates queries only for tools whose stored
	// query set is invalid, and re-embeds them.
	RefreshModeInvalidOnly RefreshMode = "invalid-only"

	// RefreshModeEmbedOnly recomputes vectors from the stored queries without
	// calling the query generator.
	RefreshModeEmbedOnly RefreshMode = "embed-only"
)

// Condition reasons of ToolDefinition's Embedded condition.
const (
	// ReasonEmbedded means every selecting catalog embedded the current spec.
	ReasonEmbedded = "Embedded"
	// ReasonEmbeddingPending means a selecting catalog has not embedded the
	// current spec yet.
	ReasonEmbeddingPending = "EmbeddingPending"
	// ReasonEmbeddingFailed means a selecting catalog failed to embed the
	// current spec; the message names the catalog and the cause.
	ReasonEmbeddingFailed = "EmbeddingFailed"
	// ReasonNotSelected means no ToolCatalog selects the tool.
	ReasonNotSelected = "NotSelected"
)

// ConditionPinned is set on a ToolCatalog while spec.publish.pinVersion
// is: True (ReasonPinned) when the version asked for is served, False
// (ReasonPinUnavailable) when it cannot be, saying why and what is served
// instead.
const ConditionPinned = "Pinned"

// Condition reasons of ToolCatalog.
const (
	// ReasonPinned (Pinned=True): consumers are served the pinned version.
	ReasonPinned = "Pinned"
	// ReasonUnpinned is the event of a pin cleared: the newest version is
	// served again.
	ReasonUnpinned = "Unpinned"
	// ReasonPinUnavailable (Pinned=False): the version asked for cannot be
	// pinned (not published, no longer retained, or embedded with another
	// model); the message says what is served instead.
	ReasonPinUnavailable = "PinUnavailable"
	// ReasonSucceeded (Ready=True) means the catalog is published and
	// every selected tool is embedded.
	ReasonSucceeded = "Succeeded"
	// ReasonVersionPublished (Published=True) means this pass published a
	// new version.
	ReasonVersionPublished = "VersionPublished"
	// ReasonUpToDate (Published=True) means Redis already holds the
	// current catalog.
	ReasonUpToDate = "UpToDate"
	// ReasonPublishedDataLost (Published=False) means the catalog's Redis
	// no longer holds the version published there (restarted empty,
	// flushed, evicted, or failed over to a replica that had not received
	// it): the current state is being published again, as a newer
	// version.
	ReasonPublishedDataLost = "PublishedDataLost"
	// ReasonRedisUnavailable means Redis could not be read or written;
	// the pass is retried within seconds and nothing was half-written.
	ReasonRedisUnavailable = "RedisUnavailable"
	// ReasonSecretNotFound means a referenced Secret or key is missing.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonInvalidConfiguration means the spec cannot be used as is; the
	// message names the field.
	ReasonInvalidConfiguration = "InvalidConfiguration"
	// ReasonPublishBlocked means publishing would mix vectors of two
	// embedding models; the previous version stays until every tool is
	// re-embedded.
	ReasonPublishBlocked = "PublishBlocked"
	// ReasonAllEmbedded (EmbeddingsSynced=True) means every selected tool
	// is embedded with its current spec.
	ReasonAllEmbedded = "AllEmbedded"
	// ReasonToolsFailed means some tools failed to refresh; they keep
	// their previous embedding and are listed in status.failingTools.
	ReasonToolsFailed = "ToolsFailed"

	// ReasonConfusableTools is the Warning event of a catalog whose
	// self-grading found two tools it cannot tell apart.
	ReasonConfusableTools = "ConfusableTools"
	// ReasonProviderAuthFailed means a provider rejected the API key.
	ReasonProviderAuthFailed = "ProviderAuthFailed"
	// ReasonToolsRejected means selected ToolDefinitions are invalid.
	ReasonToolsRejected = "ToolsRejected"
	// ReasonNameConflict means two selected ToolDefinitions share a
	// spec.name; neither is updated until one is renamed or unselected.
	ReasonNameConflict = "NameConflict"
	// ReasonRefreshPending means a restricted refresh left work for the
	// next pass, which follows shortly.
	ReasonRefreshPending = "RefreshPending"
	// ReasonInvalidRefreshRequest means a refresh annotation could not be
	// understood; it is recorded as handled and ignored.
	ReasonInvalidRefreshRequest = "InvalidRefreshRequest"
	// ReasonForeignKeys is the Warning event of a deleted catalog whose
	// keys hold another catalog's version: they are left in place.
	ReasonForeignKeys = "ForeignKeys"
	// ReasonAPIError means reading from the Kubernetes API failed (listing
	// ToolDefinitions, reading a Secret); the pass is retried with backoff.
	ReasonAPIError = "KubernetesAPIError"
	// ReasonRefreshing means tools are being refreshed over several
	// passes; each pass publishes the tools it finished.
	ReasonRefreshing = "Refreshing"
	// ReasonRetrying (Reconciling=True) means a failure is retried: the
	// message is the failure.
	ReasonRetrying = "Retrying"

	// ReasonReconciling (Ready=Unknown) means the first pass has not
	// finished yet.
	ReasonReconciling = "Reconciling"
	// ReasonEgressDenied means an MCP server's URL, or a provider's base
	// URL (spec.embedding.baseURL, spec.queryGeneration.baseURL or its
	// fallback), is outside the egress policy the platform operators set
	// (--egress-allow); nothing was sent to it.
	ReasonEgressDenied = "EgressDenied"
	// ReasonSyncLimitExceeded means an MCP server lists more tools than a
	// ToolSource may import (the manager's --source-max-tools); nothing
	// was changed.
	ReasonSyncLimitExceeded = "SyncLimitExceeded"
)

// Per-tool failure reasons, used in ToolCatalog status.failingTools and in
// ToolDefinition status.catalogs.
const (
	// ReasonInvalidSpec means the tool's spec failed validation.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonQueryGenerationFailed means no synthetic queries could be
	// generated for the tool.
	ReasonQueryGenerationFailed = "QueryGenerationFailed"
	// ReasonEmbeddingError means the tool's queries could not be embedded.
	ReasonEmbeddingError = "EmbeddingError"
)

// FinalizerCleanup lets a ToolCatalog remove its Redis keys before it goes.
const FinalizerCleanup = "toolcatalog.dev/cleanup"
