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

// Usage is counted in day buckets; MostUsed weighs each day by its age.
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
	// MinUsePrincipals is how many distinct principals must have used a
	// tool on one day of the window before it can be among the most used:
	// one client, however many calls it makes, decides nothing for
	// everyone else.
	MinUsePrincipals = 3
)

// UsageDayOf is the day bucket of t: days since the Unix epoch, UTC.
func UsageDayOf(t time.Time) int64 { return t.UTC().Unix() / 86400 }

// recordUseScript counts one use in the day's bucket unless the
// principal's uses of the tool that day reached the cap, and the
// principal among the tool's users that day on its first use; the keys
// expire when the day leaves the window.
var recordUseScript = redis.NewScript(`
local n = redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
redis.call('EXPIRE', KEYS[2], ARGV[4])
if n == 1 then
  redis.call('ZINCRBY', KEYS[3], 1, ARGV[1])
  redis.call('EXPIRE', KEYS[3], ARGV[4])
end
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
	n, err := recordUseScript.Run(ctx, c, []string{k.UsageDay(day), k.UsageBy(day), k.UsageUsers(day)},
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

// MostUsed returns the n most used tools at now, most used first (ties by
// name): each day's uses of the last UsageWindow days weighted by
// 2^(-age/UsageHalfLife), of the tools MinUsePrincipals distinct
// principals used on one day of the window.
func MostUsed(ctx context.Context, c redis.UniversalClient, k Keys, n int, now time.Time) ([]Used, error) {
	if n <= 0 {
		return nil, nil
	}
	today := UsageDayOf(now)
	uses := redis.ZStore{Aggregate: "SUM"}
	users := redis.ZStore{Aggregate: "MAX"}
	for age := range int64(UsageWindow) {
		uses.Keys = append(uses.Keys, k.UsageDay(today-age))
		uses.Weights = append(uses.Weights, math.Exp2(-float64(age)/UsageHalfLife))
		users.Keys = append(users.Keys, k.UsageUsers(today-age))
	}
	pipe := c.Pipeline()
	allCmd := pipe.ZUnionWithScores(ctx, uses)
	usersCmd := pipe.ZUnionWithScores(ctx, users)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("reading the usage of %s: %w", k.Prefix, err)
	}
	many := map[string]bool{}
	for _, z := range usersCmd.Val() {
		if name, ok := z.Member.(string); ok && z.Score >= MinUsePrincipals {
			many[name] = true
		}
	}
	all := allCmd.Val()
	out := make([]Used, 0, len(all))
	for _, z := range all {
		if name, ok := z.Member.(string); ok && z.Score > 0 && many[name] {
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
