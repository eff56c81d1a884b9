package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ToolCatalogSpec declares which tools form a catalog, how they are embedded
// and where the catalog is published.
type ToolCatalogSpec struct {
	// selector selects the ToolDefinitions of this catalog, in the catalog's
	// namespace. An empty selector ({}) selects every ToolDefinition of the
	// namespace.
	// +required
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="selector.matchExpressions operator must be one of In, NotIn, Exists, DoesNotExist"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['Exists', 'DoesNotExist'] ? (!has(e.values) || size(e.values) == 0) : (has(e.values) && size(e.values) > 0))",message="selector.matchExpressions: In and NotIn need values, Exists and DoesNotExist must have none"
	Selector metav1.LabelSelector `json:"selector"`

	// redis is where the catalog is published.
	// +required
	Redis RedisSpec `json:"redis"`

	// embedding configures the provider that turns tool queries into vectors.
	// +optional
	// +kubebuilder:default={}
	Embedding EmbeddingSpec `json:"embedding,omitempty"`

	// queryGeneration configures the provider that writes synthetic user
	// queries for each tool; the tool's vector is the centroid of its
	// queries' embeddings.
	// +optional
	// +kubebuilder:default={}
	QueryGeneration QueryGenerationSpec `json:"queryGeneration,omitempty"`

	// search holds the defaults published for consumers that search the
	// catalog.
	// +optional
	// +kubebuilder:default={}
	Search SearchSpec `json:"search,omitempty"`

	// publish configures versioning and update notifications.
	// +optional
	// +kubebuilder:default={}
	Publish PublishSpec `json:"publish,omitempty"`

	// learning lets the catalog learn from use: consumers record the
	// request text that led to each tool call, and frequent requests are
	// folded into their tools' query sets. Off by default; the request
	// text is stored in Redis (docs/learning.md).
	// +optional
	Learning LearningSpec `json:"learning,omitempty"`

	// disclosure is the catalog's progressive-disclosure policy, published
	// with it so every consumer (the gateway, pkg/toolcatalog) applies the
	// same one: when a client gets the core tools plus tool_search,
	// tool_describe and tool_call instead of every tool.
	// +optional
	// +kubebuilder:default={}
	Disclosure DisclosureSpec `json:"disclosure,omitempty"`

	// gateway configures how toolcatalog-gateway serves the catalog over
	// MCP.
	// +optional
	Gateway GatewaySpec `json:"gateway,omitempty"`
}

// DisclosureMode is spec.disclosure.mode.
// +kubebuilder:validation:Enum=off;on;auto
type DisclosureMode string

const (
	// DisclosureOff sends every tool.
	DisclosureOff DisclosureMode = "off"
	// DisclosureOn sends the core tools and the bridge tools.
	DisclosureOn DisclosureMode = "on"
	// DisclosureAuto defers when the deferrable tools' schemas would take
	// at least threshold of the context window.
	DisclosureAuto DisclosureMode = "auto"
)

// DisclosureSpec is the progressive-disclosure policy.
// +kubebuilder:validation:XValidation:rule="!has(self.searchTopK) || !has(self.searchMaxTopK) || self.searchTopK <= self.searchMaxTopK",message="disclosure.searchTopK must not exceed disclosure.searchMaxTopK"
type DisclosureSpec struct {
	// mode is off (every allowed tool is listed), on (the core tools, those
	// marked alwaysInclude, plus tool_search, tool_describe and tool_call)
	// or auto (on when the schemas of the non-core tools would take at
	// least threshold of the context window). With nothing to defer, the
	// tools themselves are listed whatever the mode.
	// +optional
	// +kubebuilder:default=auto
	Mode DisclosureMode `json:"mode,omitempty"`

	// threshold is the share of the context window (above 0, at most 1)
	// the non-core tools' schemas may take before auto mode defers them.
	// Unset, 0.10.
	// +optional
	// +kubebuilder:validation:Minimum=0.001
	// +kubebuilder:validation:Maximum=1
	Threshold *float64 `json:"threshold,omitempty"`

	// contextWindow is the model's context window in tokens, assumed when
	// a client does not give its own. Unset, 128000.
	// +optional
	// +kubebuilder:validation:Minimum=1000
	// +kubebuilder:validation:Maximum=100000000
	ContextWindow *int32 `json:"contextWindow,omitempty"`

	// searchTopK is how many tools tool_search returns when the model does
	// not say.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	SearchTopK int32 `json:"searchTopK,omitempty"`

	// searchMaxTopK is the most tools tool_search returns, whatever the
	// model asks.
	// +optional
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	SearchMaxTopK int32 `json:"searchMaxTopK,omitempty"`

	// descriptionLength is where tool_search cuts each description, in
	// characters.
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=40
	// +kubebuilder:validation:Maximum=4096
	DescriptionLength int32 `json:"descriptionLength,omitempty"`
}

// GatewaySpec configures the gateway's endpoint of the catalog.
type GatewaySpec struct {
	// allowAnonymous lets clients without a bearer token use the catalog,
	// as the principal system:anonymous in the group
	// system:unauthenticated: they see only the tools whose permissions
	// are absent or allow "*". A token that is given must still be valid.
	// +optional
	AllowAnonymous bool `json:"allowAnonymous,omitempty"`

	// allowedPrincipals lists who may open the catalog's endpoint at all:
	// users (alice), groups (group:G) and service accounts
	// (system:serviceaccount:NAMESPACE:NAME); "*" allows every
	// authenticated principal. When unset, only the service accounts of
	// the catalog's own namespace may (group:system:serviceaccounts:NS).
	// Everyone else is answered as if the catalog did not exist. Tool
	// permissions then filter what an allowed principal sees and calls.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	AllowedPrincipals []string `json:"allowedPrincipals,omitempty"`
}

// RedisMode is how the Redis deployment is addressed.
// +kubebuilder:validation:Enum=standalone;sentinel;cluster
type RedisMode string

const (
	// RedisModeStandalone is a single Redis server.
	RedisModeStandalone RedisMode = "standalone"
	// RedisModeSentinel is a primary found through Sentinel.
	RedisModeSentinel RedisMode = "sentinel"
	// RedisModeCluster is a Redis Cluster.
	RedisModeCluster RedisMode = "cluster"
)

// RedisSpec is the Redis target of a catalog.
// +kubebuilder:validation:XValidation:rule="(has(self.mode) && self.mode != 'standalone') || size(self.addresses) == 1",message="standalone mode takes exactly one address; use mode sentinel or cluster for several"
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || self.mode != 'sentinel' || (has(self.masterName) && size(self.masterName) > 0)",message="masterName is required when mode is sentinel"
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || self.mode != 'cluster' || !has(self.db) || self.db == 0",message="db must be 0 when mode is cluster"
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || self.mode != 'cluster' || !has(self.keyPrefix) || self.keyPrefix.matches('[{][^}]+[}]')",message="in cluster mode keyPrefix must contain a hash tag such as {team/catalog}, so a catalog's keys share one slot"
type RedisSpec struct {
	// addresses are host:port pairs: the server (standalone), the sentinels
	// (sentinel) or some cluster nodes (cluster).
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=261
	// +kubebuilder:validation:items:Pattern=`^\S+:[0-9]{1,5}$`
	Addresses []string `json:"addresses"`

	// mode is standalone, sentinel or cluster.
	// +optional
	// +kubebuilder:default=standalone
	Mode RedisMode `json:"mode,omitempty"`

	// masterName is the Sentinel master set name; required in sentinel mode.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	MasterName string `json:"masterName,omitempty"`

	// db is the logical database number (standalone and sentinel only).
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1023
	DB int32 `json:"db,omitempty"`

	// keyPrefix is the prefix of every key of this catalog. It defaults to
	// `toolcatalog:{<namespace>/<name>}`; the braces are a Redis Cluster
	// hash tag that keeps all keys of a catalog in one slot so they can be
	// written in one transaction. A custom prefix must hold the catalog's
	// own `{<namespace>/<name>}` as its first hash tag, so no two catalogs
	// share a key.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	KeyPrefix string `json:"keyPrefix,omitempty"`

	// username is the Redis ACL user name.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Username string `json:"username,omitempty"`

	// passwordSecretRef selects the Secret key holding the Redis password.
	// +optional
	PasswordSecretRef *SecretKeySelector `json:"passwordSecretRef,omitempty"`

	// tls configures TLS to Redis.
	// +optional
	TLS *RedisTLS `json:"tls,omitempty"`
}

// RedisTLS configures TLS to Redis.
type RedisTLS struct {
	// enabled turns TLS on.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// caSecretRef selects the Secret key holding the PEM CA bundle that
	// signs the server certificates; the system roots are used when absent.
	// +optional
	CASecretRef *SecretKeySelector `json:"caSecretRef,omitempty"`

	// insecureSkipVerify disables server certificate verification. Use it
	// for testing only.
	// +optional
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
}

// ProviderType names a provider implementation.
// +kubebuilder:validation:Enum=builtin;openai
type ProviderType string

const (
	// ProviderBuiltin runs in the operator with no network and no key.
	ProviderBuiltin ProviderType = "builtin"
	// ProviderOpenAI is any OpenAI-compatible HTTP API (OpenAI, Azure
	// OpenAI, OpenRouter, Ollama, vLLM, TEI, LiteLLM).
	ProviderOpenAI ProviderType = "openai"
)

// EmbeddingSpec configures the embedding provider.
// +kubebuilder:validation:XValidation:rule="!has(self.provider) || self.provider != 'openai' || (has(self.model) && size(self.model) > 0)",message="model is required when provider is openai"
type EmbeddingSpec struct {
	// provider is builtin (offline, the default) or openai (any
	// OpenAI-compatible /v1/embeddings endpoint).
	// +optional
	// +kubebuilder:default=builtin
	Provider ProviderType `json:"provider,omitempty"`

	// model is the embedding model id. Required for openai; for builtin,
	// empty selects the built-in model. Changing it makes every tool stale.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Model string `json:"model,omitempty"`

	// dimensions requests vectors of this length from models that support
	// it; the returned length is checked against it.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16384
	Dimensions int32 `json:"dimensions,omitempty"`

	// baseURL is the API base URL, for example https://api.openai.com/v1 or
	// http://ollama:11434/v1.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	BaseURL string `json:"baseURL,omitempty"`

	// apiKeySecretRef selects the Secret key holding the API key.
	// +optional
	APIKeySecretRef *SecretKeySelector `json:"apiKeySecretRef,omitempty"`

	// batchSize is the number of texts sent per embeddings request.
	// +optional
	// +kubebuilder:default=64
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2048
	BatchSize int32 `json:"batchSize,omitempty"`

	// timeout bounds each embeddings request, for example 30s.
	// +optional
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// QueryGenerationSpec configures the synthetic query generator.
// +kubebuilder:validation:XValidation:rule="!has(self.provider) || self.provider != 'openai' || (has(self.models) && size(self.models) > 0)",message="models needs at least one model when provider is openai"
type QueryGenerationSpec struct {
	// provider is builtin (offline templates, the default) or openai (any
	// OpenAI-compatible /v1/chat/completions endpoint).
	// +optional
	// +kubebuilder:default=builtin
	Provider ProviderType `json:"provider,omitempty"`

	// models is the ordered list of chat models to use; when one keeps
	// failing the next is tried.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	Models []string `json:"models,omitempty"`

	// baseURL is the API base URL.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	BaseURL string `json:"baseURL,omitempty"`

	// apiKeySecretRef selects the Secret key holding the API key.
	// +optional
	APIKeySecretRef *SecretKeySelector `json:"apiKeySecretRef,omitempty"`

	// fallback is a second endpoint tried when every model failed.
	// +optional
	Fallback *QueryGenerationFallback `json:"fallback,omitempty"`

	// queriesPerTool is the number of queries each tool should have,
	// curated exampleQueries included. A stored query set of another size is
	// invalid and regenerated.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=50
	QueriesPerTool int32 `json:"queriesPerTool,omitempty"`

	// concurrency is the maximum number of generation requests in flight.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=32
	Concurrency int32 `json:"concurrency,omitempty"`

	// maxRetries is the number of retries per model after a failed request.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	MaxRetries *int32 `json:"maxRetries,omitempty"`
}

// QueryGenerationFallback is an alternative chat endpoint.
type QueryGenerationFallback struct {
	// baseURL is the fallback API base URL.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	BaseURL string `json:"baseURL"`

	// model is the fallback chat model id.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Model string `json:"model"`

	// apiKeySecretRef selects the Secret key holding the fallback API key.
	// +optional
	APIKeySecretRef *SecretKeySelector `json:"apiKeySecretRef,omitempty"`
}

// SearchMethod is how consumers rank tools for a query.
// +kubebuilder:validation:Enum=semantic;bm25;hybrid;rrf
type SearchMethod string

const (
	// SearchSemantic ranks by cosine similarity of embeddings.
	SearchSemantic SearchMethod = "semantic"
	// SearchBM25 ranks by BM25 over tool names, descriptions and parameters.
	SearchBM25 SearchMethod = "bm25"
	// SearchHybrid blends the semantic and BM25 scores (see semanticWeight
	// and minLexicalEvidence).
	SearchHybrid SearchMethod = "hybrid"
	// SearchRRF fuses the semantic and BM25 rankings by reciprocal rank
	// fusion.
	SearchRRF SearchMethod = "rrf"
)

// SearchSpec holds search defaults published with the catalog.
type SearchSpec struct {
	// method is semantic, bm25, hybrid or rrf.
	// +optional
	// +kubebuilder:default=hybrid
	Method SearchMethod `json:"method,omitempty"`

	// semanticWeight is the hybrid method's share of the cosine similarity
	// in the blend of the two arms (0 to 1), each normalised per query; the
	// BM25 score has the rest. A query with lexical evidence above 2 gets a
	// proportionally smaller share. Unset, 0.6, chosen on public
	// tool-retrieval sets (docs/search.md).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1
	SemanticWeight *float64 `json:"semanticWeight,omitempty"`

	// minLexicalEvidence is the lexical evidence under which the hybrid
	// method ranks by the cosine alone: the query's best BM25 score over
	// the catalog's largest idf, about the number of distinctive tool words
	// the query holds. A request that shares no telling word with any tool
	// is then ranked by meaning only. Unset, 1.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	MinLexicalEvidence *float64 `json:"minLexicalEvidence,omitempty"`

	// topK is the number of tools a search returns, always-included tools
	// counted.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	TopK int32 `json:"topK,omitempty"`

	// similarityThreshold drops semantic matches whose cosine similarity is
	// below it (0 to 1).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1
	SimilarityThreshold *float64 `json:"similarityThreshold,omitempty"`

	// alwaysInclude lists tool names (spec.name) returned by every search,
	// in addition to tools marked alwaysInclude.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:Pattern=`^[a-zA-Z0-9_-]{1,64}$`
	AlwaysInclude []string `json:"alwaysInclude,omitempty"`

	// alwaysIncludeTopNUsed includes the n most used tools in every
	// search, after the always-included ones, and sends them directly
	// (not deferred) under progressive disclosure. Use is what consumers
	// and the gateway record for each call that succeeded, over the last
	// 28 days, each day counting half as much every 7 days; one principal
	// counts at most 20 calls of a tool a day. 0 turns it off.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=20
	AlwaysIncludeTopNUsed int32 `json:"alwaysIncludeTopNUsed,omitempty"`

	// intents is on to search each intent of a request that asks for
	// several things ("find flights to Paris, check the weather there and
	// convert 500 dollars") as well as the whole request, giving each
	// intent its share of the results; off searches every request whole.
	// A request for one thing is never split. Quote the value in YAML
	// ("off"): a bare off or on is read as a boolean.
	// +optional
	// +kubebuilder:default=on
	Intents SearchIntents `json:"intents,omitempty"`
}

// SearchIntents is whether consumers split a request into its intents.
// +kubebuilder:validation:Enum=on;off
type SearchIntents string

const (
	// IntentsOn searches each intent of a request and the whole.
	IntentsOn SearchIntents = "on"
	// IntentsOff searches every request whole.
	IntentsOff SearchIntents = "off"
)

// LearningSpec configures learning from recorded requests.
type LearningSpec struct {
	// enabled publishes learn_from_requests, which tells consumers to
	// record each tool call's request text, and folds recorded requests
	// into query sets. Turning it off deletes what was recorded and
	// rebuilds the affected tools' vectors without it.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// queriesPerTool is the most recorded requests folded into one tool's
	// query set, besides its synthetic and example queries.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=20
	QueriesPerTool int32 `json:"queriesPerTool,omitempty"`

	// minCount is how many times a request must have led to a tool before
	// it is folded in.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	MinCount int32 `json:"minCount,omitempty"`

	// minPrincipals is how many distinct authenticated principals must
	// have made a request, each with a call of the tool that succeeded,
	// before it is folded in: one client alone, however often it repeats
	// itself, cannot teach a catalog.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	MinPrincipals int32 `json:"minPrincipals,omitempty"`

	// maxRecorded caps the distinct (request, tool) pairs kept; the least
	// recorded go first.
	// +optional
	// +kubebuilder:default=10000
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	MaxRecorded int32 `json:"maxRecorded,omitempty"`

	// retention drops a recorded pair not seen again for this long.
	// +optional
	// +kubebuilder:default="720h"
	Retention *metav1.Duration `json:"retention,omitempty"`
}

// PublishSpec configures how versions are published.
type PublishSpec struct {
	// channel is the Redis pub/sub channel announcing new versions.
	// +optional
	// +kubebuilder:default="toolcatalog:updates"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Channel string `json:"channel,omitempty"`

	// retainVersions is the number of past catalog versions kept in Redis.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	RetainVersions int32 `json:"retainVersions,omitempty"`

	// resyncInterval is how often the catalog is checked against Redis even
	// without changes, so a flushed Redis is republished.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	ResyncInterval *metav1.Duration `json:"resyncInterval,omitempty"`

	// pinVersion holds the catalog at this version: consumers and the
	// gateway serve it, while the operator goes on publishing the newest
	// version, which is served as soon as the field is cleared. It must
	// be a version still retained (retainVersions) and embedded with the
	// catalog's current model; once pinned, it is kept however many
	// versions follow. status.pin and the Pinned condition say what is
	// served and how many tools changed since.
	// +optional
	// +kubebuilder:validation:Minimum=1
	PinVersion *int64 `json:"pinVersion,omitempty"`
}

// PinStatus is what a pinned catalog serves.
type PinStatus struct {
	// version is the version consumers and the gateway serve.
	Version int64 `json:"version"`

	// toolsChangedSince counts the tools the newest version added,
	// removed or changed since the pinned one.
	// +optional
	ToolsChangedSince int32 `json:"toolsChangedSince,omitempty"`

	// summary says it in words: "pinned to 3, 2 tools changed since".
	// +optional
	Summary string `json:"summary,omitempty"`
}

// ToolCatalogStatus is the observed state of a ToolCatalog.
type ToolCatalogStatus struct {
	// observedGeneration is the metadata.generation of the last successful
	// reconciliation.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// version is the current published catalog version (0: none yet).
	// +optional
	Version int64 `json:"version,omitempty"`

	// schemaHash is the hash of the published tools' schemas.
	// +optional
	SchemaHash string `json:"schemaHash,omitempty"`

	// publishedVersions are the last versions this catalog published,
	// with their schema hashes: a version rebuilt from the change records
	// in Redis (to pin it) must hash to what was published, or it is
	// refused. Only the operator writes it.
	// +optional
	// +listType=map
	// +listMapKey=version
	// +kubebuilder:validation:MaxItems=32
	PublishedVersions []PublishedVersion `json:"publishedVersions,omitempty"`

	// counts summarises the selected tools.
	// +optional
	Counts *ToolCounts `json:"counts,omitempty"`

	// failingTools lists tools that are rejected, conflicting or failed to
	// refresh, with the reason; bounded, see counts for totals.
	// +optional
	// +listType=map
	// +listMapKey=toolDefinition
	// +kubebuilder:validation:MaxItems=20
	FailingTools []ToolFailure `json:"failingTools,omitempty"`

	// lastPublishedTime is when the current version was published.
	// +optional
	LastPublishedTime *metav1.Time `json:"lastPublishedTime,omitempty"`

	// lastHandledRefreshAt is the last handled value of the
	// toolcatalog.dev/refresh-requested-at annotation.
	// +optional
	LastHandledRefreshAt string `json:"lastHandledRefreshAt,omitempty"`

	// lastRefresh says how the last handled refresh request went.
	// +optional
	LastRefresh *RefreshResult `json:"lastRefresh,omitempty"`

	// quality is the self-grading of the current version: how well the
	// catalog finds its own tools with their own queries.
	// +optional
	Quality *CatalogQuality `json:"quality,omitempty"`

	// pin is set while spec.publish.pinVersion holds the catalog at a
	// version: the version served, and how far the newest has moved.
	// +optional
	Pin *PinStatus `json:"pin,omitempty"`

	// conditions: Ready, Published and EmbeddingsSynced; Pinned while
	// spec.publish.pinVersion is set; Reconciling while a refresh is
	// published over several passes.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// CatalogQuality is how well a published version finds its own tools.
// After each publish, when no work remains, the operator searches each
// graded tool's queries (synthetic and example), one at a time left out of
// the tool's vector, against the whole catalog with the catalog's default
// method and settings.
type CatalogQuality struct {
	// version is the catalog version graded.
	// +optional
	Version int64 `json:"version,omitempty"`

	// selfRecallAt5 is the share of graded queries whose own tool ranked
	// in the top five, with three decimals ("0.942").
	// +optional
	SelfRecallAt5 string `json:"selfRecallAt5,omitempty"`

	// gradedTools and gradedQueries count what was graded: every tool with
	// at least two queries, or a sample of 200 tools (changed tools first)
	// in larger catalogs.
	// +optional
	GradedTools int32 `json:"gradedTools,omitempty"`
	// +optional
	GradedQueries int32 `json:"gradedQueries,omitempty"`

	// outranked lists the tools that some of their own queries did not find
	// in the top five, most missed first; at most ten (outrankedCount has
	// them all).
	// +optional
	// +listType=map
	// +listMapKey=tool
	// +kubebuilder:validation:MaxItems=10
	Outranked []OutrankedTool `json:"outranked,omitempty"`
	// +optional
	OutrankedCount int32 `json:"outrankedCount,omitempty"`

	// confusablePairs lists pairs of tools whose own queries retrieve each
	// other first, most similar first; at most ten.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	ConfusablePairs []ConfusablePair `json:"confusablePairs,omitempty"`
}

// OutrankedTool is a tool other tools rank above it for its own queries.
type OutrankedTool struct {
	// tool is the outranked tool's spec.name.
	// +required
	Tool string `json:"tool"`
	// missed of queries held-back queries did not find it in the top five.
	// +optional
	Missed int32 `json:"missed,omitempty"`
	// +optional
	Queries int32 `json:"queries,omitempty"`
	// by is the tool ranked first most often instead.
	// +optional
	By string `json:"by,omitempty"`
}

// ConfusablePair is two tools whose own queries retrieve each other.
type ConfusablePair struct {
	// tools are the two tools' spec.name, in name order.
	// +required
	// +kubebuilder:validation:MinItems=2
	// +kubebuilder:validation:MaxItems=2
	// +listType=atomic
	Tools []string `json:"tools"`
	// similarity is the cosine similarity of their vectors ("0.97").
	// +optional
	Similarity string `json:"similarity,omitempty"`
}

// RefreshResult is the outcome of a refresh request.
type RefreshResult struct {
	// requestedAt is the request's toolcatalog.dev/refresh-requested-at
	// value.
	// +required
	RequestedAt string `json:"requestedAt"`

	// result is Succeeded, PartiallyIgnored (some requested tools are not
	// in the catalog) or Failed (an unknown mode, or none of the requested
	// tools is in the catalog: the pass ran as a normal one).
	// +required
	// +kubebuilder:validation:Enum=Succeeded;PartiallyIgnored;Failed
	Result RefreshOutcome `json:"result"`

	// message says what the request did, or why it failed.
	// +optional
	Message string `json:"message,omitempty"`

	// unknownTools are requested tool names that no selected tool has
	// (at most 20 are listed).
	// +optional
	// +kubebuilder:validation:MaxItems=20
	UnknownTools []string `json:"unknownTools,omitempty"`
}

// RefreshOutcome is the result of a refresh request.
type RefreshOutcome string

// Refresh outcomes.
const (
	RefreshSucceeded        RefreshOutcome = "Succeeded"
	RefreshPartiallyIgnored RefreshOutcome = "PartiallyIgnored"
	RefreshFailed           RefreshOutcome = "Failed"
)

// ToolCounts counts a catalog's tools by state.
type ToolCounts struct {
	// tools is the number of selected, valid tools in the catalog.
	// +optional
	Tools int32 `json:"tools"`
	// embedded is the number of tools whose embedding is up to date.
	// +optional
	Embedded int32 `json:"embedded"`
	// stale is the number of tools whose embedding predates their spec or model.
	// +optional
	Stale int32 `json:"stale"`
	// invalid is the number of tools whose stored query set is missing or
	// of the wrong size.
	// +optional
	Invalid int32 `json:"invalid"`
	// rejected is the number of selected tools left out because their spec
	// is invalid or conflicts with another tool.
	// +optional
	Rejected int32 `json:"rejected"`
	// failed is the number of tools whose last refresh failed.
	// +optional
	Failed int32 `json:"failed"`
}

// ToolFailure explains why a tool is not (fully) in the catalog.
type ToolFailure struct {
	// toolDefinition is the metadata.name of the ToolDefinition.
	// +required
	ToolDefinition string `json:"toolDefinition"`
	// tool is the tool's spec.name.
	// +optional
	Tool string `json:"tool,omitempty"`
	// reason is a PascalCase cause.
	// +required
	Reason string `json:"reason"`
	// message says what went wrong and what to fix.
	// +optional
	Message string `json:"message,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tc,categories=toolcatalog
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Version",type=integer,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="Tools",type=integer,JSONPath=`.status.counts.tools`
// +kubebuilder:printcolumn:name="Pinned",type=string,JSONPath=`.status.pin.summary`
// +kubebuilder:printcolumn:name="Stale",type=integer,JSONPath=`.status.counts.stale`,priority=1
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.counts.failed`,priority=1
// +kubebuilder:printcolumn:name="Self-Recall@5",type=string,JSONPath=`.status.quality.selfRecallAt5`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ToolCatalog selects ToolDefinitions, keeps their embeddings current and
// publishes them to Redis as a versioned catalog that agent runtimes search.
type ToolCatalog struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec declares the catalog.
	// +required
	Spec ToolCatalogSpec `json:"spec"`

	// status is the observed state of the catalog.
	// +optional
	Status ToolCatalogStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ToolCatalogList is a list of ToolCatalogs.
type ToolCatalogList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ToolCatalog `json:"items"`
}

// GetConditions returns a pointer to the status conditions, for helpers that
// set conditions on either kind.
func (t *ToolCatalog) GetConditions() *[]metav1.Condition { return &t.Status.Conditions }

// PublishedVersion is a version a catalog published and its schema hash.
type PublishedVersion struct {
	// version is the version number.
	// +required
	Version int64 `json:"version"`
	// schemaHash is the version's schema hash as published.
	// +required
	// +kubebuilder:validation:MaxLength=128
	SchemaHash string `json:"schemaHash"`
}
