package published

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/toolcatalog/tool-catalog-operator/internal/metrics"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// Redis forgets: an empty restart, FLUSHALL, eviction, or a failover to a
// replica that had not received the last version leaves a catalog's keys
// gone or older than what the manager published. The manager notices
// within DefaultLossProbeInterval: a probe reads each published catalog's
// P:version (one GET per catalog, pipelined per Redis, no scan) and
// compares it with the version the manager last wrote or read there; a
// pass's own read compares the same. A catalog found short is marked
// lost and its pass is due at once, which says so and publishes the
// current state again, as a version above the lost one.

// DefaultLossProbeInterval is how often the probe reads the catalogs'
// versions.
const DefaultLossProbeInterval = 2 * time.Second

// seen is the version of a catalog the manager last wrote or read in its
// Redis, and where.
type seen struct {
	rc      redis.UniversalClient
	keys    contract.Keys
	where   string
	version int64
}

// Loss is what a catalog's Redis was found to hold short of what the
// manager had seen there.
type Loss struct {
	// Version is the version the manager had published or read; Found
	// what P:version holds now (0 when absent).
	Version, Found int64
	At             time.Time
}

// Message says what was lost, for a condition or an event.
func (l *Loss) Message() string {
	found := "holds no version"
	if l.Found > 0 {
		found = fmt.Sprintf("holds version %d", l.Found)
	}
	return fmt.Sprintf("Redis lost published version %d (it %s: restarted empty, flushed, evicted, or failed over to a replica that had not received it)", l.Version, found)
}

// saw records that the catalog's Redis holds version v at its keys.
func (c *State) saw(v int64) {
	if v <= 0 {
		return
	}
	c.cs.mu.Lock()
	defer c.cs.mu.Unlock()
	c.mem.seen = &seen{rc: c.rc, keys: c.cfg.Keys, where: c.where(), version: v}
}

// check compares the version a read found with what was seen at the same
// keys, and marks the catalog lost when it is short.
func (c *State) check(found int64) {
	c.cs.mu.Lock()
	defer c.cs.mu.Unlock()
	if s := c.mem.seen; s != nil && s.where == c.where() && found < s.version {
		c.cs.markLost(c.id, c.mem, found)
	}
}

// markLost marks m lost with what was found; cs.mu is held.
func (cs *States) markLost(id string, m *memory, found int64) {
	if m.lost == nil {
		m.lost = &Loss{Version: m.seen.version, Found: found, At: cs.now()}
		metrics.PublishedDataLost.WithLabelValues(id).Inc()
	}
	// Once: the next write or read says what Redis holds.
	m.seen = nil
	m.snapshot = nil
}

// TakeLoss returns the catalog's loss, if one was found since the last
// call, and forgets it.
func (cs *States) TakeLoss(id string) *Loss {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	m := cs.byID[id]
	if m == nil {
		return nil
	}
	l := m.lost
	m.lost = nil
	return l
}

// Probe reads the version of every catalog the manager has seen
// published, one pipeline per Redis, and marks those found short; it
// returns their ids. A Redis that does not answer is skipped: the next
// probe, or the pass that meets the failure, finds out.
func (cs *States) Probe(ctx context.Context) []string {
	type probe struct {
		id  string
		m   *memory
		s   *seen
		cmd *redis.StringCmd
	}
	byClient := map[redis.UniversalClient][]*probe{}
	cs.mu.Lock()
	for id, m := range cs.byID {
		if m.seen != nil {
			byClient[m.seen.rc] = append(byClient[m.seen.rc], &probe{id: id, m: m, s: m.seen})
		}
	}
	cs.mu.Unlock()
	var lost []string
	for rc, probes := range byClient {
		_, err := rc.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, pr := range probes {
				pr.cmd = p.Get(ctx, pr.s.keys.Version())
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			if contract.TopologyError(err) {
				continue
			}
			ctrl.LoggerFrom(ctx).V(1).Info("Probing the published versions", "error", err.Error())
		}
		cs.mu.Lock()
		for _, pr := range probes {
			found, err := pr.cmd.Result()
			var v int64
			switch {
			case errors.Is(err, redis.Nil):
			case err != nil:
				continue
			default:
				if v, err = strconv.ParseInt(found, 10, 64); err != nil {
					continue // not a version: the pass reports what it reads
				}
			}
			// Only if nothing newer was seen meanwhile.
			if pr.m.seen == pr.s && v < pr.s.version {
				cs.markLost(pr.id, pr.m, v)
				lost = append(lost, pr.id)
			}
		}
		cs.mu.Unlock()
	}
	return lost
}

// WatchLosses probes every interval (DefaultLossProbeInterval when zero)
// until ctx ends, calling lost with the id of each catalog found short.
func (cs *States) WatchLosses(ctx context.Context, interval time.Duration, lost func(id string)) {
	if interval <= 0 {
		interval = DefaultLossProbeInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, interval)
		for _, id := range cs.Probe(pctx) {
			lost(id)
		}
		cancel()
	}
}
