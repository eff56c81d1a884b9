package contract

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
)

// DefaultChannel is the pub/sub channel announcing new versions.
const DefaultChannel = "toolcatalog:updates"

// Keys names the keys of one catalog.
type Keys struct {
	// Prefix is P.
	Prefix string
}

// DefaultPrefix is the key prefix of a catalog without spec.redis.keyPrefix.
func DefaultPrefix(namespace, name string) string {
	return "toolcatalog:{" + namespace + "/" + name + "}"
}

// Head is P:head, the current version's head (JSON).
func (k Keys) Head() string { return k.Prefix + ":head" }

// Tools is P:tools, a hash of tool name → Entry JSON.
func (k Keys) Tools() string { return k.Prefix + ":tools" }

// Changes is P:changes:v<N>, the Change record of version N; the last
// publish.retainVersions are kept.
func (k Keys) Changes(n int64) string { return fmt.Sprintf("%s:changes:v%d", k.Prefix, n) }

// Catalog is P:catalog. Contract 1 kept the whole document there; contract
// 2 keeps a document that contract-1 readers refuse (its "tools" is a
// string saying where the tools went), so none of them reads an empty
// catalog.
func (k Keys) Catalog() string { return k.Prefix + ":catalog" }

// CatalogVersion is P:catalog:v<N>, contract 1's retained documents; the
// first contract-2 version deletes them.
func (k Keys) CatalogVersion(n int64) string { return fmt.Sprintf("%s:catalog:v%d", k.Prefix, n) }

// Version is P:version.
func (k Keys) Version() string { return k.Prefix + ":version" }

// Embeddings is P:embeddings.
func (k Keys) Embeddings() string { return k.Prefix + ":embeddings" }

// Metadata is P:metadata.
func (k Keys) Metadata() string { return k.Prefix + ":metadata" }

// StagedEmbeddings and StagedMetadata are P:staged:embeddings and
// P:staged:metadata: the operator's own, not for consumers. They keep the
// tools re-embedded while a change of model is under way (vectors of two
// models are never published together) until every tool is done and they
// are published at once.
func (k Keys) StagedEmbeddings() string { return k.Prefix + ":staged:embeddings" }

// StagedMetadata is P:staged:metadata; see StagedEmbeddings.
func (k Keys) StagedMetadata() string { return k.Prefix + ":staged:metadata" }

// Usage is P:usage, where catalogs published before usage decayed kept
// tool name → use count; nothing writes it now, and the operator deletes
// it with the catalog.
func (k Keys) Usage() string { return k.Prefix + ":usage" }

// UsageDay is P:usage:d<day>, a sorted set of tool name → the uses
// recorded on that day (days since the Unix epoch, UTC), which consumers
// write (RecordUse) and read (MostUsed); it expires when it leaves the
// usage window.
func (k Keys) UsageDay(day int64) string { return fmt.Sprintf("%s:usage:d%d", k.Prefix, day) }

// UsageBy is P:usage:by:d<day>, a hash of a principal's hash and a tool
// name → that principal's uses of the tool that day, which caps what one
// principal adds to UsageDay.
func (k Keys) UsageBy(day int64) string { return fmt.Sprintf("%s:usage:by:d%d", k.Prefix, day) }

// UsageUsers is P:usage:users:d<day>, a sorted set of tool name → how many
// distinct principals used it that day: a tool is among the most used only
// once MinUsePrincipals did on one day.
func (k Keys) UsageUsers(day int64) string { return fmt.Sprintf("%s:usage:users:d%d", k.Prefix, day) }

// Requests is P:requests, a sorted set of recorded requests (Recorded
// members: a request's text and the tool it led to) → count, which
// consumers write only while the catalog learns from requests (search
// defaults learn_from_requests). The operator reads it, trims it and
// deletes it when learning is turned off or the catalog is deleted.
func (k Keys) Requests() string { return k.Prefix + ":requests" }

// RequestsSeen is P:requests:seen, the same members → the Unix time each
// was last recorded, by which the operator drops old ones.
func (k Keys) RequestsSeen() string { return k.Prefix + ":requests:seen" }

// RequestsBy is P:requests:by, the same members → the distinct principals
// that made each request, as comma-separated hashes (at most
// MaxTeachers): learning counts people, not calls.
func (k Keys) RequestsBy() string { return k.Prefix + ":requests:by" }

// Quality is P:quality, a sorted set of the self-gradings of the retained
// versions (Quality JSON) → version, which the operator writes after it
// grades a version and consumers may read to chart a catalog's quality.
func (k Keys) Quality() string { return k.Prefix + ":quality" }

// GatewaySession is P:gateway:session:<id>: an MCP session the gateway
// opened for a client of protocol 2025-11-25 or older, as JSON (the
// catalog's UID, a hash of the principal and window that opened it, when),
// expiring when the session is idle. The gateway's own, so that every
// replica serves every session; consumers neither read nor write it.
func (k Keys) GatewaySession(id string) string { return k.Prefix + ":gateway:session:" + id }

// GatewaySessions is P:gateway:sessions:<principal hash>, the gateway's
// sorted set of one principal's open session IDs → when each expires
// (Unix milliseconds), which bounds a principal's sessions across
// replicas.
func (k Keys) GatewaySessions(principal string) string {
	return k.Prefix + ":gateway:sessions:" + principal
}

// LastSearch is P:gateway:search:<hash>, the gateway's record of the last
// tool_search of an MCP session, or of a principal's view for clients
// without sessions (JSON: the query and the tools found), kept while the
// catalog learns from requests so that a tool_call on any replica knows
// the request behind it.
func (k Keys) LastSearch(hash string) string { return k.Prefix + ":gateway:search:" + hash }

// GatewayCancel is the pub/sub channel P:gateway:cancel on which a gateway
// replica that receives a client's notifications/cancelled tells the
// replica running the request.
func (k Keys) GatewayCancel() string { return k.Prefix + ":gateway:cancel" }

// EncodeVector encodes a vector as float32 little-endian bytes.
func EncodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// VectorDigest identifies a raw vector within this process, so that a
// vector can be compared with one seen before without keeping its bytes.
// The hash is keyed by a seed random per process: stored vectors cannot be
// crafted to collide.
func VectorDigest(raw []byte) uint64 { return maphash.Bytes(vectorSeed, raw) }

// VectorDigestString is VectorDigest of a raw vector held as a string, as
// Redis replies give it: the same bytes have the same digest.
func VectorDigestString(raw string) uint64 { return maphash.String(vectorSeed, raw) }

// MetadataDigest is a P:metadata field's digest, as VectorDigestString
// is a vector's: what tells, in one process, that a field read again is
// the same without parsing it.
func MetadataDigest(raw string) uint64 { return maphash.String(vectorSeed, raw) }

var vectorSeed = maphash.MakeSeed()

// DecodeVector decodes float32 little-endian bytes. A NaN or infinite
// value is refused: it would poison every similarity computed with it.
func DecodeVector(b []byte) ([]float32, error) {
	return AppendVector(make([]float32, 0, len(b)/4), b)
}

// AppendVector decodes float32 little-endian bytes onto dst, as
// DecodeVector does; on error dst may hold part of the vector.
func AppendVector[B []byte | string](dst []float32, b B) ([]float32, error) {
	if len(b)%4 != 0 {
		return dst, fmt.Errorf("vector of %d bytes is not a whole number of float32 values", len(b))
	}
	for i := 0; i < len(b); i += 4 {
		x := math.Float32frombits(uint32(b[i]) | uint32(b[i+1])<<8 | uint32(b[i+2])<<16 | uint32(b[i+3])<<24)
		if f := float64(x); math.IsNaN(f) || math.IsInf(f, 0) {
			return dst, fmt.Errorf("vector value %d is %v, not a finite number", i/4, x)
		}
		dst = append(dst, x)
	}
	return dst, nil
}
