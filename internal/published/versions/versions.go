// Package versions is the operator's side of the Redis contract of package
// contract (docs/redis-contract.md): it publishes a version in one
// MULTI/EXEC guarded by WATCH on P:version, stages embeddings that
// cannot be published yet, announces versions, and deletes a catalog's
// keys. Consumers only read, with package contract.
package versions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// Update is one version to publish.
type Update struct {
	// ExpectVersion is the version the pass read; the write is refused
	// (contract.ErrConflict) when P:version holds another.
	ExpectVersion int64
	// Document is the new version, sealed, with its Version set.
	Document *contract.Document
	// Previous is the document of ExpectVersion as read. Only the tools
	// whose entry differs from it are written.
	Previous *contract.Document
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
	// Kept names, by index of Document's entries, the entry of Previous
	// each is an unchanged copy of, or -1 (contract.Document.SealKept);
	// nil when not known. Both documents are then taken as sealed, in name
	// order, and only the entries not kept are looked at: at 100,000
	// tools, walking both documents whole read every name twice.
	Kept []int32
}

// legacyTombstone is what P:catalog holds under contract 2: a contract-1
// reader fails to decode "tools", and a person reading the key learns why.
var legacyTombstone = []byte(`{"contract":2,"version":0,"tools":"moved: this catalog is published with version 2 of the Redis contract (P:head, P:tools); upgrade this reader, see docs/redis-contract.md"}`)

// Write publishes an update in one MULTI/EXEC guarded by WATCH on P:version:
// either every key changes or none does. It writes the head, the entries
// that changed, the vectors and metadata given, and the version's change
// record.
func Write(ctx context.Context, c redis.UniversalClient, k contract.Keys, u Update) error {
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
	before, err := keepBefore(ctx, c, k, u, &change)
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
			if old := contract.VersionKeys(k.CatalogVersion, u.ExpectVersion, contract.MaxRetainVersions+1); len(old) > 0 {
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
		p.Del(ctx, k.ChangesBefore(d.Version))
		if len(before) > 0 {
			p.HSet(ctx, k.ChangesBefore(d.Version), before...)
		}
		if old := contract.VersionKeys(k.Changes, d.Version-int64(u.Retain), contract.MaxRetainVersions+1); len(old) > 0 {
			p.Del(ctx, old...)
			p.Del(ctx, contract.VersionKeys(k.ChangesBefore, d.Version-int64(u.Retain), contract.MaxRetainVersions+1)...)
		}
	})
	if err != nil && !errors.Is(err, contract.ErrConflict) {
		return fmt.Errorf("writing catalog %s version %d: %w", k.Prefix, d.Version, err)
	}
	return err
}

// keepBefore reads the vectors and metadata that the tools the change
// record names had in the previous version, as fields of
// P:changes:v<N>:before, and marks the record as keeping them: what
// rebuilding that version for a pin needs (contract.Keys.ChangesBefore).
// A change of embedding model keeps none. It reads before the write's
// WATCH: a version published in between fails the write anyway.
func keepBefore(ctx context.Context, c redis.UniversalClient, k contract.Keys, u Update, change *contract.Change) ([]any, error) {
	if u.Previous == nil || u.Rewrite || u.Previous.Embedding != u.Document.Embedding {
		return nil, nil
	}
	change.BeforeKept = true
	names := make([]string, 0, len(change.Before))
	for name := range change.Before {
		names = append(names, name)
	}
	if len(names) == 0 {
		return nil, nil
	}
	sort.Strings(names)
	var fields []any
	for chunk := range slices.Chunk(names, 1000) {
		var vecs, meta *redis.SliceCmd
		if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			vecs = p.HMGet(ctx, k.Embeddings(), chunk...)
			meta = p.HMGet(ctx, k.Metadata(), chunk...)
			return nil
		}); err != nil {
			return nil, fmt.Errorf("reading the vectors version %d replaces: %w", u.Document.Version, err)
		}
		for i, name := range chunk {
			if v, ok := vecs.Val()[i].(string); ok {
				fields = append(fields, contract.BeforeVectorField(name), v)
			}
			if m, ok := meta.Val()[i].(string); ok {
				fields = append(fields, contract.BeforeMetadataField(name), m)
			}
		}
	}
	return fields, nil
}

// diff finds the entries to set and remove and the change record of an
// update.
func diff(u Update) (set map[string][]byte, removed []string, change contract.Change, err error) {
	change = contract.Change{Version: u.Document.Version, Updated: []string{}, Removed: []string{}, Before: map[string]contract.Entry{}}
	var prevTools []contract.Tool
	if u.Previous != nil {
		prevTools = u.Previous.Tools
		h := u.Previous.Head()
		change.HeadBefore = &h
	}
	set = map[string][]byte{}
	updated := map[string]bool{}
	var doc, prev []int // the documents' name orders; nil when sealed
	if u.Kept != nil && u.Previous != nil && !u.Rewrite && len(u.Kept) == len(u.Document.Tools) {
		removed, err = diffKept(u, set, updated)
	} else {
		doc, prev, removed, err = diffWhole(u, set, updated)
	}
	if err != nil {
		return nil, nil, change, err
	}
	find := func(tools []contract.Tool, order []int, name string) (int, bool) {
		if order == nil {
			return slices.BinarySearchFunc(tools, name, func(t contract.Tool, name string) int { return strings.Compare(t.Name, name) })
		}
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

// diffKept is diff's walk of the entries when u.Kept says which are
// unchanged copies of the previous document's: only the others are
// looked at, and the previous entries no new one stands for are removed.
// It fills set and updated, and returns the names removed.
func diffKept(u Update, set map[string][]byte, updated map[string]bool) (removed []string, err error) {
	tools, prevTools := u.Document.Tools, u.Previous.Tools
	stays := make([]bool, len(prevTools)) // by index: a new entry stands for it
	for i, at := range u.Kept {
		if at >= 0 && int(at) < len(prevTools) {
			stays[at] = true
			continue
		}
		e := u.Document.Entry(i)
		if (i > 0 && tools[i-1].Name == e.Name) || (i+1 < len(tools) && tools[i+1].Name == e.Name) {
			return nil, fmt.Errorf("the document lists tool %s twice", e.Name)
		}
		j, ok := slices.BinarySearchFunc(prevTools, e.Name, func(t contract.Tool, name string) int { return strings.Compare(t.Name, name) })
		if ok {
			stays[j] = true
			if u.Previous.Entry(j).Equal(e) {
				continue
			}
		}
		if err = setEntry(set, updated, e); err != nil {
			return nil, err
		}
	}
	for j, ok := range stays {
		if !ok {
			removed = append(removed, prevTools[j].Name)
		}
	}
	return removed, nil
}

// diffWhole is diff's walk of every entry of both documents, in name
// order, side by side: at 50,000 tools, a map of either's names costs
// more than the rest of a publish. It fills set and updated, and returns
// both documents' name orders and the names removed.
func diffWhole(u Update, set map[string][]byte, updated map[string]bool) (doc, prev []int, removed []string, err error) {
	var prevTools []contract.Tool
	if u.Previous != nil {
		prevTools = u.Previous.Tools
	}
	// A sealed document is in name order already.
	doc, prev = inNameOrder(u.Document.Tools), inNameOrder(prevTools)
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
	for i, j := 0, 0; i < len(doc) || j < len(prev); {
		if i == len(doc) || j < len(prev) && prevName(j) < docName(i) {
			removed = append(removed, prevName(j))
			j++
			continue
		}
		e := u.Document.Entry(doc[i])
		if i > 0 && docName(i-1) == e.Name {
			// P:tools holds one entry a name: the head's count would lie.
			return nil, nil, nil, fmt.Errorf("the document lists tool %s twice", e.Name)
		}
		i++
		if j < len(prev) && prevName(j) == e.Name {
			j++
			if u.Previous.Entry(prev[j-1]).Equal(e) && !u.Rewrite {
				continue
			}
		}
		if err = setEntry(set, updated, e); err != nil {
			return nil, nil, nil, err
		}
	}
	return doc, prev, removed, nil
}

// setEntry marks e to be written, encoded, and its tool as updated.
func setEntry(set map[string][]byte, updated map[string]bool, e contract.Entry) error {
	raw, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encoding the entry of %s: %w", e.Name, err)
	}
	set[e.Name], updated[e.Name] = raw, true
	return nil
}

// inNameOrder returns the positions of tools in name order, those of
// equal names in the order they come: 0, 1, … when the tools are in name
// order already, as a sealed document's are.
func inNameOrder(tools []contract.Tool) []int {
	order := make([]int, len(tools))
	for i := range order {
		order[i] = i
	}
	if !slices.IsSortedFunc(tools, func(a, b contract.Tool) int { return strings.Compare(a.Name, b.Name) }) {
		slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(tools[a].Name, tools[b].Name) })
	}
	return order
}

// guarded runs the commands of fn in one MULTI/EXEC, only when P:version
// holds expect (contract.ErrConflict otherwise, or when it changes before EXEC).
func guarded(ctx context.Context, c redis.UniversalClient, k contract.Keys, expect int64, fn func(redis.Pipeliner)) error {
	err := c.Watch(ctx, func(tx *redis.Tx) error {
		current, err := tx.Get(ctx, k.Version()).Int64()
		if errors.Is(err, redis.Nil) {
			current, err = 0, nil
		}
		if err != nil {
			return fmt.Errorf("checking %s: %w", k.Version(), err)
		}
		if current != expect {
			return contract.ErrConflict
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			fn(p)
			return nil
		})
		return err
	}, k.Version())
	if errors.Is(err, redis.TxFailedErr) {
		return contract.ErrConflict
	}
	return err
}

// Stage keeps re-embedded tools that cannot be published yet in the staged
// hashes, guarded like Write by WATCH on P:version: nothing is staged when
// another writer published since the pass read.
func Stage(ctx context.Context, c redis.UniversalClient, k contract.Keys, expectVersion int64, vectors, metadata map[string][]byte) error {
	if len(vectors) == 0 {
		return nil
	}
	err := guarded(ctx, c, k, expectVersion, func(p redis.Pipeliner) {
		p.HSet(ctx, k.StagedEmbeddings(), flatten(vectors)...)
		p.HSet(ctx, k.StagedMetadata(), flatten(metadata)...)
	})
	if err != nil && !errors.Is(err, contract.ErrConflict) {
		return fmt.Errorf("staging embeddings of catalog %s: %w", k.Prefix, err)
	}
	return err
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
func Delete(ctx context.Context, c redis.UniversalClient, k contract.Keys) error {
	version, err := c.Get(ctx, k.Version()).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("reading %s: %w", k.Version(), err)
	}
	if err := c.Del(ctx, contract.DeletedKeys(k, version, time.Now())...).Err(); err != nil {
		return fmt.Errorf("deleting catalog %s: %w", k.Prefix, err)
	}
	return nil
}
