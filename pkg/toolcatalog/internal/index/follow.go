package index

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	// Catalog and CatalogUID, when set, are the identity the follower
	// expects (the head's catalog, "namespace/name", and the ToolCatalog's
	// UID): a version published under the keys by anyone else is refused
	// with ErrForeignCatalog, and the last good version is kept.
	Catalog, CatalogUID string
	// UsageInterval is how often the most used tools are read again for
	// a catalog that includes them (search always_include_top_n_used);
	// DefaultUsageInterval when zero.
	UsageInterval time.Duration
	// OnMostUsed, when set, is called with the current version when its
	// most used tools (Follower.MostUsed) change between versions; a new
	// version is told by OnUpdate, with them already read for it.
	OnMostUsed func(*Catalog)
	// Notices, when set, is the shared subscription to follow the
	// channel with (NewNotices, of the same Redis): the follower then
	// holds no connection of its own, and is handed only the notices of
	// Catalog (all when Catalog is empty).
	Notices *Notices
	// WaitForPublish lets Follow start before the catalog is first
	// published: instead of failing with ErrNotPublished it returns a
	// Follower whose Current is nil until the first version appears (Wait
	// blocks until then).
	WaitForPublish bool
}

// DefaultUsageInterval is how often a Follower reads the most used tools
// again: usage moves over days, so a minute is fresh enough.
const DefaultUsageInterval = time.Minute

// ErrForeignCatalog means the keys hold a version of another catalog than
// the one a follower expects.
var ErrForeignCatalog = errors.New("the version belongs to another catalog")

// Follower keeps the newest version of a catalog loaded: it reloads when a
// newer version is announced, ignores older and duplicate notices, and
// checks P:version when the subscription reconnects and periodically, so a
// missed notice does not leave it stale. A catalog deleted and created
// again under the same name (another CatalogUID) is loaded whatever its
// version.
type Follower struct {
	client   redis.UniversalClient
	keys     contract.Keys
	opts     FollowOptions
	current  atomic.Pointer[Catalog]
	mostUsed atomic.Pointer[[]string]
	mu       sync.Mutex // serialises reloads and usage reads
	reloads  atomic.Int64
	// loaded is closed when the first version is loaded.
	loaded     chan struct{}
	loadedOnce sync.Once
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
	if opts.UsageInterval <= 0 {
		opts.UsageInterval = DefaultUsageInterval
	}
	f := &Follower{client: c, keys: keys, opts: opts, loaded: make(chan struct{})}
	// Subscribe before the first load, so no version published in between
	// is missed.
	w, stop, err := f.subscribe(ctx)
	if err != nil {
		return nil, err
	}
	if err := f.reload(ctx, func(*Catalog) bool { return true }); err != nil {
		if !opts.WaitForPublish || !(errors.Is(err, ErrNotPublished) || errors.Is(err, ErrForeignCatalog)) {
			stop()
			return nil, err
		}
		// Nothing of this catalog is published yet: wait for it.
		if errors.Is(err, ErrForeignCatalog) {
			f.report(err)
		}
	}
	go f.run(ctx, w, stop)
	return f, nil
}

// subscribe watches the channel through the shared Notices, or through
// a subscription of the follower's own that hands it every notice of the
// channel.
func (f *Follower) subscribe(ctx context.Context) (*noticeWatch, func(), error) {
	if f.opts.Notices != nil {
		return f.opts.Notices.watch(ctx, f.opts.Channel, f.opts.Catalog)
	}
	return NewNotices(f.client, f.report).watch(ctx, f.opts.Channel, "")
}

// Current returns the newest loaded version; nil while a follower started
// with WaitForPublish has not seen the first one.
func (f *Follower) Current() *Catalog { return f.current.Load() }

// MostUsed returns the current version's most used tools, most used
// first: as many as it asks for (search always_include_top_n_used), of
// those it holds; nil when it asks for none. Pass it as Options.MostUsed
// and to PlanPublished.
func (f *Follower) MostUsed() []string {
	if p := f.mostUsed.Load(); p != nil {
		return *p
	}
	return nil
}

// readMostUsed reads the most used tools of the current version again and
// reports whether they changed. f.mu must be held. A failed read keeps
// the last list.
func (f *Follower) readMostUsed(ctx context.Context) bool {
	top, err := MostUsed(ctx, f.client, f.keys, f.Current())
	if err != nil {
		f.report(err)
		return false
	}
	if slices.Equal(top, f.MostUsed()) {
		return false
	}
	f.mostUsed.Store(&top)
	return true
}

// refreshMostUsed reads the most used tools again and tells OnMostUsed when
// they changed.
func (f *Follower) refreshMostUsed(ctx context.Context) {
	f.mu.Lock()
	changed := f.readMostUsed(ctx)
	f.mu.Unlock()
	if changed && f.opts.OnMostUsed != nil {
		f.opts.OnMostUsed(f.Current())
	}
}

// Wait blocks until a version is loaded (at once when one is) or ctx ends.
func (f *Follower) Wait(ctx context.Context) (*Catalog, error) {
	select {
	case <-f.loaded:
		return f.Current(), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for %s to be published: %w", f.keys.Catalog(), ctx.Err())
	}
}

// Reloads counts the versions loaded so far, the first included.
func (f *Follower) Reloads() int64 { return f.reloads.Load() }

// Check compares the loaded version with P:version and reloads when Redis
// holds another one: a newer version, or an older one, which means the
// catalog was deleted and created again (or Redis was restored). It reports
// whether it reloaded.
func (f *Follower) Check(ctx context.Context) (bool, error) {
	served, n, err := contract.Served(ctx, f.client, f.keys)
	if err != nil || n == 0 {
		return false, err
	}
	pinned := served != f.keys
	if cur := f.Current(); cur != nil && n == cur.Version() && pinned == cur.Pinned {
		return false, nil
	}
	return true, f.reload(ctx, func(cur *Catalog) bool { return cur.Version() != n || pinned != cur.Pinned })
}

// reload loads the catalog, unless need says the one held will do, and
// keeps it when it differs from the one held.
func (f *Follower) reload(ctx context.Context, need func(cur *Catalog) bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur := f.Current(); cur != nil && !need(cur) {
		return nil
	}
	c, err := Update(ctx, f.client, f.keys, f.Current())
	if err != nil {
		return err
	}
	if err := f.expected(c.Document); err != nil {
		return err
	}
	if cur := f.Current(); cur != nil && c.Version() == cur.Version() && c.SchemaHash() == cur.SchemaHash() && c.Pinned == cur.Pinned {
		return nil
	}
	f.current.Store(c)
	f.readMostUsed(ctx)
	f.loadedOnce.Do(func() { close(f.loaded) })
	f.reloads.Add(1)
	if f.opts.OnUpdate != nil {
		f.opts.OnUpdate(c)
	}
	return nil
}

// expected refuses a document of another catalog than the one expected.
func (f *Follower) expected(d *contract.Document) error {
	switch {
	case f.opts.Catalog != "" && d.Catalog != f.opts.Catalog:
		return fmt.Errorf("%w: %s holds version %d of catalog %q, not %q; the last good version is served", ErrForeignCatalog, f.keys.Head(), d.Version, d.Catalog, f.opts.Catalog)
	case f.opts.CatalogUID != "" && d.CatalogUID != f.opts.CatalogUID:
		return fmt.Errorf("%w: %s holds version %d of catalog %s with UID %q, not %q; the last good version is served", ErrForeignCatalog, f.keys.Head(), d.Version, d.Catalog, d.CatalogUID, f.opts.CatalogUID)
	}
	return nil
}

func (f *Follower) run(ctx context.Context, w *noticeWatch, stop func()) {
	defer stop()
	ticker := time.NewTicker(f.opts.RecheckInterval)
	defer ticker.Stop()
	usage := time.NewTicker(f.opts.UsageInterval)
	defer usage.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			if _, err := f.Check(ctx); err != nil {
				f.report(err)
			}
		case <-usage.C:
			f.refreshMostUsed(ctx)
		case <-w.missed:
			// Notices were dropped while this follower fell behind.
			if _, err := f.Check(ctx); err != nil {
				f.report(err)
			}
		case m, ok := <-w.msgs:
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
	case contract.Notice:
		n := m
		cur := f.Current()
		if cur == nil {
			// Not published when the follower started: any notice on
			// the channel may be the first version.
			if _, err := f.Check(ctx); err != nil && !errors.Is(err, ErrNotPublished) {
				f.report(err)
			}
			return
		}
		recreated := n.CatalogUID != "" && n.CatalogUID != cur.Document.CatalogUID
		// While a pin is set or held, the version served may go down:
		// Update finds what is served.
		pins := n.Pinned > 0 || cur.Pinned
		if n.Catalog != cur.Document.Catalog || (!recreated && !pins && n.Version <= cur.Version()) ||
			(!recreated && n.Pinned > 0 && n.Pinned == cur.Version() && cur.Pinned) {
			return // another catalog's notice, or an old or duplicate one
		}
		err := f.reload(ctx, func(cur *Catalog) bool {
			return cur.Document.CatalogUID != n.CatalogUID && n.CatalogUID != "" || cur.Version() < n.Version || pins
		})
		if err != nil {
			f.report(err)
		}
	}
}

func (f *Follower) report(err error) {
	if f.opts.OnError != nil {
		f.opts.OnError(err)
	}
}
