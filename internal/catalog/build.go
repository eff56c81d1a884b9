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
	Plans           []ToolPlan
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
	// Digests are the document's entry digests (contract.Document.SealFrom).
	Digests []string
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
	// by appending.
	entries := len(in.Rejected)
	for _, pl := range in.Plans {
		if _, embedded := in.Refreshed.Results[pl.Name]; embedded || !pl.Stale || in.Stored.Tools[pl.Name].HasVector {
			entries++
		}
	}
	if entries > 0 {
		doc.Tools = make([]contract.Tool, 0, entries)
	}
	inDoc := make(map[string]bool, entries)
	keepPrevious := func(name string) {
		entry, ok := prev.ToolByName(name)
		if !ok || inDoc[name] || !in.Stored.Tools[name].HasVector {
			return
		}
		doc.Tools = append(doc.Tools, entry)
		if perms, ok := prev.Permissions[name]; ok {
			doc.Permissions[name] = perms
		}
		inDoc[name] = true
	}
	selected := map[string]bool{}
	for _, pl := range in.Plans {
		name := pl.Name
		selected[name] = true
		if _, embedded := in.Refreshed.Results[name]; embedded || !pl.Stale {
			doc.Tools = append(doc.Tools, pl.Tool.Entry)
			if pl.Tool.Principals != nil {
				doc.Permissions[name] = pl.Tool.Principals
			}
			inDoc[name] = true
			continue
		}
		keepPrevious(name)
	}
	for _, f := range in.Rejected {
		if !selected[f.Tool] {
			keepPrevious(f.Tool)
		}
	}

	b := Build{Document: doc, Vectors: map[string][]byte{}, Metadata: map[string][]byte{}}
	// In name order, as sealing leaves them: plans come in name order, so
	// this is about one pass over them.
	slices.SortFunc(doc.Tools, func(a, b contract.Tool) int { return strings.Compare(a.Name, b.Name) })
	b.Blocked = mixedModels(in, doc)
	if in.Stored.DocErr != nil {
		// Publishing over it would drop every entry that cannot be
		// rebuilt from a ToolDefinition right now.
		b.Blocked = fmt.Sprintf("the catalog at %s is unreadable (%v); nothing is published over it: delete that key and the catalog is rebuilt from the ToolDefinitions and the stored embeddings",
			in.DocumentKey, in.Stored.DocErr)
	}
	// A tool's stored embedding goes only with the tool itself: one still
	// selected (or rejected) that is missing from the document, because its
	// refresh failed and there is no readable previous entry, keeps it.
	for _, f := range in.Rejected {
		selected[f.Tool] = true
	}
	for name := range in.Stored.Tools {
		if !inDoc[name] && !selected[name] {
			b.Removed = append(b.Removed, name)
		}
	}
	sort.Strings(b.Removed)
	var err error
	if b.Digests, err = doc.SealFrom(in.Stored.Doc, in.Stored.Digests); err != nil {
		return Build{}, fmt.Errorf("building catalog document: %w", err)
	}
	doc.GeneratedAt = in.Now.UTC()

	// Staged tools are published with the first version that may carry
	// them.
	for name, raw := range in.Stored.StagedMetadata {
		if inDoc[name] && b.Blocked == "" {
			b.Vectors[name], b.Metadata[name] = in.Stored.StagedVectors[name], raw
		}
	}
	for name, res := range in.Refreshed.Results {
		st := in.Stored.Tools[name]
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

// mixedModels explains why the document's tools, sorted by name, would
// carry vectors of another model or length than the configured one, or
// returns "". With no configured length, the document takes the length of
// the first tool in name order that has one.
func mixedModels(in BuildInput, doc *contract.Document) string {
	var others []string
	for i := range doc.Tools {
		name := doc.Tools[i].Name
		model, dims := vectorModel(in, name)
		if doc.Embedding.Dimensions == 0 {
			doc.Embedding.Dimensions = dims
		}
		if model != in.Model || (doc.Embedding.Dimensions != 0 && dims != doc.Embedding.Dimensions) {
			others = append(others, name)
		}
	}
	if len(others) == 0 {
		return ""
	}
	return fmt.Sprintf("%d tools (%s) still have vectors of another model or size than %s; the previous version stays published until they are re-embedded",
		len(others), strings.Join(others, ", "), in.Model)
}

// vectorModel returns the model and length of the vector a tool will have.
func vectorModel(in BuildInput, name string) (string, int) {
	if r, ok := in.Refreshed.Results[name]; ok {
		return r.Metadata.Model, r.Metadata.Dimensions
	}
	if m := in.Stored.Tools[name].Metadata; m != nil {
		return m.Model, m.Dimensions
	}
	return "", 0
}

// sameEmbedding reports whether stored metadata describes the same
// embedding as a new one, ignoring when it was computed.
func sameEmbedding(a, b *contract.Metadata) bool {
	return a != nil && b != nil && a.SpecHash == b.SpecHash && a.Model == b.Model && a.Dimensions == b.Dimensions &&
		a.Description == b.Description && slices.Equal(a.SyntheticQueries, b.SyntheticQueries)
}
