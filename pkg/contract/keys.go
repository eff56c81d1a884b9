package contract

import (
	"encoding/binary"
	"fmt"
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

// Catalog is P:catalog.
func (k Keys) Catalog() string { return k.Prefix + ":catalog" }

// CatalogVersion is P:catalog:v<N>.
func (k Keys) CatalogVersion(n int64) string { return fmt.Sprintf("%s:catalog:v%d", k.Prefix, n) }

// Version is P:version.
func (k Keys) Version() string { return k.Prefix + ":version" }

// Embeddings is P:embeddings.
func (k Keys) Embeddings() string { return k.Prefix + ":embeddings" }

// Metadata is P:metadata.
func (k Keys) Metadata() string { return k.Prefix + ":metadata" }

// Usage is P:usage, a sorted set of tool name → use count that consumers
// maintain; the operator neither writes nor publishes it, and deletes it
// with the catalog.
func (k Keys) Usage() string { return k.Prefix + ":usage" }

// EncodeVector encodes a vector as float32 little-endian bytes.
func EncodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// DecodeVector decodes float32 little-endian bytes. A NaN or infinite
// value is refused: it would poison every similarity computed with it.
func DecodeVector(b []byte) ([]float32, error) {
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("vector of %d bytes is not a whole number of float32 values", len(b))
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		if f := float64(v[i]); math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("vector value %d is %v, not a finite number", i, v[i])
		}
	}
	return v, nil
}
