package contract

// Reading and writing catalogs: one round trip to read a catalog's state,
// one MULTI/EXEC to publish a version, PUBLISH after EXEC.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// MaxRetainVersions bounds spec.publish.retainVersions (the CRD says the
// same; a test holds them together); versions older than
// this many are always gone, which bounds the keys a publish must delete.
const MaxRetainVersions = 100

// ErrConflict means another writer published a version between this pass's
// read and its write; nothing was written.
var ErrConflict = errors.New("the catalog's version in Redis changed during the pass; nothing was written")

// Snapshot is a catalog's state in Redis, as stored.
type Snapshot struct {
	// Version is P:version, 0 when absent.
	Version int64
	// Head is P:head, nil when absent.
	Head []byte
	// Entries is P:tools; ReadWithStaged leaves it empty and parses the
	// entries for Document as it reads them.
	Entries map[string]string
	// Legacy is P:catalog when there is no P:head: a contract-1 document.
	Legacy []byte
	// Metadata is P:metadata.
	Metadata map[string]string
	// ParsedMetadata is P:metadata parsed as ReadWithStaged read it, which
	// leaves Metadata empty (see ReadWithStaged).
	ParsedMetadata map[string]ParsedMetadata
	// Vectors is P:embeddings; ReadWithStaged leaves it empty and fills
	// VectorDigests, each vector's VectorDigest, instead.
	Vectors       map[string][]byte
	VectorDigests map[string]uint64
	// StagedMetadata and StagedVectors are the staged entries (see
	// Keys.StagedEmbeddings); ReadWithStaged fills them.
	StagedMetadata map[string]string
	StagedVectors  map[string][]byte

	// versionRaw is P:version as read and vectorNames, entryNames and
	// metadataNames the fields of P:embeddings, P:tools and P:metadata, for
	// ReadWithStaged, which parses the entries as it reads them (parsed).
	versionRaw                             string
	vectorNames, entryNames, metadataNames []string
	parsed                                 *parsedEntries
}

// ParsedMetadata is one P:metadata field, parsed: its Metadata, or Err
// saying why it is unreadable.
type ParsedMetadata struct {
	Metadata *Metadata
	Err      error
}

// parsedEntries are P:tools' fields parsed as read: the entries, or the
// first that could not be; fields counts the fields read either way.
type parsedEntries struct {
	entries []Entry
	err     error
	fields  int
}

// Document assembles the published document: from P:head and P:tools, or
// from a contract-1 P:catalog. It is nil, with no error, when nothing is
// published; an error says what is unreadable.
func (s *Snapshot) Document() (*Document, error) {
	if s.Head == nil {
		if s.Legacy == nil || isTombstone(s.Legacy) {
			// A P:catalog written under contract 2 without P:head: the
			// head was deleted, and nothing is published.
			return nil, nil
		}
		return ParseDocument(s.Legacy)
	}
	h, err := ParseHead(s.Head)
	if err != nil {
		return nil, err
	}
	if s.parsed != nil {
		if s.parsed.err != nil {
			return nil, s.parsed.err
		}
		if len(s.parsed.entries) != h.ToolCount {
			return nil, fmt.Errorf("the tools hash holds %d entries, the head of version %d says %d", len(s.parsed.entries), h.Version, h.ToolCount)
		}
		return Assemble(*h, s.parsed.entries), nil
	}
	if len(s.Entries) != h.ToolCount {
		return nil, fmt.Errorf("the tools hash holds %d entries, the head of version %d says %d", len(s.Entries), h.Version, h.ToolCount)
	}
	entries := make([]Entry, 0, len(s.Entries))
	for name, raw := range s.Entries {
		e, err := ParseEntry(name, []byte(raw))
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	return Assemble(*h, entries), nil
}

// Read fetches a catalog's version, head, tools, metadata and vectors in
// one MULTI/EXEC round trip, so they are consistent with each other.
func Read(ctx context.Context, c redis.UniversalClient, k Keys) (*Snapshot, error) {
	return read(ctx, c, k, false)
}

// ReadWithStaged is Read with the staged entries and, instead of the
// published vectors, their digests, for the operator: what it publishes
// next carries only the vectors that changed, and a 50,000-tool catalog's
// vectors are 51 MB it need not hold, nor read at once. The entries,
// metadata and vectors are read maxFieldsPerRead at a time after the
// rest, and each round trip's fields are parsed (or digested) before the
// next: the replies of every field (about 50 MB at 50,000 tools) are not
// held at once. Entries is then empty, and Document assembles the parsed
// entries; Metadata is empty, and ParsedMetadata holds the parsed fields.
// Every write of these hashes sets P:version, so the snapshot is
// consistent when P:version is the same after them and every field named
// was there. It is read again when not, up to maxReadAttempts times.
func ReadWithStaged(ctx context.Context, c redis.UniversalClient, k Keys) (*Snapshot, error) {
	for range maxReadAttempts {
		s, err := read(ctx, c, k, true)
		if err != nil {
			return nil, err
		}
		complete, err := s.readFields(ctx, c, k)
		if err != nil {
			return nil, err
		}
		version, err := c.Get(ctx, k.Version()).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("reading catalog %s: %w", k.Prefix, err)
		}
		if version == s.versionRaw && complete {
			return s, nil
		}
	}
	return nil, fmt.Errorf("reading catalog %s: its version changed during each of %d reads", k.Prefix, maxReadAttempts)
}

// readFields reads the fields of P:tools, P:metadata and P:embeddings that
// read named, parsing the entries and metadata and digesting the vectors
// a round trip at a time. It reports whether every field named was there.
func (s *Snapshot) readFields(ctx context.Context, c redis.UniversalClient, k Keys) (bool, error) {
	entries, metadata, vectors := s.entryNames, s.metadataNames, s.vectorNames
	s.entryNames, s.metadataNames, s.vectorNames = nil, nil, nil
	parsed := &parsedEntries{entries: make([]Entry, 0, len(entries))}
	err := eachField(ctx, c, k.Tools(), entries, func(name, raw string) {
		parsed.fields++
		if parsed.err != nil {
			return
		}
		e, err := ParseEntry(name, []byte(raw))
		if err != nil {
			parsed.err = err
			return
		}
		parsed.entries = append(parsed.entries, e)
	})
	if err != nil {
		return false, err
	}
	s.ParsedMetadata = make(map[string]ParsedMetadata, len(metadata))
	err = eachField(ctx, c, k.Metadata(), metadata, func(name, raw string) {
		m, parseMetadataErr := ParseMetadata(raw)
		s.ParsedMetadata[name] = ParsedMetadata{Metadata: m, Err: parseMetadataErr}
	})
	if err != nil {
		return false, err
	}
	s.VectorDigests = make(map[string]uint64, len(vectors))
	err = eachField(ctx, c, k.Embeddings(), vectors, func(name, vec string) { s.VectorDigests[name] = maphash.String(vectorSeed, vec) })
	if err != nil {
		return false, err
	}
	s.parsed = parsed
	return parsed.fields == len(entries) && len(s.ParsedMetadata) == len(metadata) && len(s.VectorDigests) == len(vectors), nil
}

// maxReadAttempts bounds ReadWithStaged's reads of a catalog that changes
// while it is read.
const maxReadAttempts = 3

func read(ctx context.Context, c redis.UniversalClient, k Keys, staged bool) (*Snapshot, error) {
	var version, head, legacy *redis.StringCmd
	var entries, meta, vecs, stagedMeta, stagedVecs *redis.MapStringStringCmd
	var vecNames, entryNames, metaNames *redis.StringSliceCmd
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		version = p.Get(ctx, k.Version())
		head = p.Get(ctx, k.Head())
		legacy = p.Get(ctx, k.Catalog())
		if staged {
			entryNames = p.HKeys(ctx, k.Tools())
			metaNames = p.HKeys(ctx, k.Metadata())
			vecNames = p.HKeys(ctx, k.Embeddings())
			stagedMeta = p.HGetAll(ctx, k.StagedMetadata())
			stagedVecs = p.HGetAll(ctx, k.StagedEmbeddings())
		} else {
			entries = p.HGetAll(ctx, k.Tools())
			meta = p.HGetAll(ctx, k.Metadata())
			vecs = p.HGetAll(ctx, k.Embeddings())
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("reading catalog %s: %w", k.Prefix, err)
	}
	s := &Snapshot{}
	if staged {
		s.entryNames, s.metadataNames, s.vectorNames = entryNames.Val(), metaNames.Val(), vecNames.Val()
		s.StagedMetadata, s.StagedVectors = stagedMeta.Val(), bytesValues(stagedVecs.Val())
	} else {
		s.Entries, s.Metadata, s.Vectors = entries.Val(), meta.Val(), bytesValues(vecs.Val())
	}
	if v, err := version.Result(); err == nil {
		s.versionRaw = v
		if s.Version, err = strconv.ParseInt(v, 10, 64); err != nil {
			return nil, fmt.Errorf("reading catalog %s: %s holds %q, not a version number", k.Prefix, k.Version(), v)
		}
	}
	if h, err := head.Bytes(); err == nil {
		s.Head = h
	} else if d, err := legacy.Bytes(); err == nil {
		s.Legacy = d
	}
	return s, nil
}

func bytesValues(m map[string]string) map[string][]byte {
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = []byte(v)
	}
	return out
}

// Update is one version to publish.
type Update struct {
	// ExpectVersion is the version the pass read; the write is refused
	// (ErrConflict) when P:version holds another.
	ExpectVersion int64
	// Document is the new version, sealed, with its Version set.
	Document *Document
	// Previous is the document of ExpectVersion as read. Only the tools
	// whose entry differs from it are written.
	Previous *Document
	// Rewrite replaces P:tools whole and deletes contract-1 keys: for a
	// first version, and when Previous was not read from P:head and
	// P:tools (a contract-1 catalog, or an unreadable one).
	Rewrite bool
	// Vectors and Metadata are set per tool; Remove deletes tools from
	// both hashes.
	Vectors  map[string][]byte
	Metadata map[string][]byte
	Remove   []string
	// Retain is how many versions, the new one included, keep their
	// change record.
	Retain int
}

// legacyTombstone is what P:catalog holds under contract 2: a contract-1
// reader fails to decode "tools", and a person reading the key learns why.
var legacyTombstone = []byte(`{"contract":2,"version":0,"tools":"moved: this catalog is published with version 2 of the Redis contract (P:head, P:tools); upgrade this reader, see docs/redis-contract.md"}`)

func isTombstone(raw []byte) bool {
	var probe struct {
		Contract int `json:"contract"`
	}
	return json.Unmarshal(raw, &probe) == nil && probe.Contract >= 2
}

// Write publishes an update in one MULTI/EXEC guarded by WATCH on P:version:
// either every key changes or none does. It writes the head, the entries
// that changed, the vectors and metadata given, and the version's change
// record.
func Write(ctx context.Context, c redis.UniversalClient, k Keys, u Update) error {
	d := u.Document
	if d == nil || d.Version <= u.ExpectVersion || u.Retain < 1 {
		return fmt.Errorf("invalid update: no document, a version not after %d, or retain %d", u.ExpectVersion, u.Retain)
	}
	head, err := json.Marshal(d.Head())
	if err != nil {
		return fmt.Errorf("encoding the head: %w", err)
	}
	set, removed, change, err := diff(u)
	if err != nil {
		return err
	}
	changeRaw, err := json.Marshal(change)
	if err != nil {
		return fmt.Errorf("encoding the change record: %w", err)
	}
	err = guarded(ctx, c, k, u.ExpectVersion, func(p redis.Pipeliner) {
		p.Set(ctx, k.Version(), d.Version, 0)
		p.Set(ctx, k.Head(), head, 0)
		p.Set(ctx, k.Catalog(), legacyTombstone, 0)
		if u.Rewrite {
			p.Del(ctx, k.Tools())
			if old := versionKeys(k.CatalogVersion, u.ExpectVersion, MaxRetainVersions+1); len(old) > 0 {
				p.Del(ctx, old...)
			}
		}
		if len(set) > 0 {
			p.HSet(ctx, k.Tools(), flatten(set)...)
		}
		if len(removed) > 0 {
			p.HDel(ctx, k.Tools(), removed...)
		}
		if len(u.Vectors) > 0 {
			p.HSet(ctx, k.Embeddings(), flatten(u.Vectors)...)
		}
		if len(u.Metadata) > 0 {
			p.HSet(ctx, k.Metadata(), flatten(u.Metadata)...)
		}
		if len(u.Remove) > 0 {
			p.HDel(ctx, k.Embeddings(), u.Remove...)
			p.HDel(ctx, k.Metadata(), u.Remove...)
		}
		// Whatever was staged is published with this version or belongs
		// to tools that are gone.
		p.Del(ctx, k.StagedEmbeddings(), k.StagedMetadata())
		p.Set(ctx, k.Changes(d.Version), changeRaw, 0)
		if old := versionKeys(k.Changes, d.Version-int64(u.Retain), MaxRetainVersions+1); len(old) > 0 {
			p.Del(ctx, old...)
		}
	})
	if err != nil && !errors.Is(err, ErrConflict) {
		return fmt.Errorf("writing catalog %s version %d: %w", k.Prefix, d.Version, err)
	}
	return err
}

// diff finds the entries to set and remove and the change record of an
// update.
func diff(u Update) (set map[string][]byte, removed []string, change Change, err error) {
	change = Change{Version: u.Document.Version, Updated: []string{}, Removed: []string{}, Before: map[string]Entry{}}
	var prevTools []Tool
	if u.Previous != nil {
		prevTools = u.Previous.Tools
		h := u.Previous.Head()
		change.HeadBefore = &h
	}
	// Both documents are walked in name order, side by side: at 50,000
	// tools, a map of either's names costs more than the rest of a
	// publish. A sealed document is in name order already.
	doc, prev := inNameOrder(u.Document.Tools), inNameOrder(prevTools)
	docName := func(i int) string { return u.Document.Tools[doc[i]].Name }
	prevName := func(j int) string { return prevTools[prev[j]].Name }
	// Of a name the previous document lists twice (it was read from
	// Redis), the last entry counts.
	kept := prev[:0]
	for k, p := range prev {
		if k+1 < len(prev) && prevTools[prev[k+1]].Name == prevTools[p].Name {
			continue
		}
		kept = append(kept, p)
	}
	prev = kept
	set = map[string][]byte{}
	updated := map[string]bool{}
	for i, j := 0, 0; i < len(doc) || j < len(prev); {
		if i == len(doc) || j < len(prev) && prevName(j) < docName(i) {
			removed = append(removed, prevName(j))
			j++
			continue
		}
		e := u.Document.Entry(doc[i])
		if i > 0 && docName(i-1) == e.Name {
			// P:tools holds one entry a name: the head's count would lie.
			return nil, nil, change, fmt.Errorf("the document lists tool %s twice", e.Name)
		}
		i++
		if j < len(prev) && prevName(j) == e.Name {
			j++
			if u.Previous.Entry(prev[j-1]).Equal(e) && !u.Rewrite {
				continue
			}
		}
		if set[e.Name], err = json.Marshal(e); err != nil {
			return nil, nil, change, fmt.Errorf("encoding the entry of %s: %w", e.Name, err)
		}
		updated[e.Name] = true
	}
	find := func(tools []Tool, order []int, name string) (int, bool) {
		k, ok := slices.BinarySearchFunc(order, name, func(i int, name string) int { return strings.Compare(tools[i].Name, name) })
		if !ok {
			return 0, false
		}
		return order[k], true
	}
	for name := range u.Vectors {
		if _, ok := find(prevTools, prev, name); ok || set[name] != nil {
			updated[name] = true
		}
	}
	for name := range updated {
		if _, ok := find(u.Document.Tools, doc, name); ok {
			change.Updated = append(change.Updated, name)
		}
	}
	sort.Strings(change.Updated)
	change.Removed = append(change.Removed, removed...)
	for _, name := range append(slices.Clone(change.Updated), removed...) {
		if j, ok := find(prevTools, prev, name); ok {
			change.Before[name] = u.Previous.Entry(j)
		}
	}
	return set, removed, change, nil
}

// inNameOrder returns the positions of tools in name order, those of
// equal names in the order they come: 0, 1, … when the tools are in name
// order already, as a sealed document's are.
func inNameOrder(tools []Tool) []int {
	order := make([]int, len(tools))
	for i := range order {
		order[i] = i
	}
	if !slices.IsSortedFunc(tools, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) }) {
		slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(tools[a].Name, tools[b].Name) })
	}
	return order
}

// guarded runs the commands of fn in one MULTI/EXEC, only when P:version
// holds expect (ErrConflict otherwise, or when it changes before EXEC).
func guarded(ctx context.Context, c redis.UniversalClient, k Keys, expect int64, fn func(redis.Pipeliner)) error {
	err := c.Watch(ctx, func(tx *redis.Tx) error {
		current, err := tx.Get(ctx, k.Version()).Int64()
		if errors.Is(err, redis.Nil) {
			current, err = 0, nil
		}
		if err != nil {
			return fmt.Errorf("checking %s: %w", k.Version(), err)
		}
		if current != expect {
			return ErrConflict
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			fn(p)
			return nil
		})
		return err
	}, k.Version())
	if errors.Is(err, redis.TxFailedErr) {
		return ErrConflict
	}
	return err
}

// Stage keeps re-embedded tools that cannot be published yet in the staged
// hashes, guarded like Write by WATCH on P:version: nothing is staged when
// another writer published since the pass read.
func Stage(ctx context.Context, c redis.UniversalClient, k Keys, expectVersion int64, vectors, metadata map[string][]byte) error {
	if len(vectors) == 0 {
		return nil
	}
	err := guarded(ctx, c, k, expectVersion, func(p redis.Pipeliner) {
		p.HSet(ctx, k.StagedEmbeddings(), flatten(vectors)...)
		p.HSet(ctx, k.StagedMetadata(), flatten(metadata)...)
	})
	if err != nil && !errors.Is(err, ErrConflict) {
		return fmt.Errorf("staging embeddings of catalog %s: %w", k.Prefix, err)
	}
	return err
}

// versionKeys lists the keys of versions from, from-1, ... (at most n, not
// below 1): what falls out of retention with a new version. Earlier
// publishes deleted everything older, so n = MaxRetainVersions+1 suffices.
func versionKeys(key func(int64) string, from int64, n int) []string {
	var keys []string
	for v := from; v >= 1 && v > from-int64(n); v-- {
		keys = append(keys, key(v))
	}
	return keys
}

func flatten(m map[string][]byte) []any {
	out := make([]any, 0, 2*len(m))
	for k, v := range m {
		out = append(out, k, v)
	}
	return out
}

// Notify announces a version on the channel. It runs after EXEC: a
// consumer that misses it finds the new version when it re-checks P:version.
func Notify(ctx context.Context, c redis.UniversalClient, channel string, notice []byte) error {
	if err := c.Publish(ctx, channel, notice).Err(); err != nil {
		return fmt.Errorf("publishing on %s: %w", channel, err)
	}
	return nil
}

// HeadOwner returns the catalog UID in the head under k; empty when there
// is no head or it names none.
func HeadOwner(ctx context.Context, c redis.UniversalClient, k Keys) (string, error) {
	raw, err := c.Get(ctx, k.Head()).Bytes()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", k.Head(), err)
	}
	h, err := ParseHead(raw)
	if err != nil {
		return "", err
	}
	return h.CatalogUID, nil
}

// Delete removes every key of a catalog; deleting an absent catalog is not
// an error.
func Delete(ctx context.Context, c redis.UniversalClient, k Keys) error {
	version, err := c.Get(ctx, k.Version()).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("reading %s: %w", k.Version(), err)
	}
	if err := c.Del(ctx, deletedKeys(k, version, time.Now())...).Err(); err != nil {
		return fmt.Errorf("deleting catalog %s: %w", k.Prefix, err)
	}
	return nil
}

// Stamp identifies a stored version cheaply, for a writer that keeps what
// it wrote: P:version, P:head and the sizes of the hashes. A version
// published by another writer, or keys deleted by hand, change it.
type Stamp struct {
	Version                  int64
	Head                     string
	Tools, Vectors, Metadata int64
}

// Stamp is the snapshot's stamp.
func (s *Snapshot) Stamp() Stamp {
	// Each pair holds one read's fields, the other is empty.
	tools, vectors, metadata := len(s.Entries), len(s.Vectors)+len(s.VectorDigests), len(s.Metadata)+len(s.ParsedMetadata)
	if s.parsed != nil {
		tools = s.parsed.fields
	}
	return Stamp{Version: s.Version, Head: string(s.Head), Tools: int64(tools), Vectors: int64(vectors), Metadata: int64(metadata)}
}

// ReadStamp reads a catalog's stamp and its staged entries in one
// MULTI/EXEC: a few small replies, whatever the catalog's size, plus
// whatever is staged.
func ReadStamp(ctx context.Context, c redis.UniversalClient, k Keys) (Stamp, *Snapshot, error) {
	var version, head *redis.StringCmd
	var tools, vecs, meta *redis.IntCmd
	var stagedMeta, stagedVecs *redis.MapStringStringCmd
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		version = p.Get(ctx, k.Version())
		head = p.Get(ctx, k.Head())
		tools = p.HLen(ctx, k.Tools())
		vecs = p.HLen(ctx, k.Embeddings())
		meta = p.HLen(ctx, k.Metadata())
		stagedMeta = p.HGetAll(ctx, k.StagedMetadata())
		stagedVecs = p.HGetAll(ctx, k.StagedEmbeddings())
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return Stamp{}, nil, fmt.Errorf("reading catalog %s: %w", k.Prefix, err)
	}
	st := Stamp{Head: head.Val(), Tools: tools.Val(), Vectors: vecs.Val(), Metadata: meta.Val()}
	if v, err := version.Result(); err == nil {
		st.Version, _ = strconv.ParseInt(v, 10, 64)
	}
	return st, &Snapshot{StagedMetadata: stagedMeta.Val(), StagedVectors: bytesValues(stagedVecs.Val())}, nil
}

// maxFieldsPerRead bounds the names asked for in one HMGET.
const maxFieldsPerRead = 1000

// ReadVectors reads the published vectors of the named tools from
// P:embeddings, in round trips of up to maxFieldsPerRead names; a tool
// without a vector is left out.
func ReadVectors(ctx context.Context, c redis.UniversalClient, k Keys, names []string) (map[string][]byte, error) {
	out := make(map[string][]byte, len(names))
	if err := eachField(ctx, c, k.Embeddings(), names, func(name, vec string) { out[name] = []byte(vec) }); err != nil {
		return nil, err
	}
	return out, nil
}

// eachField reads the named fields of a hash in round trips of up to
// maxFieldsPerRead names and calls fn with each there is.
func eachField(ctx context.Context, c redis.UniversalClient, key string, names []string, fn func(name, value string)) error {
	for chunk := range slices.Chunk(names, maxFieldsPerRead) {
		vals, err := c.HMGet(ctx, key, chunk...).Result()
		if err != nil {
			return fmt.Errorf("reading %s: %w", key, err)
		}
		for i, v := range vals {
			if value, ok := v.(string); ok {
				fn(chunk[i], value)
			}
		}
	}
	return nil
}
