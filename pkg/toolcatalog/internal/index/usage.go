package index

// What a consumer records of its calls, and reads back: the most used
// tools, and the requests a catalog learns from.

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// MostUsed returns the most used tools of cat, most used first: as many
// as it asks for (search always_include_top_n_used) of those it holds;
// none for a nil catalog or one that asks for none. Uses are those of the
// last contract.UsageWindow days, each day's counting half as much every
// contract.UsageHalfLife days (contract.MostUsed).
func MostUsed(ctx context.Context, c redis.UniversalClient, keys contract.Keys, cat *Catalog) ([]string, error) {
	if cat == nil || cat.Document.Search.AlwaysIncludeTopNUsed <= 0 {
		return nil, nil
	}
	n := cat.Document.Search.AlwaysIncludeTopNUsed
	// Tools since removed keep their uses for a while: read a few more
	// than wanted.
	used, err := contract.MostUsed(ctx, c, keys, n+mostUsedSlack, time.Now())
	if err != nil {
		return nil, err
	}
	var top []string
	for _, u := range used {
		if _, ok := cat.Tool(u.Tool); ok && len(top) < n {
			top = append(top, u.Tool)
		}
	}
	return top, nil
}

// mostUsedSlack is how many more used tools than wanted are read, in case
// some left the catalog.
const mostUsedSlack = 10

// RecordUsage counts a call of a tool of cat by principal that succeeded,
// in the catalog's usage (the P:usage:d<day> buckets), which MostUsed
// reads. A tool cat does not hold counts for nothing, and one principal
// counts at most contract.MaxUsesPerPrincipal times a tool a day
// (anonymous callers, principal "", are one principal). Record only calls
// that succeeded.
func RecordUsage(ctx context.Context, c redis.UniversalClient, keys contract.Keys, cat *Catalog, principal, tool string) error {
	if cat == nil {
		return nil
	}
	if _, ok := cat.Tool(tool); !ok {
		return nil
	}
	_, err := contract.RecordUse(ctx, c, keys, principal, tool, time.Now())
	return err
}

// RecordRequest records that principal's request led to a call of a tool
// of cat that succeeded, in the catalog's capped request log
// (P:requests), when the catalog learns from requests (spec.learning);
// for any other catalog, a tool it does not hold, or a call without a
// principal, it records nothing. Record only calls whose arguments were
// valid and that succeeded, and only for authenticated principals: a
// catalog learns a request when enough distinct principals made it. The
// request text is stored, the principal only as a hash: see
// docs/learning.md for retention, privacy and purging. Call.Request is
// the request behind a bridge tool_call.
func RecordRequest(ctx context.Context, c redis.UniversalClient, keys contract.Keys, cat *Catalog, principal, request, tool string) error {
	if cat == nil || !cat.Document.Search.LearnFromRequests {
		return nil
	}
	if _, ok := cat.Tool(tool); !ok {
		return nil
	}
	return contract.RecordRequest(ctx, c, keys, principal, request, tool, time.Now())
}
