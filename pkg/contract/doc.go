// Package contract is the published Redis contract of tool catalogs: key
// names, the catalog document, per-tool metadata, the update notice and the
// vector encoding. The operator writes it and consumers read it; changes
// here are changes to public API.
//
// All keys of a catalog share the prefix P, by default
// "toolcatalog:{<namespace>/<name>}", whose braces are a Redis Cluster hash
// tag so a catalog can be written in one MULTI/EXEC:
//
//	P:catalog       string  current catalog document (JSON)
//	P:catalog:v<N>  string  immutable versions, the last few kept
//	P:version       string  current version number
//	P:embeddings    hash    tool name → float32 little-endian vector
//	P:metadata      hash    tool name → Metadata JSON
//	P:usage         zset    tool name → use count, written by consumers
//
// A Notice {catalog, version, schema_hash} is published on the catalog's
// channel (default "toolcatalog:updates") after each new version.
package contract
