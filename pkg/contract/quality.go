package contract

import (
	"context"
	"encoding/json"
	"fmt"
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

// ReadQuality reads the gradings kept, oldest first: at most
// MaxRetainVersions, and none that the operator could not have written.
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
