package contract

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/text"
)

// MaxRequestLength is the longest request text recorded, in characters;
// longer ones are cut.
const MaxRequestLength = 500

// Recorded is a request that led to a call of a tool, with how often it
// was recorded.
type Recorded struct {
	Tool, Request string
	Count         int64
	// Seen is when it was last recorded.
	Seen time.Time
}

// member encodes a recorded pair as a JSON array [tool, request].
func member(tool, request string) string {
	b, _ := json.Marshal([2]string{tool, request})
	return string(b)
}

// NormalizeRequest is the form a request is recorded in: spaces collapsed,
// trimmed, at most MaxRequestLength characters.
func NormalizeRequest(request string) string {
	return text.Truncate(strings.Join(strings.Fields(request), " "), MaxRequestLength)
}

// RecordRequest counts one request that led to a call of tool. Blank
// requests are ignored.
func RecordRequest(ctx context.Context, c redis.UniversalClient, k Keys, request, tool string, now time.Time) error {
	request = NormalizeRequest(request)
	if request == "" || tool == "" {
		return nil
	}
	m := member(tool, request)
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZIncrBy(ctx, k.Requests(), 1, m)
		p.ZAdd(ctx, k.RequestsSeen(), redis.Z{Score: float64(now.Unix()), Member: m})
		return nil
	})
	if err != nil {
		return fmt.Errorf("recording a request for %s: %w", tool, err)
	}
	return nil
}

// TrimRequests drops the recorded requests last seen before cutoff, then
// the least recorded ones beyond max, and returns what is left.
func TrimRequests(ctx context.Context, c redis.UniversalClient, k Keys, cutoff time.Time, max int) ([]Recorded, error) {
	old, err := c.ZRangeByScore(ctx, k.RequestsSeen(), &redis.ZRangeBy{Min: "-inf", Max: fmt.Sprintf("(%d", cutoff.Unix())}).Result()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", k.RequestsSeen(), err)
	}
	if len(old) > 0 {
		if err := removeRequests(ctx, c, k, old); err != nil {
			return nil, err
		}
	}
	counts, err := c.ZRevRangeWithScores(ctx, k.Requests(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", k.Requests(), err)
	}
	if len(counts) > max {
		var drop []string
		for _, z := range counts[max:] {
			drop = append(drop, z.Member.(string))
		}
		if err := removeRequests(ctx, c, k, drop); err != nil {
			return nil, err
		}
		counts = counts[:max]
	}
	seen, err := c.ZRangeWithScores(ctx, k.RequestsSeen(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", k.RequestsSeen(), err)
	}
	when := make(map[string]time.Time, len(seen))
	for _, z := range seen {
		when[z.Member.(string)] = time.Unix(int64(z.Score), 0)
	}
	out := make([]Recorded, 0, len(counts))
	for _, z := range counts {
		var pair [2]string
		if json.Unmarshal([]byte(z.Member.(string)), &pair) != nil || pair[0] == "" || pair[1] == "" {
			continue // not written by RecordRequest
		}
		out = append(out, Recorded{Tool: pair[0], Request: pair[1], Count: int64(z.Score), Seen: when[z.Member.(string)]})
	}
	return out, nil
}

func removeRequests(ctx context.Context, c redis.UniversalClient, k Keys, members []string) error {
	args := make([]any, len(members))
	for i, m := range members {
		args[i] = m
	}
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRem(ctx, k.Requests(), args...)
		p.ZRem(ctx, k.RequestsSeen(), args...)
		return nil
	})
	if err != nil {
		return fmt.Errorf("trimming recorded requests: %w", err)
	}
	return nil
}

// PurgeRequests deletes every recorded request of a catalog.
func PurgeRequests(ctx context.Context, c redis.UniversalClient, k Keys) error {
	if err := c.Del(ctx, k.Requests(), k.RequestsSeen()).Err(); err != nil {
		return fmt.Errorf("purging recorded requests: %w", err)
	}
	return nil
}
