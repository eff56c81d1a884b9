package contract

// Reading what versions changed: a consumer holding version M reloads only
// the tools versions M+1..N touched, and any retained version can be
// rebuilt from the current one.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"
)

// ErrNotRetained means a change record (or a contract-1 version document)
// needed is no longer kept; publish.retainVersions says how many are.
var ErrNotRetained = errors.New("catalog version is not retained")

// ReadChanges reads the change records of versions from+1 through to in
// one round trip, oldest first; ErrNotRetained when one is gone.
func ReadChanges(ctx context.Context, c redis.UniversalClient, k Keys, from, to int64) ([]Change, error) {
	records, err := readChanges(ctx, c, k, from, to)
	if err != nil {
		return nil, err
	}
	out := make([]Change, len(records))
	for i, ch := range records {
		if ch == nil {
			return nil, fmt.Errorf("%w: %s", ErrNotRetained, k.Changes(from+1+int64(i)))
		}
		out[i] = *ch
	}
	return out, nil
}

// readChanges reads the change records of versions from+1 through to,
// oldest first, nil where one is gone.
func readChanges(ctx context.Context, c redis.UniversalClient, k Keys, from, to int64) ([]*Change, error) {
	if to <= from {
		return nil, nil
	}
	cmds := make([]*redis.StringCmd, 0, to-from)
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for v := from + 1; v <= to; v++ {
			cmds = append(cmds, p.Get(ctx, k.Changes(v)))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("reading the change records of %s: %w", k.Prefix, err)
	}
	out := make([]*Change, len(cmds))
	for i, cmd := range cmds {
		raw, err := cmd.Bytes()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", k.Changes(from+1+int64(i)), err)
		}
		out[i] = &Change{}
		if err := json.Unmarshal(raw, out[i]); err != nil {
			return nil, fmt.Errorf("parsing %s: %w", k.Changes(from+1+int64(i)), err)
		}
	}
	return out, nil
}

// Tools is part of a version: its head, and the entries and vectors of
// some of its tools (a tool absent from Entries is not in the version).
type Tools struct {
	Head    *Head
	Entries map[string]Entry
	Vectors map[string][]byte
}

// ReadTools reads the head and the named tools of version in one
// MULTI/EXEC; ErrConflict when P:version holds another version by then.
func ReadTools(ctx context.Context, c redis.UniversalClient, k Keys, version int64, names []string) (*Tools, error) {
	var ver, head *redis.StringCmd
	var entries, vecs *redis.SliceCmd
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		ver = p.Get(ctx, k.Version())
		head = p.Get(ctx, k.Head())
		if len(names) > 0 {
			entries = p.HMGet(ctx, k.Tools(), names...)
			vecs = p.HMGet(ctx, k.Embeddings(), names...)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("reading tools of %s: %w", k.Prefix, err)
	}
	if v, int64Err := ver.Int64(); int64Err != nil || v != version {
		return nil, ErrConflict
	}
	raw, err := head.Bytes()
	if err != nil {
		return nil, ErrConflict
	}
	t := &Tools{Entries: map[string]Entry{}, Vectors: map[string][]byte{}}
	if t.Head, err = ParseHead(raw); err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return t, nil
	}
	for i, name := range names {
		if s, ok := entries.Val()[i].(string); ok {
			if t.Entries[name], err = ParseEntry(name, s); err != nil {
				return nil, err
			}
		}
		if s, ok := vecs.Val()[i].(string); ok {
			t.Vectors[name] = []byte(s)
		}
	}
	return t, nil
}

// ReadVersion rebuilds the document of a retained version: the current
// document with the change records since applied backwards. A contract-1
// catalog's version is read from P:catalog:v<N>. The pinned version is
// read from its copy (Keys.Pinned), retained or not.
func ReadVersion(ctx context.Context, c redis.UniversalClient, k Keys, n int64) (*Document, error) {
	served, v, err := Served(ctx, c, k)
	if err != nil {
		return nil, err
	}
	if served != k && v == n {
		if d, pinErr := ReadPinned(ctx, c, k); pinErr != nil || d != nil && d.Version == n {
			return d, pinErr
		}
	}
	docs, err := history(ctx, c, k, n)
	if err != nil {
		return nil, err
	}
	if last := docs[len(docs)-1]; last.Version == n {
		return last, nil
	}
	return nil, fmt.Errorf("%w: version %d (current %d)", ErrNotRetained, n, docs[0].Version)
}

// ReadHistory returns the current document and every older one that can
// still be rebuilt, newest first, and last the pinned version when it is
// older than those; none when nothing is published.
func ReadHistory(ctx context.Context, c redis.UniversalClient, k Keys) ([]*Document, error) {
	docs, err := history(ctx, c, k, 0)
	if errors.Is(err, ErrNotRetained) {
		err = nil
	}
	if err != nil || len(docs) == 0 {
		return docs, err
	}
	// The pinned copy is read only when history did not rebuild it.
	served, v, err := Served(ctx, c, k)
	if err != nil || served == k || v >= docs[len(docs)-1].Version {
		return docs, err
	}
	pinned, err := ReadPinned(ctx, c, k)
	if pinned != nil {
		docs = append(docs, pinned)
	}
	return docs, err
}

// ReadPinned returns the document of the pinned version; nil when the
// catalog is not pinned.
func ReadPinned(ctx context.Context, c redis.UniversalClient, k Keys) (*Document, error) {
	s, err := Read(ctx, c, k.Pinned())
	if err != nil {
		return nil, err
	}
	return s.Document()
}

// history rebuilds the documents from the current version down to version
// oldest (the oldest retained when 0), newest first.
func history(ctx context.Context, c redis.UniversalClient, k Keys, oldest int64) ([]*Document, error) {
	snap, err := Read(ctx, c, k)
	if err != nil {
		return nil, err
	}
	doc, err := snap.Document()
	if err != nil || doc == nil {
		return nil, err
	}
	if oldest == 0 {
		oldest = max(doc.Version-MaxRetainVersions, 1)
	}
	if oldest < 1 || oldest > doc.Version {
		return nil, fmt.Errorf("%w: version %d (current %d)", ErrNotRetained, oldest, doc.Version)
	}
	docs := []*Document{doc}
	if snap.Head == nil {
		for v := doc.Version - 1; v >= oldest; v-- {
			raw, readErr := c.Get(ctx, k.CatalogVersion(v)).Bytes()
			if errors.Is(readErr, redis.Nil) {
				return docs, fmt.Errorf("%w: %s", ErrNotRetained, k.CatalogVersion(v))
			}
			if readErr != nil {
				return docs, fmt.Errorf("reading %s: %w", k.CatalogVersion(v), readErr)
			}
			d, parseErr := ParseDocument(raw)
			if parseErr != nil {
				return docs, parseErr
			}
			docs = append(docs, d)
		}
		return docs, nil
	}
	changes, err := readChanges(ctx, c, k, oldest, doc.Version)
	if err != nil {
		return docs, err
	}
	entries := doc.Entries()
	for i, ch := range slices.Backward(changes) {
		if ch == nil || ch.HeadBefore == nil {
			return docs, fmt.Errorf("%w: version %d", ErrNotRetained, oldest+int64(i))
		}
		for _, name := range append(slices.Clone(ch.Updated), ch.Removed...) {
			if e, ok := ch.Before[name]; ok {
				entries[name] = e
			} else {
				delete(entries, name)
			}
		}
		head := *ch.HeadBefore
		list := make([]Entry, 0, len(entries))
		for _, e := range entries {
			list = append(list, e)
		}
		docs = append(docs, Assemble(head, list))
	}
	return docs, nil
}
