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

	// ConditionEmbeddingsSynced (ToolCatalog) is True when every selected,
	// valid tool has an up-to-date embedding.
	ConditionEmbeddingsSynced = "EmbeddingsSynced"
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
