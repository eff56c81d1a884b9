package contract

// Reading and writing catalogs: one round trip to read a catalog's state,
// one MULTI/EXEC to publish a version, PUBLISH after EXEC.

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// MaxRetainVersions bounds spec.publish.retainVersions (the CRD says the
// same; a test holds them together); versions older than
// this many are always gone, which bounds the keys a publish must delete.
const MaxRetainVersions = 100

// ErrConflict means another writer published a version between this pass's
// read and its write; nothing was written.
var ErrConflict = errors.New("the catalog's version in Redis changed during the pass; nothing was written")

// Snapshot is a catalog's state in Redis.
type Snapshot struct {
	// Version is P:version, 0 when absent.
	Version int64
	// Document is P:catalog, nil when absent.
	Document []byte
	// Metadata is P:metadata.
	Metadata map[string]string
	// Vectors is P:embeddings.
	Vectors map[string][]byte
}

// Read fetches a catalog's version, document, metadata and vectors in one
// MULTI/EXEC round trip, so they are consistent with each other.
func Read(ctx context.Context, c redis.UniversalClient, k Keys) (*Snapshot, error) {
	var version, doc *redis.StringCmd
	var meta, vecs *redis.MapStringStringCmd
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		version = p.Get(ctx, k.Version())
		doc = p.Get(ctx, k.Catalog())
		meta = p.HGetAll(ctx, k.Metadata())
		vecs = p.HGetAll(ctx, k.Embeddings())
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("reading catalog %s: %w", k.Prefix, err)
	}
	s := &Snapshot{Metadata: meta.Val(), Vectors: make(map[string][]byte, len(vecs.Val()))}
	for name, v := range vecs.Val() {
		s.Vectors[name] = []byte(v)
	}
	if v, err := version.Result(); err == nil {
		if s.Version, err = strconv.ParseInt(v, 10, 64); err != nil {
			return nil, fmt.Errorf("reading catalog %s: %s holds %q, not a version number", k.Prefix, k.Version(), v)
		}
	}
	if d, err := doc.Bytes(); err == nil {
		s.Document = d
	}
	return s, nil
}

// Update is one version to publish.
type Update struct {
	// ExpectVersion is the version the pass read; the write is refused
	// (ErrConflict) when P:version holds another.
	ExpectVersion int64
	// Version is the new version; its document goes to P:catalog and
	// P:catalog:v<Version>.
	Version  int64
	Document []byte
	// Vectors and Metadata are set per tool; Remove deletes tools from
	// both hashes.
	Vectors  map[string][]byte
	Metadata map[string][]byte
	Remove   []string
	// Retain is how many versions, the new one included, keep their
	// P:catalog:v<N> key.
	Retain int
}

// Write publishes an update in one MULTI/EXEC guarded by WATCH on P:version:
// either every key changes or none does.
func Write(ctx context.Context, c redis.UniversalClient, k Keys, u Update) error {
	if u.Version <= u.ExpectVersion || len(u.Document) == 0 || u.Retain < 1 {
		return fmt.Errorf("invalid update: version %d after %d, %d document bytes, retain %d", u.Version, u.ExpectVersion, len(u.Document), u.Retain)
	}
	err := c.Watch(ctx, func(tx *redis.Tx) error {
		current, err := tx.Get(ctx, k.Version()).Int64()
		if errors.Is(err, redis.Nil) {
			current, err = 0, nil
		}
		if err != nil {
			return fmt.Errorf("checking %s: %w", k.Version(), err)
		}
		if current != u.ExpectVersion {
			return ErrConflict
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, k.Catalog(), u.Document, 0)
			p.Set(ctx, k.CatalogVersion(u.Version), u.Document, 0)
			p.Set(ctx, k.Version(), u.Version, 0)
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
			if old := expiredVersions(k, u.Version, u.Retain); len(old) > 0 {
				p.Del(ctx, old...)
			}
			return nil
		})
		return err
	}, k.Version())
	if errors.Is(err, redis.TxFailedErr) {
		return ErrConflict
	}
	if err != nil && !errors.Is(err, ErrConflict) {
		return fmt.Errorf("writing catalog %s version %d: %w", k.Prefix, u.Version, err)
	}
	return err
}

// expiredVersions lists the version keys that fall out of retention with
// this version. Earlier publishes deleted everything older, so the window
// is bounded by MaxRetainVersions.
func expiredVersions(k Keys, version int64, retain int) []string {
	var keys []string
	for n := version - int64(retain); n >= 1 && n > version-int64(retain)-MaxRetainVersions-1; n-- {
		keys = append(keys, k.CatalogVersion(n))
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

// Delete removes every key of a catalog; deleting an absent catalog is not
// an error.
func Delete(ctx context.Context, c redis.UniversalClient, k Keys) error {
	version, err := c.Get(ctx, k.Version()).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("reading %s: %w", k.Version(), err)
	}
	keys := []string{k.Catalog(), k.Version(), k.Embeddings(), k.Metadata(), k.Usage()}
	for n := version; n >= 1 && n > version-MaxRetainVersions-1; n-- {
		keys = append(keys, k.CatalogVersion(n))
	}
	if err := c.Del(ctx, keys...).Err(); err != nil {
		return fmt.Errorf("deleting catalog %s: %w", k.Prefix, err)
	}
	return nil
}
