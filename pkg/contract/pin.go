package contract

// Pinned versions: a catalog whose spec.publish.pinVersion names version N
// is served at N while the operator goes on publishing its newest
// versions. The operator keeps a copy of version N under P:pinned
// (Keys.Pinned); a reader that finds P:pinned:version serves that copy.

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Pinned names the keys of the pinned copy of a catalog: P:pinned:version,
// P:pinned:head, P:pinned:tools, P:pinned:embeddings and
// P:pinned:metadata, laid out as the current version's keys are, so Read
// reads the copy as it reads the current version. P:pinned:version exists
// exactly while the catalog is pinned; the operator writes and deletes
// the copy whole, in one MULTI/EXEC.
func (k Keys) Pinned() Keys { return Keys{Prefix: k.Prefix + ":pinned"} }

// ChangesBefore is P:changes:v<N>:before, a hash of what the tools
// version N updated or removed had in version N-1 besides their entries:
// "vector/<tool>" → the raw vector, "metadata/<tool>" → Metadata JSON. It
// lets the operator rebuild a retained version's vectors to pin it, and
// goes with P:changes:v<N>. A version that changed the embedding model
// keeps none (Change.BeforeKept is false): the vectors of two models are
// never served together.
func (k Keys) ChangesBefore(n int64) string { return k.Changes(n) + ":before" }

// BeforeVectorField and BeforeMetadataField are the fields of
// P:changes:v<N>:before holding a tool's vector and metadata.
func BeforeVectorField(tool string) string { return "vector/" + tool }

// BeforeMetadataField is the field of P:changes:v<N>:before holding a
// tool's metadata; see BeforeVectorField.
func BeforeMetadataField(tool string) string { return "metadata/" + tool }

// Served returns the keys a reader serves and their version: the pinned
// copy's while the catalog is pinned, else the current version's (0 when
// nothing is published). One round trip.
func Served(ctx context.Context, c redis.UniversalClient, k Keys) (Keys, int64, error) {
	vals, err := c.MGet(ctx, k.Pinned().Version(), k.Version()).Result()
	if err != nil {
		return k, 0, fmt.Errorf("reading %s: %w", k.Version(), err)
	}
	for i, served := range []Keys{k.Pinned(), k} {
		s, ok := vals[i].(string)
		if !ok {
			continue
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 1 {
			return k, 0, fmt.Errorf("%s holds %q, not a version number", served.Version(), s)
		}
		return served, v, nil
	}
	return k, 0, nil
}

// ReadServed is Read of the version a reader serves: the pinned copy
// while the catalog is pinned (Served). It reports whether it read the
// pinned copy. A pin set or cleared between the two reads is noticed (the
// copy is written and deleted whole) and read again.
func ReadServed(ctx context.Context, c redis.UniversalClient, k Keys) (*Snapshot, bool, error) {
	s, served, err := readServed(ctx, c, k, readAll)
	return s, served != k, err
}

// ReadServedDocument is ReadServed of the document alone, without
// P:embeddings, most of a large catalog's bytes, and P:metadata, which a
// search never reads: the reader reads the vectors in parts (ReadVectors)
// from the keys it returns, those of the version served, and then checks
// with Snapshot.Current on those keys that the version it read them from
// is still the one stored there.
func ReadServedDocument(ctx context.Context, c redis.UniversalClient, k Keys) (*Snapshot, Keys, error) {
	return readServed(ctx, c, k, readDocument)
}

func readServed(ctx context.Context, c redis.UniversalClient, k Keys, mode readMode) (*Snapshot, Keys, error) {
	for range maxReadAttempts {
		served, _, err := Served(ctx, c, k)
		if err != nil {
			return nil, k, err
		}
		s, err := read(ctx, c, served, mode)
		if err != nil {
			return nil, k, err
		}
		if served == k || s.Head != nil {
			return s, served, nil
		}
		// The copy was deleted after Served found it: unpinned since.
	}
	return nil, k, errors.New("reading catalog " + k.Prefix + ": it was pinned and unpinned during each read")
}
