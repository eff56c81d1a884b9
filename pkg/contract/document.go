package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"time"
)

// Document is the catalog document published at P:catalog and P:catalog:v<N>.
// Its JSON shape is public API (DESIGN.md, Redis contract): a registry that
// reads tools, permissions, schema_hash and version can load it as is.
type Document struct {
	// Version increases by one with every published change.
	Version int64 `json:"version"`
	// SchemaHash identifies the content (everything but version, time and
	// itself); consumers holding another hash are stale.
	SchemaHash string `json:"schema_hash"`
	// GeneratedAt is when this version was built.
	GeneratedAt time.Time `json:"generated_at"`
	// Catalog is "<namespace>/<name>" of the ToolCatalog.
	Catalog string `json:"catalog"`
	// CatalogUID identifies the ToolCatalog object (its UID): a catalog
	// deleted and created again under the same name has another, so a
	// consumer never mistakes its version 1 for an old version.
	CatalogUID string `json:"catalog_uid,omitempty"`
	// Embedding says which model produced the vectors; consumers embed
	// queries with the same model or fall back to BM25.
	Embedding EmbeddingInfo `json:"embedding"`
	// Search holds the search defaults.
	Search SearchDefaults `json:"search"`
	// Tools are sorted by name.
	Tools []Tool `json:"tools"`
	// Permissions maps a tool name to its allowed principals; a tool absent
	// here is allowed to everyone, as is one listing "*"; an empty list
	// allows nobody.
	Permissions map[string][]string `json:"permissions"`
}

// EmbeddingInfo describes the vectors of a catalog.
type EmbeddingInfo struct {
	Provider   string `json:"provider"`
	Model      string `json:"model"`
	Dimensions int    `json:"dimensions"`
}

// SearchDefaults are the published search settings.
type SearchDefaults struct {
	Method              string   `json:"method"`
	TopK                int      `json:"top_k"`
	SimilarityThreshold *float64 `json:"similarity_threshold,omitempty"`
	AlwaysInclude       []string `json:"always_include"`
}

// Tool is one tool of the document.
type Tool struct {
	Name          string          `json:"name"`
	Description   string          `json:"description"`
	Parameters    json.RawMessage `json:"parameters"`
	Toolset       string          `json:"toolset,omitempty"`
	AlwaysInclude bool            `json:"always_include"`
	AllowRepeat   bool            `json:"allow_repeat"`
	NoBackground  bool            `json:"no_background"`
	SpecHash      string          `json:"spec_hash"`
}

// emptyParameters is published for a tool without parameters, so consumers
// always receive an object schema.
var emptyParameters = json.RawMessage(`{"properties":{},"type":"object"}`)

// NormalizeTool canonicalises a tool's parameters (empty becomes an empty
// object schema) so equal tools encode to equal bytes.
func NormalizeTool(t Tool) (Tool, error) {
	params, err := CanonicalJSON(t.Parameters)
	if err != nil {
		return t, fmt.Errorf("tool %s: parameters: %w", t.Name, err)
	}
	if len(params) == 0 {
		params = emptyParameters
	}
	t.Parameters = params
	return t, nil
}

// Seal sorts the tools and the always-include list, fills empty lists so
// they encode as [] and {}, and computes the schema hash. Version and
// GeneratedAt are left to the caller.
func (d *Document) Seal() error {
	sort.Slice(d.Tools, func(i, j int) bool { return d.Tools[i].Name < d.Tools[j].Name })
	if d.Tools == nil {
		d.Tools = []Tool{}
	}
	if d.Permissions == nil {
		d.Permissions = map[string][]string{}
	}
	for name, p := range d.Permissions {
		p = append([]string{}, p...) // an empty list (nobody) stays []
		sort.Strings(p)
		d.Permissions[name] = p
	}
	d.Search.AlwaysInclude = append([]string{}, d.Search.AlwaysInclude...)
	sort.Strings(d.Search.AlwaysInclude)
	h, err := d.contentHash()
	if err != nil {
		return err
	}
	d.SchemaHash = h
	return nil
}

// contentHash hashes the canonical JSON of the document without its
// version, time and hash.
func (d *Document) contentHash() (string, error) {
	c := *d
	c.Version, c.GeneratedAt, c.SchemaHash = 0, time.Time{}, ""
	raw, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	canon, err := CanonicalJSON(raw)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// Marshal encodes the document.
func (d *Document) Marshal() ([]byte, error) { return json.Marshal(d) }

// ParseDocument decodes a stored document.
func ParseDocument(data []byte) (*Document, error) {
	d := &Document{}
	if err := json.Unmarshal(data, d); err != nil {
		return nil, fmt.Errorf("parsing catalog document: %w", err)
	}
	return d, nil
}

// ToolByName returns the document's tool of that name.
func (d *Document) ToolByName(name string) (Tool, bool) {
	if d == nil {
		return Tool{}, false
	}
	for _, t := range d.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// Notice is the pub/sub message announcing a version.
type Notice struct {
	Catalog string `json:"catalog"`
	// CatalogUID is the document's CatalogUID.
	CatalogUID string `json:"catalog_uid,omitempty"`
	Version    int64  `json:"version"`
	SchemaHash string `json:"schema_hash"`
}

// NoticeOf is the notice announcing a document.
func NoticeOf(d *Document) Notice {
	return Notice{Catalog: d.Catalog, CatalogUID: d.CatalogUID, Version: d.Version, SchemaHash: d.SchemaHash}
}
