package catalog

import (
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// StoredTool is what Redis holds for a tool.
type StoredTool struct {
	// Metadata is the parsed entry; nil when absent or unreadable.
	Metadata *contract.Metadata
	// MetadataErr says why an existing entry could not be read.
	MetadataErr error
	// HasVector is true when P:embeddings has an entry.
	HasVector bool
}

// Stored is a catalog's published state, parsed.
type Stored struct {
	// Version is P:version, 0 when absent.
	Version int64
	// Doc is the current document; nil when absent or unreadable.
	Doc *contract.Document
	// DocErr says why an existing document could not be read.
	DocErr error
	// Tools has an entry for every tool with metadata or a vector.
	Tools map[string]StoredTool
	// Vectors are the raw stored vectors.
	Vectors map[string][]byte
}

// ReadStored parses a snapshot. Unreadable metadata marks the tool (it
// counts as stale); an unreadable document is kept as DocErr.
func ReadStored(snap *contract.Snapshot) Stored {
	s := Stored{Version: snap.Version, Tools: make(map[string]StoredTool, len(snap.Metadata)), Vectors: snap.Vectors}
	if snap.Document != nil {
		s.Doc, s.DocErr = contract.ParseDocument(snap.Document)
	}
	for name, raw := range snap.Metadata {
		m, err := contract.ParseMetadata(raw)
		_, hasVec := snap.Vectors[name]
		s.Tools[name] = StoredTool{Metadata: m, MetadataErr: err, HasVector: hasVec}
	}
	for name := range snap.Vectors {
		if _, ok := s.Tools[name]; !ok {
			s.Tools[name] = StoredTool{HasVector: true}
		}
	}
	return s
}
