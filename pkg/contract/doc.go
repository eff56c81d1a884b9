// Package contract is the published Redis contract of tool catalogs: key
// names, the catalog document, per-tool metadata, the update notice and the
// vector encoding. The operator writes it and consumers read it; changes
// here are changes to public API.
//
// All keys of a catalog share the prefix P, by default
// "toolcatalog:{<namespace>/<name>}", whose braces are a Redis Cluster hash
// tag so a catalog can be written in one MULTI/EXEC. Contract 2:
//
//	P:version         string  current version number
//	P:head            string  current version's head (Head JSON)
//	P:tools           hash    tool name → Entry JSON
//	P:embeddings      hash    tool name → float32 little-endian vector
//	P:metadata        hash    tool name → Metadata JSON
//	P:changes:v<N>    string  what version N changed (Change JSON), the last few kept
//	P:catalog         string  a document contract-1 readers refuse
//	P:staged:*        hash    the operator's own, during a change of model
//	P:usage           zset    tool name → use count, written by consumers
//	P:requests        zset    [tool, request] → count, written by consumers of a learning catalog
//	P:requests:seen   zset    the same → when last recorded (Unix seconds)
//
// A version writes only what changed; Read assembles the Document. A
// Notice {catalog, catalog_uid, version, schema_hash} is published on the
// catalog's channel (default "toolcatalog:updates") after each new version.
package contract
