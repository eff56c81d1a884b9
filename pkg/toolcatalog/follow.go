package toolcatalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// DefaultRecheckInterval is how often a Follower checks P:version even
// without notices.
const DefaultRecheckInterval = 30 * time.Second

// FollowOptions configure a Follower.
type FollowOptions struct {
	// Channel is the catalog's notice channel; contract.DefaultChannel
	// when empty.
	Channel string
	// RecheckInterval bounds how long a missed notice can leave the
	// follower stale; DefaultRecheckInterval when zero.
	RecheckInterval time.Duration
	// OnUpdate, when set, is called with each newly loaded version.
	OnUpdate func(*Catalog)
	// OnError, when set, is called with errors the follower recovers from.
	OnError func(error)
}

// Follower keeps the newest version of a catalog loaded: it reloads when a
// newer version is announced, ignores older and duplicate notices, and
// checks P:version when the subscription reconnects and periodically, so a
// missed notice does not leave it stale.
type Follower struct {
	client  redis.UniversalClient
	keys    contract.Keys
	opts    FollowOptions
	current atomic.Pointer[Catalog]
	mu      sync.Mutex // serialises reloads
	reloads atomic.Int64
}

// Follow loads the catalog and keeps following it until ctx ends. The
// returned Follower serves the current version immediately.
func Follow(ctx context.Context, c redis.UniversalClient, keys contract.Keys, opts FollowOptions) (*Follower, error) {
	if opts.Channel == "" {
		opts.Channel = contract.DefaultChannel
	}
	if opts.RecheckInterval <= 0 {
		opts.RecheckInterval = DefaultRecheckInterval
	}
	f := &Follower{client: c, keys: keys, opts: opts}
	// Subscribe before the first load, so no version published in between
	// is missed.
	ps := c.Subscribe(ctx, opts.Channel)
	if _, err := ps.Receive(ctx); err != nil {
		_ = ps.Close()
		return nil, fmt.Errorf("subscribing to %s: %w", opts.Channel, err)
	}
	if err := f.reload(ctx, 0); err != nil {
		_ = ps.Close()
		return nil, err
	}
	go f.run(ctx, ps)
	return f, nil
}

// Current returns the newest loaded version.
func (f *Follower) Current() *Catalog { return f.current.Load() }

// Reloads counts the versions loaded so far, the first included.
func (f *Follower) Reloads() int64 { return f.reloads.Load() }

// Check compares the loaded version with P:version and reloads when Redis
// holds a newer one. It reports whether it reloaded.
func (f *Follower) Check(ctx context.Context) (bool, error) {
	v, err := f.client.Get(ctx, f.keys.Version()).Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", f.keys.Version(), err)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return false, fmt.Errorf("%s holds %q, not a version", f.keys.Version(), v)
	}
	if cur := f.Current(); cur != nil && n <= cur.Version() {
		return false, nil
	}
	return true, f.reload(ctx, n)
}

// reload loads the catalog unless a version at least as new as min is
// already loaded.
func (f *Follower) reload(ctx context.Context, min int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur := f.Current(); cur != nil && min > 0 && cur.Version() >= min {
		return nil
	}
	c, err := Load(ctx, f.client, f.keys)
	if err != nil {
		return err
	}
	if cur := f.Current(); cur != nil && c.Version() <= cur.Version() && c.SchemaHash() == cur.SchemaHash() {
		return nil
	}
	f.current.Store(c)
	f.reloads.Add(1)
	if f.opts.OnUpdate != nil {
		f.opts.OnUpdate(c)
	}
	return nil
}

func (f *Follower) run(ctx context.Context, ps *redis.PubSub) {
	defer ps.Close()
	ticker := time.NewTicker(f.opts.RecheckInterval)
	defer ticker.Stop()
	msgs := make(chan any)
	go func() {
		defer close(msgs)
		for {
			m, err := ps.Receive(ctx)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				// go-redis reconnects and resubscribes by itself.
				f.report(fmt.Errorf("receiving notices: %w", err))
				time.Sleep(100 * time.Millisecond)
				continue
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			if _, err := f.Check(ctx); err != nil {
				f.report(err)
			}
		case m, ok := <-msgs:
			if !ok {
				return
			}
			f.handle(ctx, m)
		}
	}
}

func (f *Follower) handle(ctx context.Context, m any) {
	switch m := m.(type) {
	case *redis.Subscription:
		// A subscribe confirmation after the first one means the
		// connection was re-established: notices may have been missed.
		if m.Kind == "subscribe" {
			if _, err := f.Check(ctx); err != nil {
				f.report(err)
			}
		}
	case *redis.Message:
		var n contract.Notice
		if err := json.Unmarshal([]byte(m.Payload), &n); err != nil {
			f.report(fmt.Errorf("ignoring a malformed notice on %s: %w", m.Channel, err))
			return
		}
		cur := f.Current()
		if cur == nil || n.Catalog != cur.Document.Catalog || n.Version <= cur.Version() {
			return // another catalog's notice, or an old or duplicate one
		}
		if err := f.reload(ctx, n.Version); err != nil {
			f.report(err)
		}
	}
}

func (f *Follower) report(err error) {
	if f.opts.OnError != nil {
		f.opts.OnError(err)
	}
}

// RecordUsage counts one use of a tool in the catalog's usage sorted set
// (P:usage), which TopUsed reads.
func RecordUsage(ctx context.Context, c redis.UniversalClient, keys contract.Keys, tool string) error {
	return c.ZIncrBy(ctx, keys.Usage(), 1, tool).Err()
}

// TopUsed returns the n most used tools, most used first.
func TopUsed(ctx context.Context, c redis.UniversalClient, keys contract.Keys, n int) ([]string, error) {
	if n <= 0 {
		return nil, nil
	}
	return c.ZRevRange(ctx, keys.Usage(), 0, int64(n-1)).Result()
}
