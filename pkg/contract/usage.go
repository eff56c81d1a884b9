package contract

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"
)

// Usage is counted in day buckets; TopUsed weighs each day by its age.
const (
	// UsageWindow is how many days of use count: older buckets expire.
	UsageWindow = 28
	// UsageHalfLife is the age in days at which a use counts half, so a
	// tool used heavily last month does not stay on top.
	UsageHalfLife = 7
	// MaxUsesPerPrincipal is the most uses of one tool one principal adds
	// in a day (anonymous callers are one principal): a client calling
	// a tool in a loop cannot make it the catalog's most used.
	MaxUsesPerPrincipal = 20
)

// UsageDayOf is the day bucket of t: days since the Unix epoch, UTC.
func UsageDayOf(t time.Time) int64 { return t.UTC().Unix() / 86400 }

// recordUseScript counts one use in the day's bucket unless the
// principal's uses of the tool that day reached the cap; both keys
// expire when the day leaves the window.
var recordUseScript = redis.NewScript(`
local n = redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
redis.call('EXPIRE', KEYS[2], ARGV[4])
if n > tonumber(ARGV[3]) then return 0 end
redis.call('ZINCRBY', KEYS[1], 1, ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
`)

// RecordUse counts one use of tool by principal at now. Only a hash of
// the principal is stored; a blank tool is ignored. It reports whether the
// use counted (false past MaxUsesPerPrincipal).
func RecordUse(ctx context.Context, c redis.UniversalClient, k Keys, principal, tool string, now time.Time) (bool, error) {
	if tool == "" {
		return false, nil
	}
	day := UsageDayOf(now)
	sum := sha256.Sum256([]byte(principal))
	ttl := int64((UsageWindow + 1) * 86400)
	n, err := recordUseScript.Run(ctx, c, []string{k.UsageDay(day), k.UsageBy(day)},
		tool, hex.EncodeToString(sum[:8])+":"+tool, MaxUsesPerPrincipal, ttl).Int()
	if err != nil {
		return false, fmt.Errorf("recording a use of %s: %w", tool, err)
	}
	return n == 1, nil
}

// Used is a tool's decayed use count.
type Used struct {
	Tool  string
	Score float64
}

// TopUsed returns the n most used tools at now, most used first (ties by
// name): each day's uses of the last UsageWindow days weighted by
// 2^(-age/UsageHalfLife).
func TopUsed(ctx context.Context, c redis.UniversalClient, k Keys, n int, now time.Time) ([]Used, error) {
	if n <= 0 {
		return nil, nil
	}
	today := UsageDayOf(now)
	store := redis.ZStore{Aggregate: "SUM"}
	for age := range int64(UsageWindow) {
		store.Keys = append(store.Keys, k.UsageDay(today-age))
		store.Weights = append(store.Weights, math.Exp2(-float64(age)/UsageHalfLife))
	}
	all, err := c.ZUnionWithScores(ctx, store).Result()
	if err != nil {
		return nil, fmt.Errorf("reading the usage of %s: %w", k.Prefix, err)
	}
	out := make([]Used, 0, len(all))
	for _, z := range all {
		if name, ok := z.Member.(string); ok && z.Score > 0 {
			out = append(out, Used{name, z.Score})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		return out[i].Tool < out[j].Tool
	})
	return out[:min(n, len(out))], nil
}

// usageKeys are every usage key a catalog may hold at now, for deleting
// it: the window's buckets and the day after (a clock ahead of ours).
func usageKeys(k Keys, now time.Time) []string {
	today := UsageDayOf(now)
	keys := []string{k.Usage()}
	for day := today - UsageWindow; day <= today+1; day++ {
		keys = append(keys, k.UsageDay(day), k.UsageBy(day))
	}
	return keys
}
