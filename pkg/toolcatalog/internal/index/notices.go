package index

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// Notices shares subscriptions among the followers of catalogs published
// on one Redis (FollowOptions.Notices): one pub/sub connection per
// channel however many catalogs are followed, each notice parsed once and
// handed only to the followers of the catalog it names. A process
// following hundreds of catalogs on one channel so holds one connection,
// not hundreds, and a notice costs one follower's work, not every
// follower's. It is safe for concurrent use.
type Notices struct {
	client  redis.UniversalClient
	onError func(error)

	mu       sync.Mutex
	channels map[string]*noticeChannel
}

// NewNotices returns the shared subscriptions of the Redis c reaches;
// onError, when set, is told of the notices it cannot read and of the
// errors it recovers from.
func NewNotices(c redis.UniversalClient, onError func(error)) *Notices {
	return &Notices{client: c, onError: onError, channels: map[string]*noticeChannel{}}
}

// noticeChannel is one subscribed channel and its watchers.
type noticeChannel struct {
	ps     *redis.PubSub
	cancel context.CancelFunc
	// byCatalog holds the watchers of each named catalog; any, those of
	// every notice.
	byCatalog map[string]map[*noticeWatch]struct{}
	any       map[*noticeWatch]struct{}
}

// noticeWatch is one follower's share of a channel: the messages for it
// (a *redis.Subscription, or a notice parsed as contract.Notice) and,
// when it fell behind so far that one was dropped, a signal to check the
// version instead.
type noticeWatch struct {
	msgs   chan any
	missed chan struct{}
}

// noticeBacklog is how many messages a follower may fall behind before
// they are dropped for one version check.
const noticeBacklog = 16

// subscribed is how many channels are subscribed.
func (n *Notices) subscribed() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.channels)
}

// watch adds a follower of catalog ("namespace/name"; every notice when
// empty) to channel. The first watch of a channel subscribes to it, and
// returns once Redis has confirmed, so no notice published after watch
// returns is missed; stop ends the watch, and the last one ends the
// subscription.
func (n *Notices) watch(ctx context.Context, channel, catalog string) (w *noticeWatch, stop func(), err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ch := n.channels[channel]
	if ch == nil {
		subCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		ps := n.client.Subscribe(subCtx, channel)
		if _, err := ps.Receive(ctx); err != nil {
			cancel()
			_ = ps.Close()
			return nil, nil, fmt.Errorf("subscribing to %s: %w", channel, err)
		}
		ch = &noticeChannel{ps: ps, cancel: cancel, byCatalog: map[string]map[*noticeWatch]struct{}{}, any: map[*noticeWatch]struct{}{}}
		n.channels[channel] = ch
		go n.receive(subCtx, channel, ch)
	}
	w = &noticeWatch{msgs: make(chan any, noticeBacklog), missed: make(chan struct{}, 1)}
	set := ch.any
	if catalog != "" {
		if set = ch.byCatalog[catalog]; set == nil {
			set = map[*noticeWatch]struct{}{}
			ch.byCatalog[catalog] = set
		}
	}
	set[w] = struct{}{}
	return w, func() { n.leave(channel, catalog, ch, w) }, nil
}

// leave ends a watch, and the channel's subscription with the last one.
func (n *Notices) leave(channel, catalog string, ch *noticeChannel, w *noticeWatch) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if catalog == "" {
		delete(ch.any, w)
	} else if set := ch.byCatalog[catalog]; set != nil {
		if delete(set, w); len(set) == 0 {
			delete(ch.byCatalog, catalog)
		}
	}
	if len(ch.any) == 0 && len(ch.byCatalog) == 0 && n.channels[channel] == ch {
		delete(n.channels, channel)
		// Closing the subscription ends a Receive under way.
		ch.cancel()
		_ = ch.ps.Close()
	}
}

// receive hands a channel's messages to its watchers until ctx ends: a
// notice to the watchers of the catalog it names and of every notice, a
// subscription (go-redis subscribing again after a reconnect, when
// notices may have been missed) to all.
// A subscription that fails is tried again after receiveRetryBase,
// doubling to receiveRetryMax while it keeps failing.
const (
	receiveRetryBase = 100 * time.Millisecond
	receiveRetryMax  = 5 * time.Second
)

func (n *Notices) receive(ctx context.Context, channel string, ch *noticeChannel) {
	wait := time.Duration(0)
	for {
		m, err := ch.ps.Receive(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			// go-redis reconnects and resubscribes by itself; while Redis
			// is down, the attempts and the reports of their failures
			// are spaced, doubling to receiveRetryMax.
			wait = min(receiveRetryMax, max(receiveRetryBase, 2*wait))
			n.report(fmt.Errorf("receiving notices on %s (trying again in %s): %w", channel, wait, err))
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			continue
		}
		wait = 0
		catalog, every := "", false
		switch msg := m.(type) {
		case *redis.Subscription:
			every = true
		case *redis.Message:
			var notice contract.Notice
			if err := json.Unmarshal([]byte(msg.Payload), &notice); err != nil {
				n.report(fmt.Errorf("ignoring a malformed notice on %s: %w", channel, err))
				continue
			}
			m, catalog = notice, notice.Catalog
		default:
			continue
		}
		n.mu.Lock()
		for w := range ch.any {
			w.deliver(m)
		}
		if every {
			for _, set := range ch.byCatalog {
				for w := range set {
					w.deliver(m)
				}
			}
		} else {
			for w := range ch.byCatalog[catalog] {
				w.deliver(m)
			}
		}
		n.mu.Unlock()
	}
}

// deliver hands a message over without waiting: a follower that fell
// behind is told to check the version instead.
func (w *noticeWatch) deliver(m any) {
	select {
	case w.msgs <- m:
	default:
		select {
		case w.missed <- struct{}{}:
		default:
		}
	}
}

func (n *Notices) report(err error) {
	if n.onError != nil {
		n.onError(err)
	}
}
