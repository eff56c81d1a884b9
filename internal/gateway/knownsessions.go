package gateway

import (
	"context"
	"sync"
	"time"
)

// While the catalog's Redis has no primary (a failover, a restart), a
// replica still answers the sessions it has seen: it keeps, for each
// session it opened or checked lately, the record Redis gave and when the
// session was last used, and serves a session from there when Redis does
// not answer, under the same checks (the caller's view, the idle timeout,
// the lifetime). A session it has not seen waits briefly for Redis
// (sessionWait) before the client is told to retry. What a replica
// cannot know meanwhile is a session closed on another replica during
// the outage: it stays usable here until its idle timeout.

// maxKnownSessions bounds the sessions one catalog's replica keeps; past
// it, expired ones are dropped, and a new one is not kept until there is
// room.
const maxKnownSessions = 10000

// knownSessionPatience is how long a request of a session this replica
// has seen waits for Redis before it is answered from what was seen.
const knownSessionPatience = 300 * time.Millisecond

// sessionWait is how long a request of a session this replica has not
// seen waits for Redis to answer again, in sessionWaitStep steps.
const (
	sessionWait     = 1500 * time.Millisecond
	sessionWaitStep = 250 * time.Millisecond
)

// knownSession is a session as this replica last saw it in Redis.
type knownSession struct {
	rec             sessionRecord
	principal, view string
	used            time.Time
}

// knownSessions are the sessions one catalog's replica has seen.
type knownSessions struct {
	mu sync.Mutex
	m  map[string]knownSession
}

// remember keeps what Redis said of session id, used at now.
func (k *knownSessions) remember(id string, s knownSession, idle time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil {
		k.m = map[string]knownSession{}
	}
	if _, ok := k.m[id]; !ok && len(k.m) >= maxKnownSessions {
		for other, o := range k.m {
			if s.used.Sub(o.used) > idle {
				delete(k.m, other)
			}
		}
		if len(k.m) >= maxKnownSessions {
			return
		}
	}
	k.m[id] = s
}

// has says whether session id was seen.
func (k *knownSessions) has(id string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.m[id]
	return ok
}

func (k *knownSessions) forget(id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.m, id)
}

// recall returns session id as last seen, if it was seen with this
// principal and is not idle past idle at now, and counts it used.
func (k *knownSessions) recall(id, principal string, now time.Time, idle time.Duration) (*sessionRecord, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	s, ok := k.m[id]
	if !ok || s.principal != principal || now.Sub(s.used) > idle {
		return nil, false
	}
	s.used = now
	k.m[id] = s
	rec := s.rec
	return &rec, true
}

// pause waits d, or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
