package versions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// ReadStamp reads a catalog's stamp and its staged entries in one
// MULTI/EXEC: a few small replies, whatever the catalog's size, plus
// whatever is staged.
func ReadStamp(ctx context.Context, c redis.UniversalClient, k contract.Keys) (contract.Stamp, *contract.Snapshot, error) {
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
		return contract.Stamp{}, nil, fmt.Errorf("reading catalog %s: %w", k.Prefix, err)
	}
	st := contract.Stamp{Head: head.Val(), Tools: tools.Val(), Vectors: vecs.Val(), Metadata: meta.Val()}
	if v, err := version.Result(); err == nil {
		st.Version, _ = strconv.ParseInt(v, 10, 64)
	}
	return st, &contract.Snapshot{StagedMetadata: stagedMeta.Val(), StagedVectors: bytesOf(stagedVecs.Val())}, nil
}

// bytesOf is m with its values as bytes.
func bytesOf(m map[string]string) map[string][]byte {
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = []byte(v)
	}
	return out
}

// RecordQuality keeps the grading of q.Version, replacing an earlier one
// of that version, and drops those of versions older than the last retain
// (at least 1, at most contract.MaxRetainVersions).
func RecordQuality(ctx context.Context, c redis.UniversalClient, k contract.Keys, q contract.Quality, retain int) error {
	b, err := json.Marshal(q)
	if err != nil {
		return err
	}
	retain = min(max(retain, 1), contract.MaxRetainVersions)
	v := strconv.FormatInt(q.Version, 10)
	_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRemRangeByScore(ctx, k.Quality(), v, v)
		p.ZAdd(ctx, k.Quality(), redis.Z{Score: float64(q.Version), Member: string(b)})
		p.ZRemRangeByScore(ctx, k.Quality(), "-inf", "("+strconv.FormatInt(q.Version-int64(retain)+1, 10))
		return nil
	})
	if err != nil {
		return fmt.Errorf("recording the grading of version %d: %w", q.Version, err)
	}
	return nil
}
