package published

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/metrics"
	"github.com/toolcatalog/tool-catalog-operator/internal/published/versions"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// pinned is what the manager keeps of a catalog's pinned copy: which
// copy, and the spec hash of each of its tools, to count the tools
// changed since.
type pinned struct {
	uid     string
	version int64
	schema  string
	specs   map[string]string
}

// Hold makes the catalog served at version pin (0: unpinned) while cur,
// the current version, stays published: it writes the pinned copy when
// it is missing or holds another version, deletes it when pin is 0, and
// announces either. A version that cannot be pinned leaves whatever was
// served and is reported in Hold.Refused.
//
// published are the schema hashes of the versions the catalog published
// (status.publishedVersions): a version rebuilt to be pinned must hash to
// its own, when known (versions.Pin).
func (c *State) Hold(ctx context.Context, cur *contract.Document, pin int64, published map[int64]string) (catalog.Hold, error) {
	h, err := c.hold(ctx, cur, pin, published)
	if err != nil {
		metrics.RedisErrors.WithLabelValues(c.id, "write").Inc()
	}
	return h, err
}

func (c *State) hold(ctx context.Context, cur *contract.Document, pin int64, published map[int64]string) (catalog.Hold, error) {
	k := c.cfg.Keys
	have, present, err := c.readPinned(ctx)
	if err != nil {
		return catalog.Hold{}, err
	}
	if pin == 0 {
		if !present {
			return catalog.Hold{}, nil
		}
		if _, err := versions.Unpin(ctx, c.rc, k); err != nil {
			return catalog.Hold{}, err
		}
		c.setPinned(nil)
		c.announce(ctx, cur, 0)
		return catalog.Hold{Cleared: true}, nil
	}
	var h catalog.Hold
	if have == nil || have.version != pin {
		doc, err := versions.Pin(ctx, c.rc, k, cur, pin, published[pin])
		switch {
		case errors.Is(err, versions.ErrCannotPin):
			h.Refused = err
		case err != nil:
			return catalog.Hold{}, err
		default:
			have = &pinned{uid: c.uid, version: pin, schema: doc.SchemaHash, specs: specsOf(doc)}
			c.setPinned(have)
			c.announce(ctx, cur, pin)
			h.Set = true
		}
	}
	if have != nil {
		h.Version, h.Changed = have.version, changedSince(have.specs, cur)
	}
	return h, nil
}

// readPinned returns the pinned copy in Redis, from what the manager
// kept when that is the copy there. present says any of it is there: a
// copy that is not whole, does not parse, or belongs to another catalog
// object of the same name is not returned, and is replaced or deleted.
func (c *State) readPinned(ctx context.Context) (have *pinned, present bool, err error) {
	p := c.cfg.Keys.Pinned()
	vals, err := c.rc.MGet(ctx, p.Version(), p.Head()).Result()
	if err != nil {
		return nil, false, fmt.Errorf("reading %s: %w", p.Version(), err)
	}
	v, _ := vals[0].(string)
	rawHead, _ := vals[1].(string)
	if v == "" && rawHead == "" {
		return nil, false, nil
	}
	head, err := contract.ParseHead([]byte(rawHead))
	if err != nil || fmt.Sprint(head.Version) != v || head.CatalogUID != c.uid {
		return nil, true, nil //nolint:nilerr // not a copy this catalog wrote: replaced or deleted
	}
	c.cs.mu.Lock()
	kept := c.mem.pinned
	c.cs.mu.Unlock()
	if kept != nil && kept.uid == c.uid && kept.version == head.Version && kept.schema == head.SchemaHash {
		return kept, true, nil
	}
	// Kept by another manager, or before a restart: the spec hashes are
	// read once.
	entries, err := c.rc.HGetAll(ctx, p.Tools()).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, true, fmt.Errorf("reading %s: %w", p.Tools(), err)
	}
	have = &pinned{uid: c.uid, version: head.Version, schema: head.SchemaHash, specs: make(map[string]string, len(entries))}
	for name, raw := range entries {
		var e struct {
			SpecHash string `json:"spec_hash"`
		}
		if json.Unmarshal([]byte(raw), &e) == nil {
			have.specs[name] = e.SpecHash
		}
	}
	c.setPinned(have)
	return have, true, nil
}

func (c *State) setPinned(p *pinned) {
	c.cs.mu.Lock()
	defer c.cs.mu.Unlock()
	c.mem.pinned = p
}

// announce tells consumers that the version served changed.
func (c *State) announce(ctx context.Context, cur *contract.Document, pin int64) {
	n := contract.NoticeOf(cur)
	n.Pinned = pin
	notice, _ := json.Marshal(n)
	if err := versions.Notify(ctx, c.rc, c.cfg.Channel, notice); err != nil {
		metrics.RedisErrors.WithLabelValues(c.id, "notify").Inc()
		ctrl.LoggerFrom(ctx).Error(err, "Pinned the catalog but could not announce it", "pinned", pin)
	}
}

func specsOf(d *contract.Document) map[string]string {
	specs := make(map[string]string, len(d.Tools))
	for _, t := range d.Tools {
		specs[t.Name] = t.SpecHash
	}
	return specs
}

// changedSince counts the tools cur added, removed or changed since the
// pinned version whose spec hashes are pinned.
func changedSince(pinned map[string]string, cur *contract.Document) int {
	n, kept := 0, 0
	for _, t := range cur.Tools {
		spec, ok := pinned[t.Name]
		if ok {
			kept++
		}
		if !ok || spec != t.SpecHash {
			n++
		}
	}
	return n + len(pinned) - kept
}
