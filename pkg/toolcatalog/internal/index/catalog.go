// Package index is a loaded catalog version and everything that reads it:
// its rows of unit vectors, its BM25 index, the semantic, lexical and
// hybrid searches and their blend, disclosure and the bridge tools, and
// the self-grading that searches a catalog with its own tools' queries.
//
// Package toolcatalog is its public face: it names, by alias, what an agent
// runtime uses. The grading's internals reach into the index (its rows,
// kept rankings and the arms of a search) and so live here too, but only
// package selfgrade refers to them (NewGrader): a program that does not
// grade does not link them.
package index

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/internal/linalg"
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
	// Pinned says the catalog is pinned at this version
	// (spec.publish.pinVersion): newer versions may be published, and are
	// served once the pin is cleared.
	Pinned bool

	tools map[string]int // name → index in Document.Tools
	// nameKeys says the tools are in name order, as Document.Seal leaves
	// them, and so their rows: a row or tool index orders as its name.
	nameKeys bool
	// byRunes lists the indexes of the tools by the length of their names
	// in runes, the only names a query can equal under case folding.
	byRunes map[int][]int
	index   *bm25Index
	always  []string
	// matrix holds the unit-length vectors of vecNames row by row, so a
	// semantic search is one pass of dot products over contiguous memory.
	matrix   []float32
	vecNames []string
	// rowOf is each tool's row in matrix by its index in Document.Tools,
	// -1 for a tool without a vector.
	rowOf []int
	dims  int
	// quant holds matrix as int8 for the first pass of a semantic search
	// (see rescore), when the matrix is large enough for the pass to be
	// bound by memory; nil otherwise.
	quant *linalg.Quantized
	// int8Only says the rows are held only as int8, in quant (matrix is
	// nil and Vectors empty), in this catalog and the next versions built
	// from it (see newReading): its searches score every row from the
	// int8 values, never exactly.
	int8Only bool
	// rawHash holds, by row, the contract.VectorDigest of the raw vector
	// the row was decoded from (0 when unknown), so a later version whose
	// raw vector is the same takes the row instead of decoding it again.
	rawHash []uint64
}

// Keys returns the keys of the catalog namespace/name with the default
// prefix; use contract.Keys{Prefix: p} for a catalog with spec.redis.keyPrefix.
func Keys(namespace, name string) contract.Keys {
	return contract.Keys{Prefix: contract.DefaultPrefix(namespace, name)}
}

// Load reads the version of a catalog that is served — the pinned one
// while the catalog is pinned, else the current one — its document and
// vectors. c may be a standalone, Sentinel or Cluster client. The tools'
// embedding metadata, which a search never reads, is not loaded (see
// ReadMetadata).
//
// The document is read in one round trip after the one that finds which
// version is served (contract.ReadServedDocument), and the vectors, most
// of a large catalog's bytes, loadChunk tools at a time, each part
// decoded as the next is read; the version is then checked to be the one
// read, or the catalog is read again.
func Load(ctx context.Context, c redis.UniversalClient, keys contract.Keys) (*Catalog, error) {
	for range loadAttempts {
		cat, current, err := load(ctx, c, keys)
		if err != nil || current {
			return cat, err
		}
	}
	return nil, fmt.Errorf("loading catalog %s: a new version was published during each of %d reads", keys.Prefix, loadAttempts)
}

// loadAttempts bounds Load's reads of a catalog published to meanwhile.
const loadAttempts = 3

// loadChunk is how many vectors Load asks for in one round trip: about a
// megabyte at 256 dimensions.
const loadChunk = 1000

// load is one attempt of Load; current is false when the version served
// changed while it was read.
func load(ctx context.Context, c redis.UniversalClient, keys contract.Keys) (cat *Catalog, current bool, err error) {
	snap, served, err := contract.ReadServedDocument(ctx, c, keys)
	if err != nil {
		return nil, false, err
	}
	doc, err := snap.Document()
	if err != nil {
		return nil, false, err
	}
	if doc == nil {
		return nil, false, fmt.Errorf("%w (%s)", ErrNotPublished, keys.Head())
	}
	cat, err = newReading(doc, loadChunk, false, func(names []string) (map[string]string, error) {
		return contract.ReadVectors(ctx, c, served, names)
	})
	if err != nil {
		return nil, false, err
	}
	if current, err = snap.Current(ctx, c, served); err != nil || !current {
		return nil, false, err
	}
	cat.Pinned = served != keys
	return cat, true, nil
}

// ReadMetadata reads the embedding metadata of the named tools in the
// version served (the pinned one while the catalog is pinned): the model
// and spec hash each was embedded with, and its synthetic and learned
// queries. A Catalog does not hold it, as no search reads it. A tool
// without metadata, or whose metadata does not parse, is left out; so is
// every tool when a pin is set or cleared between finding the version
// served and reading it.
func ReadMetadata(ctx context.Context, c redis.UniversalClient, keys contract.Keys, names ...string) (map[string]*contract.Metadata, error) {
	served, _, err := contract.Served(ctx, c, keys)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*contract.Metadata, len(names))
	err = contract.ReadFields(ctx, c, served.Metadata(), names, func(name, raw string) {
		if m, parseErr := contract.ParseMetadata(raw); parseErr == nil {
			out[name] = m
		}
	})
	return out, err
}

// LoadIfChanged is for a consumer told that its catalog is stale (it holds
// schemaHash): it reads the current head and, only when its schema hash
// differs, loads the whole catalog. It returns nil and false when the
// published catalog is the one held.
func LoadIfChanged(ctx context.Context, c redis.UniversalClient, keys contract.Keys, schemaHash string) (*Catalog, bool, error) {
	raw, err := c.Get(ctx, keys.Head()).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		// Not published, or published under contract 1: a full load
		// tells which.
	case err != nil:
		return nil, false, fmt.Errorf("reading %s: %w", keys.Head(), err)
	default:
		h, parseHeadErr := contract.ParseHead(raw)
		if parseHeadErr != nil {
			return nil, false, parseHeadErr
		}
		if h.SchemaHash == schemaHash {
			return nil, false, nil
		}
	}
	cat, err := Load(ctx, c, keys)
	if err != nil {
		return nil, false, err
	}
	if cat.SchemaHash() == schemaHash {
		return nil, false, nil
	}
	return cat, true, nil
}

// ErrVersionNotRetained means Redis no longer holds (or never held) what
// it takes to read that version.
var ErrVersionNotRetained = contract.ErrNotRetained

// LoadVersion reads the document of a retained version: the current one
// and the last spec.publish.retainVersions before it (rebuilt from the
// current document and the change records since).
func LoadVersion(ctx context.Context, c redis.UniversalClient, keys contract.Keys, version int64) (*contract.Document, error) {
	return contract.ReadVersion(ctx, c, keys, version)
}

// New builds a Catalog from its parts, as read from Redis: raw vectors are
// float32 little-endian. Vectors of the wrong length for the document's
// model are left out (such a tool is found by BM25 only). Vectors are
// kept unit-length, in one block, in tool order.
func New(doc *contract.Document, rawVectors map[string][]byte) (*Catalog, error) {
	return build(doc, rawVectors, nil, nil), nil
}

// Next builds the Catalog of a later version from the vectors that
// changed since c: a tool of doc absent from rawVectors keeps its vector
// in c, if any. It reuses what c computed for the tools whose text is
// unchanged, so a version that changed a few tools of many costs little
// to index.
func (c *Catalog) Next(doc *contract.Document, rawVectors map[string][]byte) *Catalog {
	return build(doc, rawVectors, c, func(string) bool { return true })
}

// staleVectors names the tools of doc whose vector c does not hold as
// digest says it now is (contract.VectorDigest of the raw vector; 0 for a
// tool without one): the raw vectors Next needs to index doc.
func (c *Catalog) staleVectors(doc *contract.Document, digest func(name string) uint64) []string {
	var stale []string
	for _, t := range doc.Tools {
		d := digest(t.Name)
		if d == 0 {
			continue
		}
		if _, h := c.rowHash(t.Name); h != d {
			stale = append(stale, t.Name)
		}
	}
	return stale
}

// build indexes a document: each tool's vector is decoded from raw, or
// else, when keep allows, its row in prev is taken as it is, and laid out,
// unit-length, in one block in tool order for search. prev, an earlier
// version's Catalog, also lends the rows of raw vectors it decoded before
// and the index terms of unchanged tools.
func build(doc *contract.Document, raw map[string][]byte, prev *Catalog, keep func(name string) bool) *Catalog {
	int8Only := prev != nil && prev.int8Only
	c := &Catalog{Document: doc, Vectors: make(map[string][]float32, vectorsRoom(len(doc.Tools), int8Only)), tools: make(map[string]int, len(doc.Tools)), int8Only: int8Only}
	c.dims = doc.Embedding.Dimensions
	kept := func(name string) (int, uint64) {
		if keep == nil || !keep(name) {
			return -1, 0
		}
		return prev.rowHash(name)
	}
	rows := 0
	for i, t := range doc.Tools {
		c.tools[t.Name] = i
		if _, ok := raw[t.Name]; ok {
			rows++
		} else if r, _ := kept(t.Name); r >= 0 {
			rows++
		}
	}
	c.rowOf = make([]int, len(doc.Tools))
	for i, t := range doc.Tools {
		c.reserve(rows, prev)
		r, ok := raw[t.Name]
		k, h := -1, uint64(0)
		if !ok {
			k, h = kept(t.Name)
		}
		appendRow(c, i, t.Name, r, ok, k, h, prev)
	}
	c.finish(prev)
	return c
}

// reserve makes room for rows rows, once their length is known, so that
// the rows are one block, and for their int8 copy when the matrix is large
// or prev's had one.
func (c *Catalog) reserve(rows int, prev *Catalog) {
	switch {
	case c.dims <= 0:
	case c.int8Only:
		if c.quant == nil {
			c.quant = linalg.NewQuantized(c.dims, rows)
		}
	case c.matrix == nil:
		c.matrix = make([]float32, 0, rows*c.dims)
		if quantizes(rows*c.dims, c.dims) || (prev != nil && prev.quant != nil) {
			c.quant = linalg.NewQuantized(c.dims, rows)
		}
	}
}

// appendRow lays out tool i's row: decoded from r when hasRaw (or taken
// from prev when prev decoded it from the same bytes), else prev's row
// kept, a row already unit-length whose raw vector had digest keptHash
// (-1: none). A vector that does not decode, has no direction or another
// length leaves the tool without a row.
//
// r is a raw vector as the caller holds it: bytes, or the string of a
// Redis reply, decoded without a copy.
func appendRow[B []byte | string](c *Catalog, i int, name string, r B, hasRaw bool, kept int, keptHash uint64, prev *Catalog) {
	c.rowOf[i] = -1
	if c.int8Only {
		// The float row is decoded in scratch room, then held as int8.
		c.matrix = c.matrix[:0]
	}
	start := len(c.matrix)
	var err error
	var hash uint64
	from := -1 // the row's place in prev, when taken from there
	switch {
	case hasRaw:
		hash = digest(r)
		if same, h := prev.rowHash(name); same >= 0 && h == hash {
			from = same
		} else if c.matrix, err = contract.AppendVector(c.matrix, r); err == nil && !normalize(c.matrix[start:]) {
			err = errZeroVector
		}
	case kept >= 0:
		hash, from = keptHash, kept
	default:
		return
	}
	var row []float32
	switch {
	case from >= 0 && c.int8Only:
		// prev's int8 row, taken as it is.
		if c.dims != 0 && prev.dims != c.dims {
			return
		}
		c.dims = prev.dims
		c.reserve(len(c.rowOf), prev)
	case from >= 0:
		c.matrix = append(c.matrix, prev.matrix[from*prev.dims:(from+1)*prev.dims]...)
		row = c.matrix[start:]
	default:
		row = c.matrix[start:]
	}
	if from < 0 || !c.int8Only {
		if err != nil || len(row) == 0 || (c.dims != 0 && len(row) != c.dims) {
			c.matrix = c.matrix[:start]
			return
		}
		c.dims = len(row)
		if c.int8Only {
			c.reserve(len(c.rowOf), prev)
		}
	}
	switch {
	case c.quant == nil:
	case from >= 0 && prev.quant != nil:
		c.quant.AppendFrom(prev.quant, from)
	default:
		c.quant.Append(row)
	}
	if !c.int8Only {
		c.Vectors[name] = c.matrix[start:len(c.matrix):len(c.matrix)]
	}
	c.rowOf[i] = len(c.vecNames)
	c.vecNames = append(c.vecNames, name)
	c.rawHash = append(c.rawHash, hash)
}

// digest is the contract.VectorDigest of a raw vector held either way.
func digest[B []byte | string](raw B) uint64 {
	if s, ok := any(raw).(string); ok {
		return contract.VectorDigestString(s)
	}
	return contract.VectorDigest(any(raw).([]byte))
}

// newReading builds a Catalog of doc, without metadata, as New does, but
// reads the raw vectors of its tools through read, up to chunk tools at a
// time in the document's order: the raw vectors of a large catalog are
// never held all at once beside their rows. The next chunk is read while
// one is decoded, and the text is indexed on another core meanwhile, so
// the reads' round trips cost little more than the decoding. read leaves
// out a tool without a vector.
//
// int8Only is for grading (see grader): the catalog, and the versions
// Next builds from it, hold the rows only as int8, a quarter of the
// bytes of float rows, and score them so (linalg.Quantized bounds how far
// from the exact cosine): a grading estimates the catalog's quality, and
// holds its index beside every other part of the manager.
func newReading(doc *contract.Document, chunk int, int8Only bool, read func(names []string) (map[string]string, error)) (*Catalog, error) {
	c := &Catalog{Document: doc, Vectors: make(map[string][]float32, vectorsRoom(len(doc.Tools), int8Only)), tools: make(map[string]int, len(doc.Tools)), int8Only: int8Only}
	c.dims = doc.Embedding.Dimensions
	c.rowOf = make([]int, len(doc.Tools))
	chunk = max(chunk, 1)
	indexed := make(chan *bm25Index, 1)
	go func() { indexed <- newBM25Index(doc.Tools, nil, nil) }()
	type chunkRead struct {
		raw map[string]string
		err error
	}
	reads := make(chan chunkRead, 1) // one read ahead of the decoding
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		defer close(reads)
		for part := range slices.Chunk(doc.Tools, chunk) {
			names := make([]string, len(part))
			for i, t := range part {
				names[i] = t.Name
			}
			raw, err := read(names)
			select {
			case reads <- chunkRead{raw, err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	i := 0
	for got := range reads {
		if got.err != nil {
			return nil, got.err
		}
		for end := min(i+chunk, len(doc.Tools)); i < end; i++ {
			t := doc.Tools[i]
			c.tools[t.Name] = i
			c.reserve(len(doc.Tools), nil)
			r, ok := got.raw[t.Name]
			appendRow(c, i, t.Name, r, ok, -1, 0, nil)
		}
	}
	c.index = <-indexed
	c.finish(nil)
	return c, nil
}

// finish indexes the catalog's text, lending prev's terms of unchanged
// tools, lists the tools always included and quantizes a large matrix.
func (c *Catalog) finish(prev *Catalog) {
	if c.int8Only {
		c.matrix = nil // the scratch room of the rows decoded
	} else if c.quant == nil && quantizes(len(c.matrix), c.dims) {
		c.quant = linalg.Quantize(c.matrix, c.dims)
	}
	doc := c.Document
	c.nameKeys = len(doc.Tools) < math.MaxInt32 && slices.IsSortedFunc(doc.Tools, func(a, b contract.Tool) int { return strings.Compare(a.Name, b.Name) })
	c.byRunes = map[int][]int{}
	for i, t := range doc.Tools {
		n := utf8.RuneCountInString(t.Name)
		c.byRunes[n] = append(c.byRunes[n], i)
	}
	switch {
	case c.index != nil:
	case prev != nil:
		c.index = newBM25Index(doc.Tools, prev.index, prev.tools)
	default:
		c.index = newBM25Index(doc.Tools, nil, nil)
	}
	c.always = alwaysIncluded(doc, c.tools)
}

// alwaysIncluded lists, in the document's order, the tools flagged
// alwaysInclude and those its search settings name.
func alwaysIncluded(doc *contract.Document, tools map[string]int) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range doc.Tools {
		if t.AlwaysInclude {
			seen[t.Name] = true
		}
	}
	for _, n := range doc.Search.AlwaysInclude {
		if _, ok := tools[n]; ok {
			seen[n] = true
		}
	}
	for _, t := range doc.Tools {
		if seen[t.Name] {
			out = append(out, t.Name)
		}
	}
	return out
}

// overwriteTouched is overwrite when the caller knows which tools may
// differ from prev's (touched): when doc's tools are prev's, in the same
// order, with a row each where prev had one, only the touched tools are
// looked at, and prev's look-ups are all taken, so what a version costs
// follows what changed in it. digest says each tool's vector as it now
// is; rawVectors holds the raw vectors of the touched tools whose digest
// differs from their row's. It returns nil, and changes nothing, when
// that is not so (a touched tool new, gone, moved, or whose row comes or
// goes), and overwrite or Next is to be used.
func overwriteTouched(doc *contract.Document, rawVectors map[string][]byte, prev *Catalog, touched []string, digest func(name string) uint64) (c *Catalog, changed []string) {
	if len(doc.Tools) != len(prev.Document.Tools) || !prev.nameKeys || prev.index == nil || prev.byRunes == nil ||
		(prev.matrix == nil && (!prev.int8Only || prev.quant == nil)) || (doc.Embedding.Dimensions != 0 && doc.Embedding.Dimensions != prev.dims) {
		return nil, nil
	}
	var updates []rowUpdate
	at := make([]int, 0, len(touched))
	for _, name := range touched {
		i, ok := slices.BinarySearchFunc(doc.Tools, name, func(t contract.Tool, name string) int { return strings.Compare(t.Name, name) })
		if j, had := prev.tools[name]; !ok || !had || i != j {
			return nil, nil
		}
		at = append(at, i)
		row, hash := prev.rowOf[i], digest(name)
		switch {
		case (row < 0) != (hash == 0):
			return nil, nil // a row comes or goes
		case row < 0 || hash == prev.rawHash[row]:
			continue
		}
		v, err := contract.DecodeVector(rawVectors[name])
		if err != nil || len(v) != prev.dims || !normalize(v) {
			return nil, nil // no row: the tool leaves the rows
		}
		updates = append(updates, rowUpdate{row, v, hash})
	}
	c = &Catalog{
		Document: doc, matrix: prev.matrix, vecNames: prev.vecNames, rowOf: prev.rowOf, tools: prev.tools, Vectors: prev.Vectors,
		dims: prev.dims, rawHash: slices.Clone(prev.rawHash), quant: prev.quant, int8Only: prev.int8Only,
		nameKeys: prev.nameKeys, byRunes: prev.byRunes, index: prev.index,
	}
	changed = append(c.writeRows(updates, []string{}), c.index.reindexAt(doc.Tools, at)...)
	c.always = alwaysIncluded(doc, c.tools)
	return c, changed
}

// overwrite builds the Catalog of doc in prev's storage, as Next does, when
// the tools with a vector are prev's or some of them, in the same order:
// the rows of removed tools are dropped by moving the others up, and the
// rows of the changed vectors in rawVectors are written over prev's, which
// no copy of every row is made for. It returns nil, and changes nothing,
// otherwise (a tool gained a row).
// prev is spent when it returns a Catalog: its rows are the new ones,
// and when its tools are doc's, in the same order, so is its text index,
// which is re-indexed in place. changed names the tools whose row was
// written or whose text was re-indexed in place.
func overwrite(doc *contract.Document, rawVectors map[string][]byte, prev *Catalog) (c *Catalog, changed []string) {
	if (prev.matrix == nil && (!prev.int8Only || prev.quant == nil)) || (doc.Embedding.Dimensions != 0 && doc.Embedding.Dimensions != prev.dims) {
		return nil, nil
	}
	var updates []rowUpdate
	rowOf := make([]int, len(doc.Tools))
	// from is each row's place in prev: rising, and the row's own or
	// past it when tools were removed.
	from := make([]int, 0, len(prev.vecNames))
	n := 0
	for i, t := range doc.Tools {
		rowOf[i] = -1
		old, oldHash := prev.rowHash(t.Name)
		has := old >= 0
		if r, ok := rawVectors[t.Name]; ok {
			hash := contract.VectorDigest(r)
			if old < 0 || hash != oldHash {
				v, err := contract.DecodeVector(r)
				has = err == nil && len(v) == prev.dims && normalize(v)
				if has {
					updates = append(updates, rowUpdate{n, v, hash})
				}
			}
		}
		if !has {
			continue
		}
		r := prev.rowIndex(t.Name)
		if r < 0 || (n > 0 && r <= from[n-1]) {
			return nil, nil // a new row, or rows in another order
		}
		from = append(from, r)
		rowOf[i] = n
		n++
	}
	c = &Catalog{
		Document: doc, matrix: prev.matrix, vecNames: prev.vecNames, rowOf: rowOf,
		dims: prev.dims, rawHash: slices.Clone(prev.rawHash), quant: prev.quant, int8Only: prev.int8Only,
	}
	same := sameNames(doc.Tools, prev.Document.Tools)
	// The same tools in the same rows, as after an edit: prev's look-ups
	// find c's, and are taken rather than made again (at 100,000 tools,
	// 30 MB and two maps filled per version).
	shared := same && n == len(prev.vecNames) && slices.Equal(rowOf, prev.rowOf)
	if shared {
		c.tools, c.Vectors, c.rowOf = prev.tools, prev.Vectors, prev.rowOf
	} else {
		c.tools, c.Vectors = make(map[string]int, len(doc.Tools)), make(map[string][]float32, vectorsRoom(n, c.int8Only))
	}
	// Not nil: the rows are written over, prev's vectors no longer its own.
	changed = []string{}
	if n < len(prev.vecNames) {
		// Tools were removed: the rows kept move up, in order, each to
		// a place already read or its own.
		c.vecNames, c.rawHash = make([]string, n), make([]uint64, n)
		if c.matrix != nil {
			c.matrix = prev.matrix[:n*c.dims]
		}
		for row, r := range from {
			if c.matrix != nil {
				copy(c.matrix[row*c.dims:(row+1)*c.dims], prev.matrix[r*c.dims:(r+1)*c.dims])
			}
			c.vecNames[row], c.rawHash[row] = prev.vecNames[r], prev.rawHash[r]
			if c.quant != nil {
				c.quant.Move(row, r)
			}
		}
		if c.quant != nil {
			c.quant.Truncate(n)
		}
	}
	changed = c.writeRows(updates, changed)
	if !shared {
		for i, t := range doc.Tools {
			c.tools[t.Name] = i
			if row := rowOf[i]; row >= 0 && c.matrix != nil {
				c.Vectors[t.Name] = c.matrix[row*c.dims : (row+1)*c.dims : (row+1)*c.dims]
			}
		}
	}
	if same {
		c.index = prev.index
		changed = append(changed, c.index.reindex(doc.Tools)...)
	}
	c.finish(prev)
	return c, changed
}

// rowUpdate is a row written over: its new values, unit-length, and the
// digest of the raw vector they were decoded from.
type rowUpdate struct {
	row  int
	vec  []float32
	hash uint64
}

// writeRows writes updates over c's rows and appends the names of their
// tools to changed.
func (c *Catalog) writeRows(updates []rowUpdate, changed []string) []string {
	for _, u := range updates {
		if c.matrix != nil {
			copy(c.matrix[u.row*c.dims:(u.row+1)*c.dims], u.vec)
		}
		if c.quant != nil {
			c.quant.Set(u.row, u.vec)
		}
		c.rawHash[u.row] = u.hash
		changed = append(changed, c.vecNames[u.row])
	}
	return changed
}

// spend lets go of c's rows, vectors and search index, after a
// later version copied what it takes of them: c then holds only what a
// grade compares that version with (its document, tool and row names,
// and indexed text), and is never searched again.
func (c *Catalog) spend() {
	c.matrix, c.Vectors, c.quant, c.rawHash, c.byRunes = nil, nil, nil, nil, nil
	if c.index != nil {
		// A new index of the same texts: the old one may be shared.
		c.index = &bm25Index{docs: c.index.docs}
	}
}

// sameNames reports whether a and b are the same tools in the same order.
func sameNames(a, b []contract.Tool) bool {
	return slices.EqualFunc(a, b, func(x, y contract.Tool) bool { return x.Name == y.Name })
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

// IsAllowed reports whether a principal, member of groups, may use a
// tool: true when the tool exists and its permissions are absent, list
// "*", list the principal, or list "group:G" for one of its groups; an
// empty list allows nobody.
func (c *Catalog) IsAllowed(tool, principal string, groups ...string) bool {
	if _, ok := c.tools[tool]; !ok {
		return false
	}
	allowed, ok := c.Document.Permissions[tool]
	return !ok || Allows(allowed, principal, groups...)
}

// Allows reports whether a list of principals allows principal, a member
// of groups: it names the principal, "*", or "group:G" for one of its
// groups.
func Allows(list []string, principal string, groups ...string) bool {
	for _, p := range list {
		if p == "*" || p == principal {
			return true
		}
		if g, ok := strings.CutPrefix(p, GroupPrefix); ok && slices.Contains(groups, g) {
			return true
		}
	}
	return false
}

// GroupPrefix marks a group in a tool's permissions: "group:G" allows the
// members of G.
const GroupPrefix = "group:"

// visibleTo returns whether a principal and its groups may use a tool;
// everyone when principal and groups are empty.
func (c *Catalog) visibleTo(principal string, groups []string) func(string) bool {
	if principal == "" && len(groups) == 0 {
		return func(string) bool { return true }
	}
	return func(tool string) bool { return c.IsAllowed(tool, principal, groups...) }
}

// normalize scales v to unit length in place; false for a zero vector.
// errZeroVector marks a vector that has no direction.
var errZeroVector = errors.New("zero vector")

// vectorsRoom is the room to make in Vectors for n tools: none when the
// rows are int8 only, and Vectors stays empty.
func vectorsRoom(n int, int8Only bool) int {
	if int8Only {
		return 0
	}
	return n
}

// rowHash is tool name's row index and the digest of the raw vector the
// row was decoded from (0 when unknown); -1 on a nil Catalog or for a
// tool without a row.
func (c *Catalog) rowHash(name string) (int, uint64) {
	row := c.rowIndex(name)
	if row < 0 {
		return -1, 0
	}
	return row, c.rawHash[row]
}

// rowVector is row's values: the float row, or the values an int8 row
// stands for.
func (c *Catalog) rowVector(row int) []float32 {
	if c.int8Only {
		return c.quant.Row(nil, row)
	}
	return c.matrix[row*c.dims : (row+1)*c.dims]
}

// dotsRows sets scores[i] to the cosine of unit and row rows[i], as a
// scan of every row scores it.
func (c *Catalog) dotsRows(scores []float32, rows []int, unit []float32) {
	if c.int8Only {
		c.quant.DotsRows(scores, rows, unit, linalg.Best)
		return
	}
	linalg.DotsRows(scores, c.matrix, rows, unit, linalg.Best)
}

// dotsBatch sets cosines[j·n+r], n the rows, to the cosine of query j of
// units (unit-length queries one after another) and row r, as a scan of
// every row scores it.
func (c *Catalog) dotsBatch(cosines, units []float32) {
	if !c.int8Only {
		linalg.DotsBatch(cosines, c.matrix, units, c.dims, linalg.Best)
		return
	}
	n := len(c.vecNames)
	for j := 0; j < len(units)/c.dims; j++ {
		c.quant.Dots(cosines[j*n:(j+1)*n], units[j*c.dims:(j+1)*c.dims], linalg.Best)
	}
}

// sameRow reports whether tool name has the same row in a and b, or none
// in either: decoded from the same raw vector, or of the same values.
func sameRow(a, b *Catalog, name string) bool {
	ra, ha := a.rowHash(name)
	rb, hb := b.rowHash(name)
	switch {
	case ra < 0 || rb < 0:
		return ra < 0 && rb < 0
	case ha != 0 && ha == hb:
		return true
	case a.int8Only || b.int8Only:
		return false // the values are not held: changed, to be sure
	default:
		return slices.Equal(a.rowVector(ra), b.rowVector(rb))
	}
}

// rowIndex is a tool's row in the matrix, -1 when it has none.
func (c *Catalog) rowIndex(name string) int {
	if c == nil {
		return -1
	}
	i, ok := c.tools[name]
	if !ok {
		return -1
	}
	return c.rowOf[i]
}

func normalize(v []float32) bool {
	n := norm(v)
	if n == 0 {
		return false
	}
	for i, x := range v {
		v[i] = float32(float64(x) / n)
	}
	return true
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

// maxIncremental is how many versions behind an Update still reads only
// what changed.
const maxIncremental = contract.MaxRetainVersions

// Update returns the served version of the catalog cur holds, reading
// from Redis only the tools changed since cur's version (from the change
// records of contract 2) and sharing the rest with cur. It returns cur
// itself when it is the one served, and falls back to a full Load when
// cur is nil, the catalog was recreated, a change record is gone, or a
// pin was set, changed or cleared.
func Update(ctx context.Context, c redis.UniversalClient, keys contract.Keys, cur *Catalog) (*Catalog, error) {
	if cur == nil {
		return Load(ctx, c, keys)
	}
	for range 3 {
		next, err := update(ctx, c, keys, cur)
		if !errors.Is(err, contract.ErrConflict) {
			return next, err
		}
		// A version was published while reading: read again.
	}
	return Load(ctx, c, keys)
}

var errFullLoad = errors.New("a full load is needed")

func update(ctx context.Context, c redis.UniversalClient, keys contract.Keys, cur *Catalog) (*Catalog, error) {
	served, v, err := contract.Served(ctx, c, keys)
	if err != nil {
		return nil, err
	}
	if v == 0 {
		return nil, fmt.Errorf("%w (%s)", ErrNotPublished, keys.Version())
	}
	pinned := served != keys
	if v == cur.Version() && pinned == cur.Pinned {
		return cur, nil
	}
	if pinned || cur.Pinned {
		return Load(ctx, c, keys)
	}
	next, err := incremental(ctx, c, keys, cur, v)
	if errors.Is(err, errFullLoad) || errors.Is(err, contract.ErrNotRetained) {
		return Load(ctx, c, keys)
	}
	return next, err
}

// incremental applies versions cur+1..v to cur.
func incremental(ctx context.Context, c redis.UniversalClient, keys contract.Keys, cur *Catalog, v int64) (*Catalog, error) {
	if v < cur.Version() || v-cur.Version() > maxIncremental {
		return nil, errFullLoad
	}
	changes, err := contract.ReadChanges(ctx, c, keys, cur.Version(), v)
	if err != nil {
		return nil, err
	}
	touched := map[string]bool{}
	for _, ch := range changes {
		for _, name := range append(ch.Updated, ch.Removed...) {
			touched[name] = true
		}
	}
	names := make([]string, 0, len(touched))
	for name := range touched {
		names = append(names, name)
	}
	part, err := contract.ReadTools(ctx, c, keys, v, names)
	if err != nil {
		return nil, err
	}
	h := part.Head
	if h.CatalogUID != cur.Document.CatalogUID || h.Embedding != cur.Document.Embedding {
		// Another catalog, or vectors of another model: nothing carries over.
		return nil, errFullLoad
	}
	entries := make([]contract.Entry, 0, len(cur.Document.Tools)+len(part.Entries))
	for i, t := range cur.Document.Tools {
		if !touched[t.Name] {
			entries = append(entries, cur.Document.Entry(i))
		}
	}
	for _, e := range part.Entries {
		entries = append(entries, e)
	}
	if len(entries) != h.ToolCount {
		return nil, errFullLoad
	}
	doc := contract.Assemble(*h, entries)
	return build(doc, part.Vectors, cur, func(name string) bool { return !touched[name] }), nil
}

// quantizeBytes is the size of matrix from which a semantic search first
// scans it as int8: a quarter of the bytes to read from memory, at about
// 4,000 rows of 256 floats. A smaller matrix is read from cache quickly,
// and a CPU without a vector kernel scans float rows only.
var quantizeBytes = func() int {
	if linalg.Best == nil {
		return math.MaxInt
	}
	return 4 << 20
}()

// quantizes reports whether a matrix of n floats in rows of dims is
// scanned as int8.
func quantizes(n, dims int) bool { return dims > 0 && 4*n >= quantizeBytes }

// nameKey is the ranked.key of row or tool index i: i + 1 when the tools
// are in name order, else 0 (none).
func (c *Catalog) nameKey(i int) int32 {
	if !c.nameKeys {
		return 0
	}
	return int32(i + 1)
}
