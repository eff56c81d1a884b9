package versions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// ErrCannotPin means the version asked for cannot be rebuilt: it is not
// published yet, its change records are no longer retained, or they keep
// no vectors (a change of embedding model since, or versions published
// before records kept them). The error says which.
var ErrCannotPin = errors.New("the version cannot be pinned")

// ErrTampered wraps ErrCannotPin for a version whose rebuilt copy is not
// the one published.
var ErrTampered = fmt.Errorf("%w: its change records were altered", ErrCannotPin)

// Pin writes the copy of version n that readers serve while the catalog
// is pinned (contract.Keys.Pinned), guarded like Write by WATCH on
// P:version: cur is the current document as the pass read it. Version n
// is the current one with the change records since applied backwards,
// vectors and metadata included (contract.Keys.ChangesBefore); everything
// is written in one MULTI/EXEC. It returns the pinned document.
//
// published, when set, is the schema hash version n had when the operator
// published it: a version rebuilt from the change records (which anyone
// who may write the catalog's Redis could change) that hashes otherwise
// is refused with ErrTampered, and nothing is written.
func Pin(ctx context.Context, c redis.UniversalClient, k contract.Keys, cur *contract.Document, n int64, published string) (*contract.Document, error) {
	if cur == nil || n < 1 || n > cur.Version {
		latest := int64(0)
		if cur != nil {
			latest = cur.Version
		}
		return nil, fmt.Errorf("%w: version %d is not published (the latest is %d)", ErrCannotPin, n, latest)
	}
	back, err := readBack(ctx, c, k, cur, n)
	if err != nil {
		return nil, err
	}
	if published != "" {
		check := *back.doc
		check.Tools = slices.Clone(back.doc.Tools)
		if sealErr := check.Seal(); sealErr != nil || check.SchemaHash != published {
			return nil, fmt.Errorf("%w: version %d rebuilt from the change records in Redis hashes to %.12s, not to %.12s as published: a record was changed after it was written", ErrTampered, n, check.SchemaHash, published)
		}
	}
	pinned := k.Pinned()
	err = guarded(ctx, c, k, cur.Version, func(p redis.Pipeliner) {
		p.Del(ctx, pinned.Head(), pinned.Tools(), pinned.Embeddings(), pinned.Metadata())
		for _, key := range [][2]string{{k.Tools(), pinned.Tools()}, {k.Embeddings(), pinned.Embeddings()}, {k.Metadata(), pinned.Metadata()}} {
			p.Do(ctx, "copy", key[0], key[1], "replace")
		}
		back.write(ctx, p, pinned)
		p.Set(ctx, pinned.Version(), n, 0)
	})
	if err != nil {
		if !errors.Is(err, contract.ErrConflict) {
			err = fmt.Errorf("pinning catalog %s at version %d: %w", k.Prefix, n, err)
		}
		return nil, err
	}
	return back.doc, nil
}

// Unpin deletes the pinned copy: readers serve the current version
// again. It reports whether there was one.
func Unpin(ctx context.Context, c redis.UniversalClient, k contract.Keys) (bool, error) {
	p := k.Pinned()
	n, err := c.Del(ctx, p.Version(), p.Head(), p.Tools(), p.Embeddings(), p.Metadata()).Result()
	if err != nil {
		return false, fmt.Errorf("unpinning catalog %s: %w", k.Prefix, err)
	}
	return n > 0, nil
}

// back is what version n had where it differs from the current one: the
// head, and per tool its entry, vector and metadata (nil: none).
type back struct {
	doc      *contract.Document
	head     []byte
	entries  map[string][]byte
	vectors  map[string]*string
	metadata map[string]*string
}

// readBack rebuilds version n from cur and the change records since.
func readBack(ctx context.Context, c redis.UniversalClient, k contract.Keys, cur *contract.Document, n int64) (*back, error) {
	h := cur.Head()
	b := &back{entries: map[string][]byte{}, vectors: map[string]*string{}, metadata: map[string]*string{}}
	changes, err := contract.ReadChanges(ctx, c, k, n, cur.Version)
	if errors.Is(err, contract.ErrNotRetained) {
		return nil, fmt.Errorf("%w: %v", ErrCannotPin, err)
	}
	if err != nil {
		return nil, err
	}
	befores := make([]*redis.MapStringStringCmd, len(changes))
	if _, pipeErr := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range changes {
			befores[i] = p.HGetAll(ctx, k.ChangesBefore(n+1+int64(i)))
		}
		return nil
	}); pipeErr != nil {
		return nil, fmt.Errorf("reading the change records of %s: %w", k.Prefix, pipeErr)
	}
	entries := cur.Entries()
	for i, ch := range slices.Backward(changes) {
		v := n + 1 + int64(i)
		if !ch.BeforeKept || ch.HeadBefore == nil || ch.HeadBefore.Embedding != cur.Embedding {
			return nil, fmt.Errorf("%w: version %d changed the embedding model or was published before versions kept their vectors; pin version %d or later", ErrCannotPin, v, v)
		}
		kept := befores[i].Val()
		for _, name := range append(slices.Clone(ch.Updated), ch.Removed...) {
			e, ok := ch.Before[name]
			if !ok {
				delete(entries, name)
				b.entries[name], b.vectors[name], b.metadata[name] = nil, nil, nil
				continue
			}
			entries[name] = e
			if b.entries[name], err = json.Marshal(e); err != nil {
				return nil, fmt.Errorf("encoding the entry of %s: %w", name, err)
			}
			b.vectors[name], b.metadata[name] = field(kept, contract.BeforeVectorField(name)), field(kept, contract.BeforeMetadataField(name))
		}
		h = *ch.HeadBefore
	}
	if h.Version != n {
		return nil, fmt.Errorf("%w: the record of version %d names version %d before it", ErrCannotPin, n+1, h.Version)
	}
	list := make([]contract.Entry, 0, len(entries))
	for _, e := range entries {
		list = append(list, e)
	}
	if len(list) != h.ToolCount {
		return nil, fmt.Errorf("%w: version %d rebuilt holds %d tools, its head says %d", ErrCannotPin, n, len(list), h.ToolCount)
	}
	b.doc = contract.Assemble(h, list)
	if b.head, err = json.Marshal(h); err != nil {
		return nil, fmt.Errorf("encoding the head of version %d: %w", n, err)
	}
	return b, nil
}

func field(m map[string]string, name string) *string {
	if v, ok := m[name]; ok {
		return &v
	}
	return nil
}

// write sets the pinned copy's head and the tools where version n
// differs from the copied current version.
func (b *back) write(ctx context.Context, p redis.Pipeliner, pinned contract.Keys) {
	p.Set(ctx, pinned.Head(), b.head, 0)
	for _, hash := range []struct {
		key    string
		values map[string]*string
	}{{pinned.Embeddings(), b.vectors}, {pinned.Metadata(), b.metadata}} {
		for name, v := range hash.values {
			if v == nil {
				p.HDel(ctx, hash.key, name)
			} else {
				p.HSet(ctx, hash.key, name, *v)
			}
		}
	}
	for name, e := range b.entries {
		if e == nil {
			p.HDel(ctx, pinned.Tools(), name)
		} else {
			p.HSet(ctx, pinned.Tools(), name, e)
		}
	}
}
