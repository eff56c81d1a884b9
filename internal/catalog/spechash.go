package catalog

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// specHashDomain versions the encoding: a change of the encoding must change
// every hash, which makes every tool stale exactly once.
const specHashDomain = "toolcatalog.dev/spec-hash/v1"

// SpecHash returns the hex sha256 of the canonical encoding of what the model
// reads of a tool: its name, description and parameters schema. Each part is
// length-prefixed so no two different specs share an encoding, and the
// parameters are re-encoded canonically (sorted keys, no insignificant space)
// so key order in the source YAML or JSON does not change the hash. Empty or
// absent parameters hash alike.
func SpecHash(name, description string, parameters []byte) (string, error) {
	params, err := contract.CanonicalJSON(parameters)
	if err != nil {
		return "", fmt.Errorf("canonicalising parameters: %w", err)
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte(specHashDomain), []byte(name), []byte(description), params} {
		writeLengthPrefixed(h, part)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func writeLengthPrefixed(h hash.Hash, b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}
