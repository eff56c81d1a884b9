// Package contract is the published Redis contract of tool catalogs: key
// names, the catalog document, per-tool metadata, the update notice and the
// vector encoding, and how to read them. The operator writes it (with
// its own package, internal/published/versions) and consumers read it;
// changes here are changes to public API.
//
// All keys of a catalog share the prefix P, by default
// "toolcatalog:{<namespace>/<name>}", whose braces are a Redis Cluster hash
// tag so a catalog can be written in one MULTI/EXEC. Contract 2:
//
//	P:version                string  operator  current version number
//	P:head                   string  operator  current version's head (Head JSON)
//	P:tools                  hash    operator  tool name → Entry JSON
//	P:embeddings             hash    operator  tool name → float32 little-endian vector
//	P:metadata               hash    operator  tool name → Metadata JSON
//	P:changes:v<N>           string  operator  what version N changed (Change JSON), the last retainVersions kept
//	P:changes:v<N>:before    hash    operator  vectors and metadata the tools version N changed had before it
//	P:pinned:version         string  operator  while pinned: the version served
//	P:pinned:head            string  operator  while pinned: the head of the version served
//	P:pinned:tools           hash    operator  while pinned: its entries
//	P:pinned:embeddings      hash    operator  while pinned: its vectors
//	P:pinned:metadata        hash    operator  while pinned: its metadata
//	P:catalog                string  operator  a document contract-1 readers refuse
//	P:catalog:v<N>           string  operator  contract 1's retained documents, deleted by the first contract-2 version
//	P:staged:embeddings      hash    operator  the operator's own: vectors of a change of model under way
//	P:staged:metadata        hash    operator  the operator's own: metadata of a change of model under way
//	P:quality                zset    operator  self-gradings of the retained versions (Quality JSON) → version
//	P:usage                  zset    consumers no longer written: use counts before usage decayed
//	P:usage:d<day>           zset    consumers tool name → uses that day
//	P:usage:by:d<day>        hash    consumers principal hash and tool → that principal's uses that day
//	P:usage:users:d<day>     zset    consumers tool name → distinct principals that used it that day
//	P:requests               zset    consumers [tool, request] → count, while the catalog learns
//	P:requests:seen          zset    consumers the same → when last recorded (Unix seconds)
//	P:requests:by            hash    consumers the same → the distinct principals that made it
//	P:gateway:session:<id>   string  gateway   the gateway's own: an MCP session, expiring when idle
//	P:gateway:sessions:<hash> zset    gateway   the gateway's own: a principal's open sessions → expiry
//	P:gateway:search:<hash>  string  gateway   the gateway's own: a view's last tool_search, expiring
//	P:gateway:cancel         channel gateway   the gateway's own: cancellations between replicas
//
// A version writes only what changed; Read assembles the Document. A
// Notice {catalog, catalog_uid, version, schema_hash} is published on the
// catalog's channel (default "toolcatalog:updates") after each new version.
package contract
