package contract

import (
	"fmt"
	"strings"
	"time"
)

// KeySpec is one key, or family of keys, of a catalog, as the key table
// (KeyTable) describes it.
type KeySpec struct {
	// Name is the key after the catalog's prefix P, with <N> for a
	// version, <day> for a day since the Unix epoch, <hash> for a hash of
	// a principal or view and <id> for a session's ID.
	Name string
	// Type is the Redis type.
	Type string
	// Writer is who writes it: "operator", "consumers" or "gateway".
	Writer string
	// Doc says what it holds.
	Doc string
	// Lifetime is how the key goes.
	Lifetime Lifetime
}

// Lifetime is how a catalog's key goes: with the catalog's deletion (by
// its name, or by one name per retained version or per day of the usage
// window), or by expiry.
type Lifetime struct {
	fixed      func(Keys) string
	perVersion func(Keys, int64) string
	perDay     func(Keys, int64) string
	expires    bool
}

// Deleted is a key the catalog's deletion deletes by its name.
func Deleted(key func(Keys) string) Lifetime { return Lifetime{fixed: key} }

// PerVersion is a key per version, the last MaxRetainVersions+1 of which
// the catalog's deletion deletes.
func PerVersion(key func(Keys, int64) string) Lifetime { return Lifetime{perVersion: key} }

// PerDay is a key per day, those of the usage window the catalog's
// deletion deletes (and which expire after it anyway).
func PerDay(key func(Keys, int64) string) Lifetime { return Lifetime{perDay: key} }

// Expires is a key that expires on its own: the catalog's deletion does
// not look for it.
var Expires = Lifetime{expires: true}

// KeyTable is every key of a catalog: the one list that names them, says
// who writes each and how it goes. A catalog's deletion deletes what it
// lists (DeletedKeys), and the table in this package's documentation is
// rendered from it (a test keeps them the same, and one more that every
// Keys method is listed).
var KeyTable = []KeySpec{
	{"version", "string", "operator", "current version number", Deleted(Keys.Version)},
	{"head", "string", "operator", "current version's head (Head JSON)", Deleted(Keys.Head)},
	{"tools", "hash", "operator", "tool name → Entry JSON", Deleted(Keys.Tools)},
	{"embeddings", "hash", "operator", "tool name → float32 little-endian vector", Deleted(Keys.Embeddings)},
	{"metadata", "hash", "operator", "tool name → Metadata JSON", Deleted(Keys.Metadata)},
	{"changes:v<N>", "string", "operator", "what version N changed (Change JSON), the last retainVersions kept", PerVersion(Keys.Changes)},
	{"changes:v<N>:before", "hash", "operator", "vectors and metadata the tools version N changed had before it", PerVersion(Keys.ChangesBefore)},
	{"pinned:version", "string", "operator", "while pinned: the version served", Deleted(func(k Keys) string { return k.Pinned().Version() })},
	{"pinned:head", "string", "operator", "while pinned: the head of the version served", Deleted(func(k Keys) string { return k.Pinned().Head() })},
	{"pinned:tools", "hash", "operator", "while pinned: its entries", Deleted(func(k Keys) string { return k.Pinned().Tools() })},
	{"pinned:embeddings", "hash", "operator", "while pinned: its vectors", Deleted(func(k Keys) string { return k.Pinned().Embeddings() })},
	{"pinned:metadata", "hash", "operator", "while pinned: its metadata", Deleted(func(k Keys) string { return k.Pinned().Metadata() })},
	{"catalog", "string", "operator", "a document contract-1 readers refuse", Deleted(Keys.Catalog)},
	{"catalog:v<N>", "string", "operator", "contract 1's retained documents, deleted by the first contract-2 version", PerVersion(Keys.CatalogVersion)},
	{"staged:embeddings", "hash", "operator", "the operator's own: vectors of a change of model under way", Deleted(Keys.StagedEmbeddings)},
	{"staged:metadata", "hash", "operator", "the operator's own: metadata of a change of model under way", Deleted(Keys.StagedMetadata)},
	{"quality", "zset", "operator", "self-gradings of the retained versions (Quality JSON) → version", Deleted(Keys.Quality)},
	{"usage", "zset", "consumers", "no longer written: use counts before usage decayed", Deleted(Keys.Usage)},
	{"usage:d<day>", "zset", "consumers", "tool name → uses that day", PerDay(Keys.UsageDay)},
	{"usage:by:d<day>", "hash", "consumers", "principal hash and tool → that principal's uses that day", PerDay(Keys.UsageBy)},
	{"usage:users:d<day>", "zset", "consumers", "tool name → distinct principals that used it that day", PerDay(Keys.UsageUsers)},
	{"requests", "zset", "consumers", "[tool, request] → count, while the catalog learns", Deleted(Keys.Requests)},
	{"requests:seen", "zset", "consumers", "the same → when last recorded (Unix seconds)", Deleted(Keys.RequestsSeen)},
	{"requests:by", "hash", "consumers", "the same → the distinct principals that made it", Deleted(Keys.RequestsBy)},
	{"gateway:session:<id>", "string", "gateway", "the gateway's own: an MCP session, expiring when idle", Expires},
	{"gateway:sessions:<hash>", "zset", "gateway", "the gateway's own: a principal's open sessions → expiry", Expires},
	{"gateway:search:<hash>", "string", "gateway", "the gateway's own: a view's last tool_search, expiring", Expires},
	{"gateway:cancel", "channel", "gateway", "the gateway's own: cancellations between replicas", Expires},
}

// DeletedKeys are the keys the deletion of a catalog at version deletes
// on day now: every key of the table but those that expire.
func DeletedKeys(k Keys, version int64, now time.Time) []string {
	var keys []string
	today := UsageDayOf(now)
	for _, s := range KeyTable {
		switch l := s.Lifetime; {
		case l.fixed != nil:
			keys = append(keys, l.fixed(k))
		case l.perVersion != nil:
			keys = append(keys, VersionKeys(func(n int64) string { return l.perVersion(k, n) }, version, MaxRetainVersions+1)...)
		case l.perDay != nil:
			for day := today - UsageWindow; day <= today+1; day++ {
				keys = append(keys, l.perDay(k, day))
			}
		}
	}
	return keys
}

// keyTableDoc is the key table as this package's documentation shows it.
func keyTableDoc() string {
	var b strings.Builder
	for _, s := range KeyTable {
		fmt.Fprintf(&b, "//\tP:%-22s %-7s %-9s %s\n", s.Name, s.Type, s.Writer, s.Doc)
	}
	return b.String()
}
