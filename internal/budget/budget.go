// Package budget shares what a binary spends a request to the API server
// on (a TokenReview of a token it has not seen lately) among the clients
// asking: each source, a client's address, takes from a bucket of its
// own before anything is spent, so one source sending made-up tokens
// uses up its share, not everybody's.
package budget

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// MaxSources bounds the sources with a bucket of their own; past it,
// sources not seen lately share one.
const MaxSources = 4096

// PerSource is a bucket of Limit a second, in bursts of Burst, for each
// source. The zero Limit allows everything. It is safe for concurrent
// use.
type PerSource struct {
	Limit rate.Limit
	Burst int

	mu       sync.Mutex
	m        map[string]*bucket
	overflow *rate.Limiter
	// swept is when sources idle for a minute were last dropped.
	swept time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// Allow takes one from source's bucket.
func (p *PerSource) Allow(source string) bool {
	if p.Limit <= 0 {
		return true
	}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]*bucket{}
		p.overflow = rate.NewLimiter(p.Limit, p.Burst)
	}
	b := p.m[source]
	// A full table is swept at most once a second: a flood of new
	// sources costs no walk of it each.
	if b == nil && len(p.m) >= MaxSources && now.Sub(p.swept) > time.Second {
		p.swept = now
		for k, o := range p.m {
			if now.Sub(o.seen) > time.Minute {
				delete(p.m, k)
			}
		}
	}
	if b == nil {
		if len(p.m) >= MaxSources {
			return p.overflow.AllowN(now, 1)
		}
		b = &bucket{lim: rate.NewLimiter(p.Limit, p.Burst)}
		p.m[source] = b
	}
	b.seen = now
	return b.lim.AllowN(now, 1)
}
