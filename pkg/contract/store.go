package contract

// Reading catalogs: one round trip to read a catalog's state. The
// operator writes them with internal/published/versions.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"

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
// saying why it is unreadable, and the field's MetadataDigest.
type ParsedMetadata struct {
	Metadata *Metadata
	Err      error
	Digest   uint64
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
	entries, err := parseEntries(s.Entries)
	if err != nil {
		return nil, err
	}
	return Assemble(*h, entries), nil
}

// parseEntries parses the fields of P:tools on as many cores as there
// are, each taking minParsedPart fields or more: the parse is most of
// the time a large catalog's document takes to read. A field that does
// not parse fails the whole. The entries come in name order, the
// document's, which Assemble then only checks: ordering the names moves
// strings, ordering the tools moves structs ten times their size.
func parseEntries(raw map[string]string) ([]Entry, error) {
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	slices.Sort(names)
	entries := make([]Entry, len(names))
	workers := max(1, min(runtime.GOMAXPROCS(0), len(names)/minParsedPart))
	part := (len(names) + workers - 1) / max(workers, 1)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w * part; i < min((w+1)*part, len(names)); i++ {
				if entries[i], errs[w] = ParseEntry(names[i], raw[names[i]]); errs[w] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return entries, nil
}

// minParsedPart is the fewest entries a core parses on its own.
const minParsedPart = 2000

// Read fetches a catalog's version, head, tools, metadata and vectors in
// one MULTI/EXEC round trip, so they are consistent with each other.
func Read(ctx context.Context, c redis.UniversalClient, k Keys) (*Snapshot, error) {
	return read(ctx, c, k, readAll)
}

// readMode is what read reads of a catalog's hashes.
type readMode int

const (
	// readAll reads every field of P:tools, P:metadata and P:embeddings.
	readAll readMode = iota
	// readStaged reads the staged hashes and the fields' names, for
	// ReadWithStaged.
	readStaged
	// readDocument reads P:tools, not P:metadata nor P:embeddings.
	readDocument
)

// Current reports whether P:version under k is still what s read: every
// write of a catalog's hashes sets it, so what is read of them since s
// belongs to s's version when it is.
func (s *Snapshot) Current(ctx context.Context, c redis.UniversalClient, k Keys) (bool, error) {
	v, err := c.Get(ctx, k.Version()).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, fmt.Errorf("reading %s: %w", k.Version(), err)
	}
	return v == s.versionRaw, nil
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
		s, err := read(ctx, c, k, readStaged)
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
	err := ReadFields(ctx, c, k.Tools(), entries, func(name, raw string) {
		parsed.fields++
		if parsed.err != nil {
			return
		}
		e, err := ParseEntry(name, raw)
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
	err = ReadFields(ctx, c, k.Metadata(), metadata, func(name, raw string) {
		m, parseMetadataErr := ParseMetadata(raw)
		s.ParsedMetadata[name] = ParsedMetadata{Metadata: m, Err: parseMetadataErr, Digest: MetadataDigest(raw)}
	})
	if err != nil {
		return false, err
	}
	s.VectorDigests = make(map[string]uint64, len(vectors))
	err = ReadFields(ctx, c, k.Embeddings(), vectors, func(name, vec string) { s.VectorDigests[name] = VectorDigestString(vec) })
	if err != nil {
		return false, err
	}
	s.parsed = parsed
	return parsed.fields == len(entries) && len(s.ParsedMetadata) == len(metadata) && len(s.VectorDigests) == len(vectors), nil
}

// maxReadAttempts bounds ReadWithStaged's reads of a catalog that changes
// while it is read.
const maxReadAttempts = 3

func read(ctx context.Context, c redis.UniversalClient, k Keys, mode readMode) (*Snapshot, error) {
	var version, head, legacy *redis.StringCmd
	var entries, meta, vecs, stagedMeta, stagedVecs *redis.MapStringStringCmd
	var vecNames, entryNames, metaNames *redis.StringSliceCmd
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		version = p.Get(ctx, k.Version())
		head = p.Get(ctx, k.Head())
		legacy = p.Get(ctx, k.Catalog())
		if mode == readStaged {
			entryNames = p.HKeys(ctx, k.Tools())
			metaNames = p.HKeys(ctx, k.Metadata())
			vecNames = p.HKeys(ctx, k.Embeddings())
			stagedMeta = p.HGetAll(ctx, k.StagedMetadata())
			stagedVecs = p.HGetAll(ctx, k.StagedEmbeddings())
			return nil
		}
		entries = p.HGetAll(ctx, k.Tools())
		if mode == readAll {
			meta = p.HGetAll(ctx, k.Metadata())
			vecs = p.HGetAll(ctx, k.Embeddings())
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("reading catalog %s: %w", k.Prefix, err)
	}
	s := &Snapshot{}
	switch mode {
	case readStaged:
		s.entryNames, s.metadataNames, s.vectorNames = entryNames.Val(), metaNames.Val(), vecNames.Val()
		s.StagedMetadata, s.StagedVectors = stagedMeta.Val(), bytesValues(stagedVecs.Val())
	case readAll:
		s.Vectors, s.Metadata = bytesValues(vecs.Val()), meta.Val()
		fallthrough
	default:
		s.Entries = entries.Val()
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

func isTombstone(raw []byte) bool {
	var probe struct {
		Contract int `json:"contract"`
	}
	return json.Unmarshal(raw, &probe) == nil && probe.Contract >= 2
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

// Stamp identifies a stored version cheaply, for a reader (the operator
// among them) that keeps what it read or wrote: P:version, P:head and the
// sizes of the hashes. A version published by another writer, or keys
// deleted by hand, change it.
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

// maxFieldsPerRead bounds the names asked for in one HMGET.
const maxFieldsPerRead = 1000

// ReadVectors reads the published vectors of the named tools from
// P:embeddings, in round trips of up to maxFieldsPerRead names; a tool
// without a vector is left out. The raw vectors are the strings of the
// replies, not copied: AppendVector decodes them as they are.
func ReadVectors(ctx context.Context, c redis.UniversalClient, k Keys, names []string) (map[string]string, error) {
	out := make(map[string]string, len(names))
	if err := ReadFields(ctx, c, k.Embeddings(), names, func(name, vec string) { out[name] = vec }); err != nil {
		return nil, err
	}
	return out, nil
}

// ReadFields reads the named fields of the hash key in round trips of up
// to maxFieldsPerRead names and calls fn with each there is, so a reader
// of a whole catalog holds one round trip's replies at a time.
func ReadFields(ctx context.Context, c redis.UniversalClient, key string, names []string, fn func(name, value string)) error {
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

// VersionKeys lists the keys of versions from, from-1, ... (at most n, not
// below 1): what falls out of retention with a new version. Earlier
// publishes deleted everything older, so n = MaxRetainVersions+1 suffices.
func VersionKeys(key func(int64) string, from int64, n int) []string {
	var keys []string
	for v := from; v >= 1 && v > from-int64(n); v-- {
		keys = append(keys, key(v))
	}
	return keys
}
