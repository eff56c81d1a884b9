// Package toolcatalog is what an agent runtime imports to use published
// tool catalogs: load a catalog from Redis, follow its new versions, check
// permissions and search it (semantic, BM25 or hybrid) to send a model only
// the few relevant tools. It reads the Redis contract of pkg/contract and
// does not depend on Kubernetes libraries.
//
// The index itself (a loaded version, its searches and disclosure) is
// implemented in an internal package and named here by alias; each name's
// full documentation is on the aliased declaration.
package toolcatalog

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/internal/index"
)

type (
	// Catalog is one loaded version of a catalog. It is immutable and
	// safe for concurrent use.
	Catalog = index.Catalog
	// Options configure a search.
	Options = index.Options
	// Method is a search method.
	Method = index.Method
	// Response is a search's results and how they were ranked.
	Response = index.Response
	// Result is one tool found, with why and how each arm ranked it.
	Result = index.Result
	// Arm is one ranking's view of a tool.
	Arm = index.Arm
	// Blend is how hybrid search ranked one text.
	Blend = index.Blend
	// Intent is one of the things a request asks for and the tools
	// searched for it.
	Intent = index.Intent
	// QueryEmbedder embeds search queries with the catalog's model.
	QueryEmbedder = index.QueryEmbedder
	// Disclosure is which tools to send to the model directly.
	Disclosure = index.Disclosure
	// DisclosureConfig configures Catalog.PlanDisclosure.
	DisclosureConfig = index.DisclosureConfig
	// DisclosureMode says when to defer tools.
	DisclosureMode = index.DisclosureMode
	// Bridge dispatches bridge tool calls (tool_search, tool_describe,
	// tool_call) against a catalog.
	Bridge = index.Bridge
	// BridgeError is an error to return to the model as the bridge tool's
	// result: it says what was wrong with the call.
	BridgeError = index.BridgeError
	// Call is a resolved tool_call for the caller to execute.
	Call = index.Call
	// SearchMemory keeps a session's last tool_search for a Bridge.
	SearchMemory = index.SearchMemory
	// Follower keeps the newest version of a catalog loaded, reloading
	// when a newer version is announced or found.
	Follower = index.Follower
	// FollowOptions configure Follow.
	FollowOptions = index.FollowOptions
	// Notices shares subscriptions among the followers of catalogs
	// published on one Redis (FollowOptions.Notices).
	Notices = index.Notices
)

// Search methods.
const (
	Semantic = index.Semantic
	BM25     = index.BM25
	// Hybrid blends the two arms' scores (see Options.SemanticWeight).
	Hybrid = index.Hybrid
	// RRF fuses the two arms' rankings by reciprocal rank fusion.
	RRF = index.RRF
)

// Methods lists the search methods.
var Methods = index.Methods

// Default BM25 and fusion parameters.
const (
	DefaultK1   = index.DefaultK1
	DefaultB    = index.DefaultB
	DefaultRRFK = index.DefaultRRFK
)

// Default hybrid blend, chosen on public tool-retrieval sets (see
// docs/search.md).
const (
	DefaultSemanticWeight     = index.DefaultSemanticWeight
	DefaultMinLexicalEvidence = index.DefaultMinLexicalEvidence
)

// DefaultMinIntentEvidence is Options.MinIntentEvidence's default.
const DefaultMinIntentEvidence = index.DefaultMinIntentEvidence

// Intents settings (Options.Intents).
const (
	IntentsOn  = index.IntentsOn
	IntentsOff = index.IntentsOff
)

// Why a tool is in the results (Result.Why).
const (
	WhyExactName     = index.WhyExactName
	WhyAlwaysInclude = index.WhyAlwaysInclude
	WhyPopular       = index.WhyPopular
	WhyIntent        = index.WhyIntent
	WhyRanked        = index.WhyRanked
)

// MaxQueryBytes bounds a query: Search reads no further.
const MaxQueryBytes = index.MaxQueryBytes

// GroupPrefix marks a group in a tool's permissions: "group:G" allows the
// members of G.
const GroupPrefix = index.GroupPrefix

// Disclosure modes.
const (
	DisclosureOff  = index.DisclosureOff
	DisclosureOn   = index.DisclosureOn
	DisclosureAuto = index.DisclosureAuto
)

// DefaultContextWindow is the context window auto disclosure assumes when
// the model's is unknown; DefaultDisclosureThreshold the share of it the
// deferrable tools' schemas may take before auto mode defers them.
const (
	DefaultContextWindow       = index.DefaultContextWindow
	DefaultDisclosureThreshold = index.DefaultDisclosureThreshold
)

// Bridge tool names.
const (
	ToolSearch   = index.ToolSearch
	ToolDescribe = index.ToolDescribe
	ToolCall     = index.ToolCall
)

// Bridge result limits: tool_search's default and largest top_k, and where
// it cuts a description, in characters.
const (
	DefaultBridgeTopK       = index.DefaultBridgeTopK
	MaxBridgeTopK           = index.MaxBridgeTopK
	BridgeDescriptionLength = index.BridgeDescriptionLength
)

// DefaultRecheckInterval is how often a Follower checks P:version even
// without notices; DefaultUsageInterval how often it reads the most used
// tools again.
const (
	DefaultRecheckInterval = index.DefaultRecheckInterval
	DefaultUsageInterval   = index.DefaultUsageInterval
)

// DefaultQueryCacheSize is how many query vectors CacheQueries keeps when
// not told.
const DefaultQueryCacheSize = index.DefaultQueryCacheSize

// ErrForeignCatalog means the keys hold a version of another catalog than
// the one a follower expects.
var ErrForeignCatalog = index.ErrForeignCatalog

// ErrNotPublished means Redis holds no catalog under the keys.
var ErrNotPublished = index.ErrNotPublished

// ErrVersionNotRetained means Redis no longer holds (or never held) what
// it takes to read that version.
var ErrVersionNotRetained = index.ErrVersionNotRetained

// Load reads the version of a catalog that is served (the pinned one while
// the catalog is pinned, else the current one): its document and vectors.
// c may be a standalone, Sentinel or Cluster client.
func Load(ctx context.Context, c redis.UniversalClient, keys contract.Keys) (*Catalog, error) {
	return index.Load(ctx, c, keys)
}

// LoadIfChanged is for a consumer told that its catalog is stale (it holds
// schemaHash): it loads the whole catalog only when the current head's
// schema hash differs, and returns nil and false when it does not.
func LoadIfChanged(ctx context.Context, c redis.UniversalClient, keys contract.Keys, schemaHash string) (*Catalog, bool, error) {
	return index.LoadIfChanged(ctx, c, keys, schemaHash)
}

// Update returns the served version of the catalog cur holds, reading from
// Redis only the tools changed since cur's version and sharing the rest
// with cur; it returns cur itself when it is the one served.
func Update(ctx context.Context, c redis.UniversalClient, keys contract.Keys, cur *Catalog) (*Catalog, error) {
	return index.Update(ctx, c, keys, cur)
}

// New builds a Catalog from its parts, as read from Redis: raw vectors are
// float32 little-endian.
func New(doc *contract.Document, rawVectors map[string][]byte) (*Catalog, error) {
	return index.New(doc, rawVectors)
}

// LoadVersion reads the document of a retained version: the current one
// and the last spec.publish.retainVersions before it.
func LoadVersion(ctx context.Context, c redis.UniversalClient, keys contract.Keys, version int64) (*contract.Document, error) {
	return index.LoadVersion(ctx, c, keys, version)
}

// ReadMetadata reads the embedding metadata of the named tools in the
// version served: the model and spec hash each was embedded with, and its
// synthetic and learned queries. A Catalog does not hold it.
func ReadMetadata(ctx context.Context, c redis.UniversalClient, keys contract.Keys, names ...string) (map[string]*contract.Metadata, error) {
	return index.ReadMetadata(ctx, c, keys, names...)
}

// Keys returns the keys of the catalog namespace/name with the default
// prefix; use contract.Keys{Prefix: p} for a catalog with
// spec.redis.keyPrefix.
func Keys(namespace, name string) contract.Keys { return index.Keys(namespace, name) }

// Allows reports whether a list of principals allows principal, a member
// of groups: it names the principal, "*", or "group:G" for one of its
// groups.
func Allows(list []string, principal string, groups ...string) bool {
	return index.Allows(list, principal, groups...)
}

// BridgeTools returns the schemas of tool_search, tool_describe and
// tool_call, with MCP annotations.
func BridgeTools() []contract.Tool { return index.BridgeTools() }

// IsBridgeTool reports whether a name is one of the bridge tools.
func IsBridgeTool(name string) bool { return index.IsBridgeTool(name) }

// EstimateTokens estimates what a tool's schema costs in a request: about
// one token per four bytes of its JSON function definition.
func EstimateTokens(t contract.Tool) int { return index.EstimateTokens(t) }

// Follow loads the catalog and keeps following it until ctx ends. The
// returned Follower serves the current version immediately.
func Follow(ctx context.Context, c redis.UniversalClient, keys contract.Keys, opts FollowOptions) (*Follower, error) {
	return index.Follow(ctx, c, keys, opts)
}

// NewNotices returns the shared subscriptions of the Redis c reaches;
// onError, when set, is told of the notices it cannot read and of the
// errors it recovers from.
func NewNotices(c redis.UniversalClient, onError func(error)) *Notices {
	return index.NewNotices(c, onError)
}

// CacheQueries returns emb remembering the vectors of the size queries it
// embedded last (DefaultQueryCacheSize when size ≤ 0). The vectors
// returned are shared: read them, never change them.
func CacheQueries(emb QueryEmbedder, size int) QueryEmbedder { return index.CacheQueries(emb, size) }

// MostUsed returns the most used tools of cat, most used first, as many as
// its search defaults ask for.
func MostUsed(ctx context.Context, c redis.UniversalClient, keys contract.Keys, cat *Catalog) ([]string, error) {
	return index.MostUsed(ctx, c, keys, cat)
}

// RecordUsage counts a call of a tool of cat by principal that succeeded,
// which MostUsed reads. Record only calls that succeeded.
func RecordUsage(ctx context.Context, c redis.UniversalClient, keys contract.Keys, cat *Catalog, principal, tool string) error {
	return index.RecordUsage(ctx, c, keys, cat, principal, tool)
}

// RecordRequest records that principal's request led to a call of a tool
// of cat that succeeded, when the catalog learns from requests. Record
// only calls whose arguments were valid and that succeeded, and only for
// authenticated principals.
func RecordRequest(ctx context.Context, c redis.UniversalClient, keys contract.Keys, cat *Catalog, principal, request, tool string) error {
	return index.RecordRequest(ctx, c, keys, cat, principal, request, tool)
}
