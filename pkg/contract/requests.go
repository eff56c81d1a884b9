package contract

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolcatalog/tool-catalog-operator/pkg/clip"
)

// MaxRequestLength is the longest request text recorded, in characters;
// longer ones are cut.
const MaxRequestLength = 500

// MaxTeachers is the most distinct principals counted for one recorded
// request: enough for any threshold a catalog sets.
const MaxTeachers = 16

// Recorded is a request that led to a call of a tool, with how often it
// was recorded and by how many distinct principals.
type Recorded struct {
	Tool, Request string
	Count         int64
	// Principals is how many distinct principals made the request (at
	// most MaxTeachers).
	Principals int
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
	return clip.Truncate(strings.Join(strings.Fields(request), " "), MaxRequestLength)
}

// recordScript counts a call and its principal in one step: the count in
// P:requests, the time in P:requests:seen, and the principal's hash in
// P:requests:by when it is new and fewer than MaxTeachers are there.
var recordScript = redis.NewScript(`
local by = redis.call('HGET', KEYS[3], ARGV[1])
local list = {}
if by then
  for h in string.gmatch(by, '[^,]+') do list[#list + 1] = h end
end
local known = false
for _, h in ipairs(list) do if h == ARGV[2] then known = true end end
if not known and #list < tonumber(ARGV[4]) then
  list[#list + 1] = ARGV[2]
  redis.call('HSET', KEYS[3], ARGV[1], table.concat(list, ','))
end
redis.call('ZINCRBY', KEYS[1], 1, ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return #list
`)

// RecordRequest counts one request of principal that led to a call of
// tool. Blank requests and calls without a principal are ignored: a
// request is learned when enough distinct principals made it, so one who
// cannot be told apart from the others counts for nothing. Only a hash of
// the principal is stored.
func RecordRequest(ctx context.Context, c redis.UniversalClient, k Keys, principal, request, tool string, now time.Time) error {
	request = NormalizeRequest(request)
	if request == "" || tool == "" || principal == "" {
		return nil
	}
	sum := sha256.Sum256([]byte(principal))
	err := recordScript.Run(ctx, c, []string{k.Requests(), k.RequestsSeen(), k.RequestsBy()},
		member(tool, request), hex.EncodeToString(sum[:8]), now.Unix(), MaxTeachers).Err()
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
		if removeRequestsErr := removeRequests(ctx, c, k, old); removeRequestsErr != nil {
			return nil, removeRequestsErr
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
		if removeRequestsErr := removeRequests(ctx, c, k, drop); removeRequestsErr != nil {
			return nil, removeRequestsErr
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
	by, err := c.HGetAll(ctx, k.RequestsBy()).Result()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", k.RequestsBy(), err)
	}
	out := make([]Recorded, 0, len(counts))
	for _, z := range counts {
		var pair [2]string
		if json.Unmarshal([]byte(z.Member.(string)), &pair) != nil || pair[0] == "" || pair[1] == "" {
			continue // not written by RecordRequest
		}
		principals := 0
		if list := by[z.Member.(string)]; list != "" {
			principals = strings.Count(list, ",") + 1
		}
		out = append(out, Recorded{Tool: pair[0], Request: pair[1], Count: int64(z.Score), Principals: principals, Seen: when[z.Member.(string)]})
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
		p.HDel(ctx, k.RequestsBy(), members...)
		return nil
	})
	if err != nil {
		return fmt.Errorf("trimming recorded requests: %w", err)
	}
	return nil
}

// Teachers returns how many distinct principals made each of a tool's
// requests (0 for one no longer recorded).
func Teachers(ctx context.Context, c redis.UniversalClient, k Keys, tool string, requests []string) (map[string]int, error) {
	out := make(map[string]int, len(requests))
	if len(requests) == 0 {
		return out, nil
	}
	fields := make([]string, len(requests))
	for i, r := range requests {
		fields[i] = member(tool, r)
	}
	vals, err := c.HMGet(ctx, k.RequestsBy(), fields...).Result()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", k.RequestsBy(), err)
	}
	for i, v := range vals {
		if list, ok := v.(string); ok && list != "" {
			out[requests[i]] = strings.Count(list, ",") + 1
		} else {
			out[requests[i]] = 0
		}
	}
	return out, nil
}

// PurgeRequests deletes every recorded request of a catalog.
func PurgeRequests(ctx context.Context, c redis.UniversalClient, k Keys) error {
	if err := c.Del(ctx, k.Requests(), k.RequestsSeen(), k.RequestsBy()).Err(); err != nil {
		return fmt.Errorf("purging recorded requests: %w", err)
	}
	return nil
}
