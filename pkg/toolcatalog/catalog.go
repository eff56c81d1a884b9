// Package toolcatalog is what an agent runtime imports to use published
// tool catalogs: load a catalog from Redis, follow its new versions, check
// permissions and search it (semantic, BM25 or hybrid) to send a model only
// the few relevant tools. It reads the Redis contract of pkg/contract and
// does not depend on Kubernetes libraries.
package toolcatalog

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/redis/go-redis/v9"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// ErrNotPublished means Redis holds no catalog under the keys.
var ErrNotPublished = errors.New("no catalog is published under these keys")

// Catalog is one loaded version of a catalog. It is immutable and safe for
// concurrent use.
type Catalog struct {
	// Document is the published catalog document.
	Document *contract.Document
	// Vectors are the tools' centroid vectors by tool name; a tool without
	// a usable vector is searched by BM25 only.
	Vectors map[string][]float32
	// Metadata is each tool's embedding metadata by tool name.
	Metadata map[string]*contract.Metadata

	tools  map[string]int // name → index in Document.Tools
	index  *bm25Index
	always []string
	// matrix holds the unit-length vectors of vecNames row by row, so a
	// semantic search is one pass of dot products over contiguous memory.
	matrix   []float32
	vecNames []string
	dims     int
}

// Keys returns the keys of the catalog namespace/name with the default
// prefix; use contract.Keys{Prefix: p} for a catalog with spec.redis.keyPrefix.
func Keys(namespace, name string) contract.Keys {
	return contract.Keys{Prefix: contract.DefaultPrefix(namespace, name)}
}

// Load reads a catalog's document, vectors and metadata from Redis in one
// round trip. c may be a standalone, Sentinel or Cluster client.
func Load(ctx context.Context, c redis.UniversalClient, keys contract.Keys) (*Catalog, error) {
	snap, err := contract.Read(ctx, c, keys)
	if err != nil {
		return nil, err
	}
	if snap.Document == nil {
		return nil, fmt.Errorf("%w (%s)", ErrNotPublished, keys.Catalog())
	}
	doc, err := contract.ParseDocument(snap.Document)
	if err != nil {
		return nil, err
	}
	return New(doc, snap.Vectors, snap.Metadata)
}

// LoadIfChanged is for a consumer told that its catalog is stale (it holds
// schemaHash): it reads the current document and, only when its schema
// hash differs, loads the whole catalog. It returns nil and false when the
// published catalog is the one held.
func LoadIfChanged(ctx context.Context, c redis.UniversalClient, keys contract.Keys, schemaHash string) (*Catalog, bool, error) {
	raw, err := c.Get(ctx, keys.Catalog()).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, false, fmt.Errorf("%w (%s)", ErrNotPublished, keys.Catalog())
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading %s: %w", keys.Catalog(), err)
	}
	doc, err := contract.ParseDocument(raw)
	if err != nil {
		return nil, false, err
	}
	if doc.SchemaHash == schemaHash {
		return nil, false, nil
	}
	cat, err := Load(ctx, c, keys)
	if err != nil {
		return nil, false, err
	}
	return cat, true, nil
}

// ErrVersionNotRetained means Redis no longer holds (or never held) that
// version's document.
var ErrVersionNotRetained = errors.New("catalog version is not retained")

// LoadVersion reads the document of a retained version (P:catalog:v<N>;
// spec.publish.retainVersions says how many are kept).
func LoadVersion(ctx context.Context, c redis.UniversalClient, keys contract.Keys, version int64) (*contract.Document, error) {
	raw, err := c.Get(ctx, keys.CatalogVersion(version)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("%w: %s", ErrVersionNotRetained, keys.CatalogVersion(version))
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", keys.CatalogVersion(version), err)
	}
	return contract.ParseDocument(raw)
}

// New builds a Catalog from its parts, as read from Redis: raw vectors are
// float32 little-endian, metadata is JSON. Vectors of the wrong length for
// the document's model are left out (such a tool is found by BM25 only).
func New(doc *contract.Document, rawVectors map[string][]byte, rawMetadata map[string]string) (*Catalog, error) {
	c := &Catalog{Document: doc, Vectors: map[string][]float32{}, Metadata: map[string]*contract.Metadata{}, tools: map[string]int{}}
	for i, t := range doc.Tools {
		c.tools[t.Name] = i
		if raw, ok := rawVectors[t.Name]; ok {
			v, err := contract.DecodeVector(raw)
			if err == nil && len(v) > 0 && (doc.Embedding.Dimensions == 0 || len(v) == doc.Embedding.Dimensions) {
				c.Vectors[t.Name] = v
			}
		}
		if raw, ok := rawMetadata[t.Name]; ok {
			if m, err := contract.ParseMetadata(raw); err == nil {
				c.Metadata[t.Name] = m
			}
		}
	}
	c.index = newBM25Index(doc.Tools)
	c.buildMatrix()
	seen := map[string]bool{}
	for _, t := range doc.Tools {
		if t.AlwaysInclude {
			seen[t.Name] = true
		}
	}
	for _, n := range doc.Search.AlwaysInclude {
		if _, ok := c.tools[n]; ok {
			seen[n] = true
		}
	}
	for _, t := range doc.Tools {
		if seen[t.Name] {
			c.always = append(c.always, t.Name)
		}
	}
	return c, nil
}

// Version is the catalog's version.
func (c *Catalog) Version() int64 { return c.Document.Version }

// SchemaHash identifies the catalog's content.
func (c *Catalog) SchemaHash() string { return c.Document.SchemaHash }

// Tool returns a tool by name.
func (c *Catalog) Tool(name string) (contract.Tool, bool) {
	i, ok := c.tools[name]
	if !ok {
		return contract.Tool{}, false
	}
	return c.Document.Tools[i], true
}

// Tools returns every tool, sorted by name.
func (c *Catalog) Tools() []contract.Tool { return c.Document.Tools }

// AlwaysIncluded lists the tools every search returns: those marked
// alwaysInclude and those the catalog's search defaults name.
func (c *Catalog) AlwaysIncluded() []string { return c.always }

// IsAllowed reports whether a principal may use a tool: true when the tool
// exists and its permissions are absent, list "*" or list the principal;
// an empty list allows nobody.
func (c *Catalog) IsAllowed(tool, principal string) bool {
	if _, ok := c.tools[tool]; !ok {
		return false
	}
	allowed, ok := c.Document.Permissions[tool]
	if !ok {
		return true
	}
	for _, p := range allowed {
		if p == "*" || p == principal {
			return true
		}
	}
	return false
}

// buildMatrix lays the vectors out for search, normalised, in tool order.
func (c *Catalog) buildMatrix() {
	for _, t := range c.Document.Tools {
		v, ok := c.Vectors[t.Name]
		if !ok || (c.dims != 0 && len(v) != c.dims) {
			continue
		}
		n := norm(v)
		if n == 0 {
			continue
		}
		c.dims = len(v)
		c.vecNames = append(c.vecNames, t.Name)
		for _, x := range v {
			c.matrix = append(c.matrix, float32(float64(x)/n))
		}
	}
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}
