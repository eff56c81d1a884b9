package catalog

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// BuildInput is everything a new catalog version is made of.
type BuildInput struct {
	// Catalog is namespace/name; CatalogUID the ToolCatalog's UID.
	Catalog, CatalogUID string
	// DocumentKey is where the head lives (P:head), for messages.
	DocumentKey string
	// Provider, Model and Dimensions describe the configured embedding;
	// Dimensions 0 accepts any length.
	Provider, Model string
	Dimensions      int
	Search          contract.SearchDefaults
	// Plans are Plan's, from Stored.Tools.
	Plans []ToolPlan
	// Rejected are the ToolDefinitions the selection left out.
	Rejected  []Failure
	Refreshed Refreshed
	Stored    Stored
	Now       time.Time
}

// Build is the catalog a pass would publish.
type Build struct {
	// Document is the new document, sealed, without a version yet.
	Document *contract.Document
	// Vectors and Metadata are the tools whose stored embedding changes
	// (staged ones included); Removed are the tools whose embedding goes.
	// When the build is blocked they are what to stage.
	Vectors, Metadata map[string][]byte
	Removed           []string
	// Blocked explains why nothing may be published.
	Blocked string
	// Changed says a new version is due.
	Changed bool
	// Digests are the document's entry digests (contract.Document.SealKept).
	Digests []string
	// Kept names, by the document's index, the previous document's entry
	// each is an unchanged copy of, or -1; nil when the previous document
	// was not built by this process (versions.Update.Kept).
	Kept []int32
	// from names, by the document's index, the selected tool each entry
	// was copied from, nil for an entry kept from the previous version:
	// the next build reads an unchanged tool's entry from this document,
	// in order, rather than from the tool (Stored.from).
	from []*Tool
}

// BuildDocument assembles the catalog document. A tool is published with
// its current spec when its embedding is current (or was made current in
// this pass). A tool that failed, is deferred, rejected or in conflict keeps
// the entry and vector it was last published with, if any: nothing already
// published is lost because of a bad edit or a provider outage. Vectors of
// two models are never published side by side.
func BuildDocument(in BuildInput) (Build, error) {
	doc := &contract.Document{
		Catalog:     in.Catalog,
		CatalogUID:  in.CatalogUID,
		Embedding:   contract.EmbeddingInfo{Provider: in.Provider, Model: in.Model, Dimensions: in.Dimensions},
		Search:      in.Search,
		Permissions: map[string][]string{},
	}
	prev := in.Stored.Doc
	// At most every plan and rejected ToolDefinition has an entry: sized
	// once, a 50,000-tool document is 8 MB instead of up to 10 MB grown
	// by appending. Each entry is kept with the model and length of the
	// vector it goes with, read from the plan: at 50,000 tools, each
	// look-up by name in the stored state costs a cache miss or two.
	entries := len(in.Rejected)
	refreshed := refreshedPlans(in.Plans, in.Refreshed.Results)
	for i := range in.Plans {
		if pl := &in.Plans[i]; refreshed[i] || !pl.Stale || pl.Stored.HasVector {
			entries++
		}
	}
	doc.Tools = make([]contract.Tool, 0, entries)
	// An entry the previous version copied from the same selected tool
	// is that tool's entry still (a generation's entry is never changed):
	// it is copied from the previous document, in runs, instead of from
	// the tool. At 100,000 tools, reading every tool's entry where the
	// selection holds it misses the CPU's caches for most of a build.
	same := sameEntries{doc: prev, from: in.Stored.from}
	metadata := make([]*contract.Metadata, 0, entries) // of doc.Tools' vectors
	from := make([]*Tool, 0, entries)
	// kept names, by index, the previous document's entry each one copies
	// unchanged (contract.Document.SealKept); -1 for the others.
	kept := make([]int32, 0, entries)
	keepPrevious := func(name string, stored StoredTool) bool {
		entry, ok := prev.ToolByName(name)
		if !ok || !stored.HasVector {
			return false
		}
		doc.Tools = same.flush(doc.Tools)
		doc.Tools, metadata, from, kept = append(doc.Tools, entry), append(metadata, stored.Metadata), append(from, nil), append(kept, -1)
		if perms, ok := prev.Permissions[name]; ok {
			doc.Permissions[name] = perms
		}
		return true
	}
	// The rejected tools' names, by how the plans met them: a name a
	// plan has is selected. No set of every name is made: at 50,000
	// tools, filling and reading one was a sixth of a build.
	var rejected map[string]seenAs
	if len(in.Rejected) > 0 {
		rejected = make(map[string]seenAs, len(in.Rejected))
		for _, f := range in.Rejected {
			rejected[f.Tool] = 0
		}
	}
	accounted := 0 // stored tools a plan or a rejection stands for
	for i := range in.Plans {
		pl := &in.Plans[i]
		name := pl.Name
		as := selectedTool
		if refreshed[i] || !pl.Stale {
			m := pl.Stored.Metadata
			if refreshed[i] {
				// Only a tool embedded has its metadata copied to the
				// heap: taking res's address would copy every plan's.
				fresh := in.Refreshed.Results[name].Metadata
				m = &fresh
			}
			var at int32
			doc.Tools, at = same.add(doc.Tools, pl.Tool)
			metadata, from, kept = append(metadata, m), append(from, pl.Tool), append(kept, at)
			// A tool whose entry the previous document holds had no
			// principals when that document has none.
			if (at < 0 || len(prev.Permissions) > 0) && pl.Tool.Principals != nil {
				doc.Permissions[name] = pl.Tool.Principals
			}
			as |= inDocument
		} else if keepPrevious(name, pl.Stored) {
			as |= inDocument
		}
		if pl.Stored.exists() {
			accounted++
		}
		if _, ok := rejected[name]; ok {
			rejected[name] = as
		}
	}
	doc.Tools = same.flush(doc.Tools)
	for _, f := range in.Rejected {
		as := rejected[f.Tool]
		if as&selectedTool != 0 {
			continue // a plan's, or met before
		}
		stored, ok := in.Stored.Tools.Lookup(f.Tool)
		if ok {
			accounted++
		}
		if keepPrevious(f.Tool, stored) {
			as |= inDocument
		}
		// A tool's stored embedding goes only with the tool itself: one
		// still rejected keeps it.
		rejected[f.Tool] = as | selectedTool
	}

	b := Build{Document: doc, Vectors: map[string][]byte{}, Metadata: map[string][]byte{}}
	// In name order, as sealing leaves them: plans come in name order, so
	// they are sorted again only when a rejected tool's entry was kept.
	if !contract.SortedKept(doc.Tools, kept) {
		built := make([]builtEntry, len(doc.Tools))
		for i := range doc.Tools {
			built[i] = builtEntry{doc.Tools[i], metadata[i], from[i], kept[i]}
		}
		slices.SortFunc(built, func(a, b builtEntry) int { return contract.ByName(a.tool, b.tool) })
		for i := range built {
			doc.Tools[i], metadata[i], from[i], kept[i] = built[i].tool, built[i].metadata, built[i].from, built[i].kept
		}
	}
	b.from = from
	if same.from != nil {
		b.Kept = kept
	}
	if len(doc.Tools) == 0 {
		doc.Tools = nil
	}
	b.Blocked = mixedModels(in, doc, metadata)
	if in.Stored.DocErr != nil {
		// Publishing over it would drop every entry that cannot be
		// rebuilt from a ToolDefinition right now.
		b.Blocked = fmt.Sprintf("the catalog at %s is unreadable (%v); nothing is published over it: delete that key and the catalog is rebuilt from the ToolDefinitions and the stored embeddings",
			in.DocumentKey, in.Stored.DocErr)
	}
	// A tool's stored embedding goes only with the tool itself: one still
	// selected (or rejected) that is missing from the document, because its
	// refresh failed and there is no readable previous entry, keeps it.
	if accounted < in.Stored.Tools.Len() {
		selected := make(map[string]bool, len(in.Plans))
		for _, pl := range in.Plans {
			selected[pl.Name] = true
		}
		for name := range in.Stored.Tools.All() {
			if _, ok := rejected[name]; !ok && !selected[name] {
				b.Removed = append(b.Removed, name)
			}
		}
	}
	sort.Strings(b.Removed)
	var err error
	if b.Digests, err = doc.SealKept(in.Stored.Doc, in.Stored.Digests, kept); err != nil {
		return Build{}, fmt.Errorf("building catalog document: %w", err)
	}
	doc.GeneratedAt = in.Now.UTC()

	// Staged tools are published with the first version that may carry
	// them.
	for name, raw := range in.Stored.StagedMetadata {
		if _, ok := doc.ToolByName(name); ok && b.Blocked == "" {
			b.Vectors[name], b.Metadata[name] = in.Stored.StagedVectors[name], raw
		}
	}
	for name, res := range in.Refreshed.Results {
		st := in.Stored.Tools.Get(name)
		if st.HasVector && (!st.Staged || b.Blocked != "") && st.Vector == contract.VectorDigest(res.Vector) && sameEmbedding(st.Metadata, &res.Metadata) {
			continue
		}
		raw, err := res.Metadata.Marshal()
		if err != nil {
			return Build{}, fmt.Errorf("encoding metadata of %s: %w", name, err)
		}
		b.Vectors[name], b.Metadata[name] = res.Vector, raw
	}
	// A catalog still stored under contract 1 is republished under
	// contract 2 at once.
	b.Changed = b.Blocked == "" && (prev == nil || prev.SchemaHash != doc.SchemaHash || prev.Version != in.Stored.Version ||
		len(b.Removed) > 0 || len(b.Vectors) > 0 || !in.Stored.Contract2)
	return b, nil
}

// builtEntry is a document entry with the metadata of the vector it goes
// with (nil when there is none).
type builtEntry struct {
	tool     contract.Tool
	metadata *contract.Metadata
	from     *Tool
	kept     int32
}

// sameEntries finds, in a previous document whose entries were copied
// from the selected tools from (by index, Build.from), the entry of a tool
// the next document takes in the same order, and copies those entries a
// run at a time: at 100,000 tools, copying the 16 MB of entries one at a
// time was most of a build.
type sameEntries struct {
	doc  *contract.Document
	from []*Tool
	// next is where the previous document is read from.
	next int
	// runFrom and runTo are the run of the previous document's entries
	// not yet copied.
	runFrom, runTo int
}

// add appends t's entry to tools: the previous document's copy when that
// was made from t, with its index there, else t's own and -1. A copy is
// appended with the run it ends, by add or flush.
func (s *sameEntries) add(tools []contract.Tool, t *Tool) ([]contract.Tool, int32) {
	at := s.index(t)
	if at < 0 {
		return append(s.flush(tools), t.Entry), -1
	}
	if at != s.runTo {
		tools = s.flush(tools)
		s.runFrom = at
	}
	s.runTo = at + 1
	return tools, int32(at)
}

// flush appends the run of copies add left.
func (s *sameEntries) flush(tools []contract.Tool) []contract.Tool {
	if s.runTo > s.runFrom {
		tools = append(tools, s.doc.Tools[s.runFrom:s.runTo]...)
	}
	s.runFrom = s.runTo
	return tools
}

// index is the index of t's entry in the previous document when that was
// copied from t, else -1.
func (s *sameEntries) index(t *Tool) int {
	// Another tool in the way (one that went, or changed): the previous
	// document is read on from the first entry of a tool named after it.
	// The names are compared only then, as reading them misses the caches.
	if s.next < len(s.from) && s.from[s.next] != t {
		for s.next < len(s.from) && s.doc.Tools[s.next].Name < t.Entry.Name {
			s.next++
		}
	}
	if s.next < len(s.from) && s.from[s.next] == t {
		s.next++
		return s.next - 1
	}
	return -1
}

// refreshedPlans marks, by index, the plans a result of this pass is for.
// Plans come in name order, so each result's plan is found by bisection:
// at 100,000 tools, looking every plan's name up among the results reads
// every name's bytes, most of them missing the CPU's caches.
func refreshedPlans(plans []ToolPlan, results map[string]Result) []bool {
	marked := make([]bool, len(plans))
	for name := range results {
		i, ok := slices.BinarySearchFunc(plans, name, func(pl ToolPlan, name string) int { return strings.Compare(pl.Name, name) })
		if !ok {
			// Plans out of order, as a hand-made input may be.
			i = slices.IndexFunc(plans, func(pl ToolPlan) bool { return pl.Name == name })
		}
		if i >= 0 && i < len(plans) && plans[i].Name == name {
			marked[i] = true
		}
	}
	return marked
}

// seenAs is how BuildDocument met a tool, a set of these flags.
type seenAs uint8

const (
	selectedTool seenAs = 1 << iota // selected or rejected
	inDocument
)

// mixedModels explains why the document's tools, sorted by name, would
// carry vectors of another model or length than the configured one, or
// returns "". metadata describes each tool's vector, in the document's
// order (nil when there is none). With no configured length, the
// document takes the length of the first tool in name order that has one.
func mixedModels(in BuildInput, doc *contract.Document, metadata []*contract.Metadata) string {
	var others []string
	for i, m := range metadata {
		var model string
		var dims int
		if m != nil {
			model, dims = m.Model, m.Dimensions
		}
		if doc.Embedding.Dimensions == 0 {
			doc.Embedding.Dimensions = dims
		}
		if model != in.Model || (doc.Embedding.Dimensions != 0 && dims != doc.Embedding.Dimensions) {
			others = append(others, doc.Tools[i].Name)
		}
	}
	if len(others) == 0 {
		return ""
	}
	return fmt.Sprintf("%d tools (%s) still have vectors of another model or size than %s; the previous version stays published until they are re-embedded",
		len(others), strings.Join(others, ", "), in.Model)
}

// sameEmbedding reports whether stored metadata describes the same
// embedding as a new one, ignoring when it was computed.
func sameEmbedding(a, b *contract.Metadata) bool {
	return a != nil && b != nil && a.SpecHash == b.SpecHash && a.Model == b.Model && a.Dimensions == b.Dimensions &&
		a.Description == b.Description && slices.Equal(a.SyntheticQueries, b.SyntheticQueries)
}
