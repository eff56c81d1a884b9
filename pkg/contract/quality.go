package contract

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Quality is the self-grading of one published version, as the operator
// records it in P:quality: how well the version found its own tools with
// their own queries (see the ToolCatalog's status.quality).
type Quality struct {
	Version int64 `json:"version"`
	// SelfRecallAt5 is the share of graded queries whose tool ranked in
	// the top five, from 0 to 1.
	SelfRecallAt5 float64 `json:"self_recall_at_5"`
	GradedTools   int     `json:"graded_tools"`
	GradedQueries int     `json:"graded_queries"`
	// Outranked and Confusable count the tools some of their own queries
	// missed and the pairs of tools that retrieve each other.
	Outranked  int       `json:"outranked"`
	Confusable int       `json:"confusable"`
	Graded     time.Time `json:"graded"`
}

// RecordQuality keeps the grading of q.Version, replacing an earlier one
// of that version, and drops those of versions older than the last retain
// (at least 1, at most MaxRetainVersions).
func RecordQuality(ctx context.Context, c redis.UniversalClient, k Keys, q Quality, retain int) error {
	b, err := json.Marshal(q)
	if err != nil {
		return err
	}
	retain = min(max(retain, 1), MaxRetainVersions)
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

// ReadQuality reads the gradings kept, oldest first: at most
// MaxRetainVersions, and none that RecordQuality could not have written.
func ReadQuality(ctx context.Context, c redis.UniversalClient, k Keys) ([]Quality, error) {
	zs, err := c.ZRangeWithScores(ctx, k.Quality(), -MaxRetainVersions, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", k.Quality(), err)
	}
	out := make([]Quality, 0, len(zs))
	for _, z := range zs {
		var q Quality
		s, _ := z.Member.(string)
		if len(s) > 1024 || json.Unmarshal([]byte(s), &q) != nil || float64(q.Version) != z.Score ||
			!(q.SelfRecallAt5 >= 0 && q.SelfRecallAt5 <= 1) || q.GradedQueries < 0 || q.GradedTools < 0 {
			continue
		}
		out = append(out, q)
	}
	return out, nil
}
