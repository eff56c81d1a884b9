package redistest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
)

// Dump renders every key of c's database whose name matches pattern with
// its type and value, in a stable order and in text, for a golden file
// that pins what is written byte for byte: a string quoted, a hash's
// fields sorted, a sorted set's members with their scores, a set sorted, a
// list in order; a value that is not UTF-8 (a vector) by its length and
// SHA-256. Expiries are not part of it.
func Dump(ctx context.Context, c *redis.Client, pattern string) (string, error) {
	var keys []string
	iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return "", err
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, key := range keys {
		typ, err := c.Type(ctx, key).Result()
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s %s\n", typ, strconv.Quote(key))
		var lines []string
		switch typ {
		case "string":
			v, getErr := c.Get(ctx, key).Result()
			if getErr != nil {
				return "", getErr
			}
			lines = []string{quote(v)}
		case "hash":
			m, getErr := c.HGetAll(ctx, key).Result()
			if getErr != nil {
				return "", getErr
			}
			for f, v := range m {
				lines = append(lines, strconv.Quote(f)+" "+quote(v))
			}
			slices.Sort(lines)
		case "zset":
			zs, getErr := c.ZRangeWithScores(ctx, key, 0, -1).Result()
			if getErr != nil {
				return "", getErr
			}
			for _, z := range zs {
				lines = append(lines, strconv.FormatFloat(z.Score, 'g', -1, 64)+" "+quote(fmt.Sprint(z.Member)))
			}
		case "set":
			if lines, err = c.SMembers(ctx, key).Result(); err != nil {
				return "", err
			}
			for i := range lines {
				lines[i] = quote(lines[i])
			}
			slices.Sort(lines)
		case "list":
			if lines, err = c.LRange(ctx, key, 0, -1).Result(); err != nil {
				return "", err
			}
			for i := range lines {
				lines[i] = quote(lines[i])
			}
		default:
			return "", fmt.Errorf("%s: a %s, which Dump does not render", key, typ)
		}
		for _, l := range lines {
			b.WriteString("  " + l + "\n")
		}
	}
	return b.String(), nil
}

// quote is v quoted, or its length and digest when it is not text.
func quote(v string) string {
	if utf8.ValidString(v) {
		return strconv.Quote(v)
	}
	return fmt.Sprintf("<%d bytes, sha256 %x>", len(v), sha256.Sum256([]byte(v)))
}
