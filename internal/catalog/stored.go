package catalog

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// StoredTool is what Redis holds for a tool.
type StoredTool struct {
	// Metadata is the parsed entry; nil when absent or unreadable.
	Metadata *contract.Metadata
	// MetadataErr says why an existing entry could not be read.
	MetadataErr error
	// MetadataDigest is the entry's contract.MetadataDigest, 0 when not
	// known: a resync compares it with the field it reads again, rather
	// than parse 100,000 of them.
	MetadataDigest uint64
	// HasVector is true when P:embeddings has an entry; Vector is then
	// its contract.VectorDigest. The bytes themselves are not kept: a
	// 50,000-tool catalog's would be 51 MB held between passes.
	HasVector bool
	Vector    uint64
	// Staged says the entry is staged, not published (see
	// contract.Keys.StagedEmbeddings): a later version publishes it.
	// Published is then the published entry, if any.
	Staged    bool
	Published *contract.Metadata
}

// exists says Redis holds something for the tool: Stored.Tools has no
// entry without metadata (readable or not) or a vector.
func (st StoredTool) exists() bool {
	return st.Metadata != nil || st.MetadataErr != nil || st.HasVector
}

// Stored is a catalog's published state, parsed.
type Stored struct {
	// Version is P:version, 0 when absent.
	Version int64
	// Doc is the current document; nil when absent or unreadable.
	Doc *contract.Document
	// DocErr says why an existing document could not be read.
	DocErr error
	// Contract2 says Doc was read from P:head and P:tools; otherwise the
	// next version rewrites the tools whole.
	Contract2 bool
	// Tools has an entry for every tool with metadata or a vector.
	Tools StoredTools
	// StagedVectors and StagedMetadata hold the raw entries of the staged
	// tools, for the version that publishes them.
	StagedVectors  map[string][]byte
	StagedMetadata map[string][]byte
	// Digests are Doc's entry digests when this state was published by
	// this process (nil when read), so the next document hashes only the
	// entries that changed.
	Digests []string
	// from names the selected tool each of Doc's entries was copied
	// from, when this process published Doc (Build.from).
	from []*Tool
	// lineage says which state this is, and how it was derived from
	// another (Published), so a plan knows which tools' entries it must
	// look up again.
	lineage Lineage
}

// Lineage names a stored state: gen is its own, unique in the process
// (0 for a state made by hand, which no plan reuses); a state derived by
// Published from the state since differs from it in the entries of
// changed alone.
type Lineage struct {
	gen, since uint64
	changed    map[string]bool
}

// gens numbers the stored states of the process.
var gens atomic.Uint64

func newLineage() Lineage { return Lineage{gen: gens.Add(1)} }

// Lineage is the state's name and derivation, for PlanInput.
func (s Stored) Lineage() Lineage { return s.lineage }

// Gen names the state, unique in the process (never 0).
func (l Lineage) Gen() uint64 { return l.gen }

// ChangedSince says which tools' entries differ between the state l
// names and the state of generation gen: none when it is that state, and
// ok false when it is not known to derive from it. The tools named are
// those whose metadata, and so entry text and vector, changed or that
// went; the others' text and vectors are the same.
func (l Lineage) ChangedSince(gen uint64) (changed map[string]bool, ok bool) {
	switch {
	case gen == 0:
		return nil, false
	case l.gen == gen:
		return nil, true
	case l.since == gen:
		return l.changed, true
	}
	return nil, false
}

// ReadStored parses a snapshot, with its vectors or their digests.
// Unreadable metadata marks the tool (it counts as stale); an unreadable
// document is kept as DocErr. Staged entries are laid over the published
// ones (WithStaged).
func ReadStored(snap *contract.Snapshot) Stored {
	s := Stored{Version: snap.Version, lineage: newLineage()}
	s.Doc, s.DocErr = snap.Document()
	s.Contract2 = snap.Head != nil && s.DocErr == nil
	tools := make(map[string]StoredTool, len(snap.Metadata)+len(snap.ParsedMetadata))
	for name, raw := range snap.Metadata {
		m, err := contract.ParseMetadata(raw)
		tools[name] = StoredTool{Metadata: m, MetadataErr: err, MetadataDigest: contract.MetadataDigest(raw)}
	}
	for name, p := range snap.ParsedMetadata {
		tools[name] = StoredTool{Metadata: p.Metadata, MetadataErr: p.Err, MetadataDigest: p.Digest}
	}
	digests := snap.VectorDigests
	if digests == nil {
		digests = make(map[string]uint64, len(snap.Vectors))
		for name, vec := range snap.Vectors {
			digests[name] = contract.VectorDigest(vec)
		}
	}
	for name, d := range digests {
		st := tools[name]
		st.HasVector, st.Vector = true, d
		tools[name] = st
	}
	s.Tools = StoredToolsOf(tools)
	return s.WithStaged(snap.StagedMetadata, snap.StagedVectors)
}

// Share makes a state just read from Redis hold the selected tools'
// strings wherever its parsed copies equal them, and one copy of the
// model's name: read whole, it would otherwise keep a second copy of each
// description, schema and spec hash the selection (and the cache it was
// made from) already holds. Nothing may have seen s before.
func (s Stored) Share(tools []*Tool) {
	selected := make(map[string]*contract.Tool, len(tools))
	for _, t := range tools {
		selected[t.Entry.Name] = &t.Entry
	}
	if s.Doc != nil {
		for i := range s.Doc.Tools {
			if e := selected[s.Doc.Tools[i].Name]; e != nil {
				shareEntry(&s.Doc.Tools[i], e)
			}
		}
	}
	var model string
	for name, st := range s.Tools.All() {
		for _, m := range []*contract.Metadata{st.Metadata, st.Published} {
			if m == nil {
				continue
			}
			if model == "" {
				model = m.Model
			}
			shareMetadata(m, selected[name], model)
		}
	}
}

// shareEntry makes a parsed entry hold its selected tool's strings and
// schemas where they are equal.
func shareEntry(e, selected *contract.Tool) {
	share(&e.Name, selected.Name)
	share(&e.Description, selected.Description)
	share(&e.SpecHash, selected.SpecHash)
	share(&e.Toolset, selected.Toolset)
	if bytes.Equal(e.Parameters, selected.Parameters) {
		e.Parameters = selected.Parameters
	}
	if bytes.Equal(e.OutputSchema, selected.OutputSchema) {
		e.OutputSchema = selected.OutputSchema
	}
}

// shareMetadata makes parsed metadata hold its tool's spec hash and
// description (when e, the tool's entry, is not nil) and the model's name
// where they are equal.
func shareMetadata(m *contract.Metadata, e *contract.Tool, model string) {
	share(&m.Model, model)
	if e != nil {
		share(&m.SpecHash, e.SpecHash)
		share(&m.Description, e.Description)
	}
}

func byName(t contract.Tool, name string) int { return strings.Compare(t.Name, name) }

// share sets *s to to when they are equal, so one copy is held.
func share(s *string, to string) {
	if *s == to {
		*s = to
	}
}

// WithStaged lays staged entries over the published ones: a staged entry
// with its vector stands for the tool, since the pass that staged it did
// the work and the next publish carries it. s itself is not changed.
func (s Stored) WithStaged(metadata map[string]string, vectors map[string][]byte) Stored {
	if len(metadata) == 0 {
		return s
	}
	s.StagedVectors, s.StagedMetadata = map[string][]byte{}, map[string][]byte{}
	s.lineage = newLineage()
	staged := make(map[string]StoredTool, len(metadata))
	for name, raw := range metadata {
		m, err := contract.ParseMetadata(raw)
		vec, ok := vectors[name]
		if err != nil || !ok {
			continue
		}
		staged[name] = StoredTool{Metadata: m, HasVector: true, Vector: contract.VectorDigest(vec), Staged: true, Published: s.Tools.Get(name).Metadata}
		s.StagedVectors[name], s.StagedMetadata[name] = vec, []byte(raw)
	}
	s.Tools = s.Tools.with(staged, nil)
	return s
}

// Published is what Redis holds once build is written as version: the
// stored state the next pass reads, derived without reading it back. It
// fails when that cannot be known without reading (a staged tool that did
// not go out with the version).
func (s Stored) Published(b Build, version int64) (Stored, error) {
	for name := range s.StagedMetadata {
		if b.Metadata[name] == nil {
			return Stored{}, fmt.Errorf("staged tool %s was not published", name)
		}
	}
	doc := *b.Document
	doc.Version = version
	next := Stored{Version: version, Doc: &doc, Contract2: true, Digests: b.Digests, from: b.from}
	next.lineage = Lineage{gen: gens.Add(1), since: s.lineage.gen, changed: make(map[string]bool, len(b.Metadata)+len(b.Removed))}
	// Staged ones are replaced from b.
	set := make(map[string]StoredTool, len(b.Metadata))
	for name, raw := range b.Metadata {
		m, err := contract.ParseMetadata(string(raw))
		if err != nil {
			return Stored{}, fmt.Errorf("metadata of %s: %w", name, err)
		}
		// The document's entries, sorted by name, hold the selection's
		// strings.
		if i, ok := slices.BinarySearchFunc(doc.Tools, name, byName); ok {
			shareMetadata(m, &doc.Tools[i], doc.Embedding.Model)
		}
		set[name] = StoredTool{Metadata: m, MetadataDigest: contract.MetadataDigest(string(raw)), HasVector: true, Vector: contract.VectorDigest(b.Vectors[name])}
		next.lineage.changed[name] = true
	}
	for _, name := range b.Removed {
		next.lineage.changed[name] = true
	}
	next.Tools = s.Tools.with(set, b.Removed)
	return next, nil
}
