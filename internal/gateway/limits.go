package gateway

import (
	"math"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limits bound what one client can make the gateway do. Every field has
// a default (DefaultLimits) used when it is zero.
type Limits struct {
	// RequestBytes bounds an HTTP request body; larger ones get 413.
	RequestBytes int64
	// SessionIdle closes a session that sends nothing for this long.
	SessionIdle time.Duration
	// SessionLifetime closes a session this long after it opened, however
	// busy: a client opens a new one (and is authenticated again).
	SessionLifetime time.Duration
	// SessionsPerPrincipal bounds the open sessions of one principal on
	// one catalog; one more gets 429.
	SessionsPerPrincipal int
	// SearchesPerSecond and CallsPerSecond are each principal's sustained
	// rates of tool_search and of other tool calls, with bursts of twice
	// as many; past them, 429 with Retry-After.
	SearchesPerSecond, CallsPerSecond float64
	// UpstreamResultBytes and UpstreamResultValues bound what an upstream
	// server may answer to one call, in bytes and in JSON values (what a
	// result costs once decoded follows its values: 4 MiB of small
	// objects took 100 MiB); a larger result is a tool error.
	UpstreamResultBytes  int64
	UpstreamResultValues int64
	// LearnedPerMinute is how many requests of one principal a learning
	// catalog records a minute (in bursts of as many); the rest are not
	// recorded.
	LearnedPerMinute float64
	// ListensPerPrincipal and Listens bound the subscriptions/listen
	// streams (protocol 2026-07-28) a replica holds open for one
	// principal, over every catalog, and for everyone; one more gets 429.
	// Each holds a request and its goroutines for as long as it lasts.
	ListensPerPrincipal, Listens int
}

// DefaultLimits are the limits of a gateway that sets none.
var DefaultLimits = Limits{
	RequestBytes:         1 << 20,
	SessionIdle:          30 * time.Minute,
	SessionLifetime:      24 * time.Hour,
	SessionsPerPrincipal: 32,
	SearchesPerSecond:    20,
	CallsPerSecond:       20,
	UpstreamResultBytes:  4 << 20,
	UpstreamResultValues: 20_000,
	LearnedPerMinute:     6,
	ListensPerPrincipal:  16,
	Listens:              4096,
}

// withDefaults takes DefaultLimits for the fields that are not positive.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	positive(&l.RequestBytes, d.RequestBytes)
	positive(&l.SessionIdle, d.SessionIdle)
	positive(&l.SessionLifetime, d.SessionLifetime)
	positive(&l.SessionsPerPrincipal, d.SessionsPerPrincipal)
	positive(&l.SearchesPerSecond, d.SearchesPerSecond)
	positive(&l.CallsPerSecond, d.CallsPerSecond)
	positive(&l.UpstreamResultBytes, d.UpstreamResultBytes)
	positive(&l.UpstreamResultValues, d.UpstreamResultValues)
	positive(&l.LearnedPerMinute, d.LearnedPerMinute)
	positive(&l.ListensPerPrincipal, d.ListensPerPrincipal)
	positive(&l.Listens, d.Listens)
	return l
}

// positive sets *v to def unless it is above zero.
func positive[T int | int64 | float64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// rates holds each principal's rate limiters.
type rates struct {
	searches, calls, learned rate.Limit
	learnBurst               int

	mu  sync.Mutex
	per map[string]*principalRates
}

type principalRates struct {
	search, call, learn *rate.Limiter
	used                time.Time
}

func newRates(l Limits) *rates {
	return &rates{searches: rate.Limit(l.SearchesPerSecond), calls: rate.Limit(l.CallsPerSecond),
		learned: rate.Limit(l.LearnedPerMinute / 60), learnBurst: max(int(l.LearnedPerMinute), 1), per: map[string]*principalRates{}}
}

// of returns a principal's limiters.
func (r *rates) of(principal string) *principalRates {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.per[principal]
	if p == nil {
		p = &principalRates{search: rate.NewLimiter(r.searches, int(2*r.searches)+1), call: rate.NewLimiter(r.calls, int(2*r.calls)+1),
			learn: rate.NewLimiter(r.learned, r.learnBurst)}
		r.per[principal] = p
	}
	p.used = time.Now()
	return p
}

// learn reports whether a principal's request may be recorded now.
func (r *rates) learn(principal string) bool { return r.of(principal).learn.Allow() }

// reserve takes one search or call from the principal's budget, or says
// how long to wait.
func (r *rates) reserve(principal string, search bool) (time.Duration, bool) {
	p := r.of(principal)
	l := p.call
	if search {
		l = p.search
	}
	res := l.Reserve()
	if d := res.Delay(); d > 0 {
		res.Cancel()
		return d, false
	}
	return 0, true
}

// forget drops the limiters of principals idle for longer than idle:
// theirs are full again by then.
func (r *rates) forget(idle time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, p := range r.per {
		if time.Since(p.used) > idle {
			delete(r.per, k)
		}
	}
}

// retryAfter is a Retry-After value: whole seconds, at least one.
func retryAfter(d time.Duration) string {
	return strconv.Itoa(int(math.Ceil(max(d.Seconds(), 1))))
}

// listens counts the subscriptions/listen streams a replica holds open,
// by principal.
type listens struct {
	perPrincipal, total int

	mu    sync.Mutex
	open  map[string]int
	count int
}

func newListens(l Limits) *listens {
	return &listens{perPrincipal: l.ListensPerPrincipal, total: l.Listens, open: map[string]int{}}
}

// acquire takes a stream for principal (a Principal.key), false when it
// or the replica holds as many as allowed; release gives it back.
func (ls *listens) acquire(principal string) (release func(), ok bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.open[principal] >= ls.perPrincipal || ls.count >= ls.total {
		return nil, false
	}
	ls.open[principal]++
	ls.count++
	var once sync.Once
	return func() {
		once.Do(func() {
			ls.mu.Lock()
			defer ls.mu.Unlock()
			if ls.open[principal]--; ls.open[principal] == 0 {
				delete(ls.open, principal)
			}
			ls.count--
		})
	}, true
}
