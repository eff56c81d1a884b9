package toolcatalog

import (
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A catalog's passes are spaced during a burst of changes, so thousands
// of ToolDefinitions applied at once make a few versions rather than one
// per pass: after n versions in a row, each from a pass that started
// about as soon as the one before allowed, the next pass waits
// paceBase·2^(n-1), at most paceMax. A version from a pass that started
// after a quiet spell (twice the wait and paceBase more) comes at once,
// so a single edit is published without delay.
const (
	paceBase = 250 * time.Millisecond
	paceMax  = 10 * time.Second
)

// pacer keeps each catalog's last version and how many came in a row.
type pacer struct {
	mu    sync.Mutex
	byKey map[client.ObjectKey]pace
}

type pace struct {
	last   time.Time
	streak int
}

// interval is the wait after a version that ended a streak of n.
func (p pace) interval() time.Duration {
	if p.streak == 0 {
		return 0
	}
	return min(paceMax, paceBase<<min(p.streak-1, 16))
}

// wait says how long the catalog's next pass must wait at now.
func (ps *pacer) wait(key client.ObjectKey, now time.Time) time.Duration {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p, ok := ps.byKey[key]
	if !ok {
		return 0
	}
	return max(0, p.last.Add(p.interval()).Sub(now))
}

// published records a version made at now by a pass started at started:
// how long a pass takes does not count as a quiet spell.
func (ps *pacer) published(key client.ObjectKey, started, now time.Time) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.byKey == nil {
		ps.byKey = map[client.ObjectKey]pace{}
	}
	p, ok := ps.byKey[key]
	if ok && started.Sub(p.last) < 2*p.interval()+paceBase {
		p.streak++
	} else {
		p.streak = 0
	}
	p.last = now
	ps.byKey[key] = p
}

// forget drops a deleted catalog's pace.
func (ps *pacer) forget(key client.ObjectKey) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	delete(ps.byKey, key)
}

// A catalog whose Redis cannot be reached is tried again after
// redisRetryBase, doubling to redisRetryMax and never more, whatever the
// outage's length: the first pass after a failover or a restart comes
// within seconds, where the queue's own backoff would have grown to
// minutes. A failed pass costs a dial and the reads it needs before its
// first write.
const (
	redisRetryBase = 250 * time.Millisecond
	redisRetryMax  = 4 * time.Second
)

// redisRetries counts each catalog's passes failed in a row on Redis.
type redisRetries struct {
	mu    sync.Mutex
	byKey map[client.ObjectKey]int
}

// next counts one more failure and says how long to wait.
func (rr *redisRetries) next(key client.ObjectKey) time.Duration {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if rr.byKey == nil {
		rr.byKey = map[client.ObjectKey]int{}
	}
	n := rr.byKey[key]
	rr.byKey[key] = n + 1
	return min(redisRetryMax, redisRetryBase<<min(n, 16))
}

// forget drops the count: after a pass that reached Redis, or a deleted
// catalog.
func (rr *redisRetries) forget(key client.ObjectKey) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	delete(rr.byKey, key)
}
