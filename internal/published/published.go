// Package published does a catalog pass's Redis work and keeps what the
// manager knows of each catalog's published state between passes.
//
// One State, opened per pass, reads the stored state (from a kept
// snapshot while Redis's stamp confirms it holds exactly that), trims and
// learns from recorded requests, stages the work of a blocked pass, and
// publishes and announces a version. Between passes, States keeps per
// catalog the snapshot (of a catalog of DefaultKeepMinTools tools or
// more), the selector, the queries generated but not yet embedded, and the
// query vectors that grade a version. The ToolCatalog
// controller orchestrates; it does no Redis I/O of its own.
package published

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolcatalog/tool-catalog-operator/internal/published/versions"
	"github.com/toolcatalog/tool-catalog-operator/internal/querystore"

	"github.com/redis/go-redis/v9"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalogconfig"
	"github.com/toolcatalog/tool-catalog-operator/internal/metrics"
	"github.com/toolcatalog/tool-catalog-operator/internal/redisconn"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// States keeps every catalog's published state. The zero value is not
// usable: set Pool.
type States struct {
	// Pool holds one Redis client per catalog.
	Pool *redisconn.Pool
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// StoreMaxEntries bounds each namespace's query store
	// (querystore.DefaultMaxEntries when zero).
	StoreMaxEntries int
	// KeepMinTools is the size from which a catalog's stored state is
	// kept between passes, DefaultKeepMinTools when zero (see Release).
	KeepMinTools int

	mu   sync.Mutex
	byID map[string]*memory
	// flights are the provider requests the passes and gradings are
	// making, which the query stores of one Redis share
	// (querystore.Flights), by the Redis's identity: an answer read from
	// one catalog's Redis is never handed to a catalog of another.
	flights map[string]*querystore.Flights
}

// flightsOf are the flights shared by the query stores of the Redis the
// options name (its addresses, database and credentials).
func (cs *States) flightsOf(o redisconn.Options) *querystore.Flights {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	fp := o.Fingerprint()
	if cs.flights[fp] == nil {
		if cs.flights == nil {
			cs.flights = map[string]*querystore.Flights{}
		}
		cs.flights[fp] = &querystore.Flights{}
	}
	return cs.flights[fp]
}

// DefaultKeepMinTools is the size from which a catalog's stored state is
// kept between passes. A smaller catalog's next pass reads it whole again,
// which costs little (reading 1,000 tools takes about 3 ms), while holding
// it costs about 1 KiB per tool: 65 MB at 500 catalogs of 200 tools.
const DefaultKeepMinTools = 1000

// memory is what is kept of one catalog between passes.
type memory struct {
	// snapshot is the stored state last read or written, nil when the
	// next pass must read everything.
	snapshot  *snapshot
	selector  catalog.Selector
	changes   catalog.Changes
	planner   catalog.Planner
	generated catalog.Generated
	queries   catalog.QueryVectors
	// pinned is the catalog's pinned copy as last read or written.
	pinned *pinned
	// seen is the version last written or read in the catalog's Redis,
	// lost what a probe or a read found short of it (loss.go).
	seen *seen
	lost *Loss
}

// snapshot is a stored state and the stamp Redis had when it was read.
type snapshot struct {
	// uid and where identify the catalog object and its keys.
	uid, where string
	stamp      contract.Stamp
	stored     catalog.Stored
	readAt     time.Time
}

func (cs *States) now() time.Time {
	if cs.Now != nil {
		return cs.Now()
	}
	return time.Now()
}

// Open returns the catalog's published state for one pass. id names the
// catalog (namespace/name), uid is its object's UID.
func (cs *States) Open(id, uid string, cfg *catalogconfig.Config) *State {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.byID == nil {
		cs.byID = map[string]*memory{}
	}
	m := cs.byID[id]
	if m == nil {
		m = &memory{}
		cs.byID[id] = m
	}
	return &State{cs: cs, mem: m, id: id, uid: uid, cfg: cfg, rc: cs.Pool.Get(id, cfg.Redis)}
}

// State is Open as the pass's port (catalog.States).
func (cs *States) State(id, uid string, cfg *catalogconfig.Config) catalog.State {
	return cs.Open(id, uid, cfg)
}

// Changed tells a catalog's next pass that the ToolDefinitions named
// changed (catalog.Changes). A catalog nothing is kept for selects whole
// at its next pass anyway.
func (cs *States) Changed(id string, objects ...string) {
	cs.mu.Lock()
	m := cs.byID[id]
	cs.mu.Unlock()
	if m != nil {
		m.changes.Add(objects...)
	}
}

// AllChangedIn tells the next pass of every catalog of a namespace that
// any of its ToolDefinitions may have changed.
func (cs *States) AllChangedIn(namespace string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for id, m := range cs.byID {
		if ns, _, _ := strings.Cut(id, "/"); ns == namespace {
			m.changes.All()
		}
	}
}

// Forget drops everything kept for a catalog that is gone, its Redis
// client included.
func (cs *States) Forget(id string) {
	cs.mu.Lock()
	delete(cs.byID, id)
	cs.mu.Unlock()
	cs.Pool.Forget(id)
}

// Remove deletes the catalog's keys, unless the head there belongs to
// another catalog: then it returns that catalog's UID and deletes nothing.
func (cs *States) Remove(ctx context.Context, id, uid string, keys contract.Keys, opts redisconn.Options) (foreign string, err error) {
	rc := cs.Pool.Get(id, opts)
	if owner, err := contract.HeadOwner(ctx, rc, keys); err == nil && owner != "" && owner != uid {
		return owner, nil
	}
	if err := versions.Delete(ctx, rc, keys); err != nil {
		metrics.RedisErrors.WithLabelValues(id, "delete").Inc()
		return "", err
	}
	return "", nil
}

// State is one catalog's published state during one pass.
type State struct {
	cs      *States
	mem     *memory
	id, uid string
	cfg     *catalogconfig.Config
	rc      redis.UniversalClient
}

// QueryStore is the query store of the catalog's namespace in the
// catalog's Redis (internal/querystore): the provider clients it wraps
// look there before they ask, so catalogs over the same tools pay once.
func (c *State) QueryStore() *querystore.Store {
	ns, _, _ := strings.Cut(c.id, "/")
	s := querystore.New(c.rc, ns, 0)
	s.Flights, s.MaxEntries, s.Now = c.cs.flightsOf(c.cfg.Redis), c.cs.StoreMaxEntries, c.cs.Now
	s.Observe = func(kind, outcome string, n int) {
		metrics.QueryStore.WithLabelValues(ns, kind, outcome).Add(float64(n))
	}
	return s
}

// Selector is the catalog's selector, kept across passes.
func (c *State) Selector() *catalog.Selector { return &c.mem.selector }

// Changes are the catalog's ToolDefinitions changed since its last pass.
func (c *State) Changes() *catalog.Changes { return &c.mem.changes }

// Planner is the catalog's planner, kept across passes with the stored
// state it planned from.
func (c *State) Planner() *catalog.Planner { return &c.mem.planner }

// Generated keeps the catalog's queries generated but not embedded yet.
func (c *State) Generated() *catalog.Generated { return &c.mem.generated }

// QueryVectors keeps the catalog's query vectors for grading.
func (c *State) QueryVectors() *catalog.QueryVectors { return &c.mem.queries }

func (c *State) where() string {
	return fmt.Sprintf("%s@%v/%d", c.cfg.Keys.Prefix, c.cfg.Redis.Addresses, c.cfg.Redis.DB)
}

func (c *State) kept() *snapshot {
	c.cs.mu.Lock()
	defer c.cs.mu.Unlock()
	return c.mem.snapshot
}

func (c *State) keep(s *snapshot) {
	c.cs.mu.Lock()
	defer c.cs.mu.Unlock()
	c.mem.snapshot = s
}

// Read returns the catalog's stored state: the kept one when Redis still
// holds it (same stamp), else read whole. When the resync is due
// (catalogconfig.ResyncDue) every field is read again and compared with
// the kept state (matches), which is read whole only when they differ; a
// refresh request (how.Fresh) and a change of keys read everything
// again. What is read whole holds the strings of tools, the selected
// ones, where equal.
func (c *State) Read(ctx context.Context, how catalog.Reading, tools []*catalog.Tool) (catalog.Stored, error) {
	stored, err := c.read(ctx, how, tools)
	if err != nil {
		metrics.RedisErrors.WithLabelValues(c.id, "read").Inc()
	}
	return stored, err
}

func (c *State) read(ctx context.Context, how catalog.Reading, tools []*catalog.Tool) (catalog.Stored, error) {
	if kept := c.kept(); kept != nil && !how.Fresh && kept.uid == c.uid && kept.where == c.where() {
		stamp, staged, err := versions.ReadStamp(ctx, c.rc, c.cfg.Keys)
		if err != nil {
			return catalog.Stored{}, err
		}
		c.check(stamp.Version)
		if stamp == kept.stamp && !c.cfg.ResyncDue(c.cs.now().Sub(kept.readAt), how.Edits) {
			return kept.stored.WithStaged(staged.StagedMetadata, staged.StagedVectors), nil
		}
		if stamp == kept.stamp {
			now := c.cs.now()
			same, staged, err := c.matches(ctx, kept)
			if err != nil {
				return catalog.Stored{}, err
			}
			if same {
				c.keep(&snapshot{uid: kept.uid, where: kept.where, stamp: kept.stamp, stored: kept.stored, readAt: now})
				return kept.stored.WithStaged(staged.StagedMetadata, staged.StagedVectors), nil
			}
		}
	}
	// What was kept is not needed past here: let it go before the read
	// rather than hold two catalogs' states at once, and the plans made
	// from it, which hold its entries (the next plans are made whole
	// anyway, from a state of a new lineage).
	c.keep(nil)
	c.mem.planner.Forget()
	snap, err := contract.ReadWithStaged(ctx, c.rc, c.cfg.Keys)
	if err != nil {
		return catalog.Stored{}, err
	}
	published := *snap
	published.StagedMetadata, published.StagedVectors = nil, nil
	stored := catalog.ReadStored(&published)
	c.check(stored.Version)
	c.saw(stored.Version)
	stored.Share(tools)
	if snap.Head != nil && stored.DocErr == nil {
		c.keep(&snapshot{uid: c.uid, where: c.where(), stamp: snap.Stamp(), stored: stored, readAt: c.cs.now()})
	} else {
		c.keep(nil)
	}
	return stored.WithStaged(snap.StagedMetadata, snap.StagedVectors), nil
}

// matches reads every field of the catalog's hashes again, a round trip
// at a time, and says whether Redis holds exactly the kept state: the
// stamp counts fields, and a field rewritten behind the operator's back
// leaves it as it was. A resync of an unchanged catalog so holds one
// round trip's replies, not a second copy of the catalog, and keeps the
// state its plans and grading were derived from. It returns the staged
// entries read after the fields, with the stamp unchanged.
func (c *State) matches(ctx context.Context, kept *snapshot) (bool, *contract.Snapshot, error) {
	st, doc := kept.stored, kept.stored.Doc
	if doc == nil || !st.Contract2 || int64(len(doc.Tools)) != kept.stamp.Tools {
		return false, nil, nil
	}
	entries := make([]string, len(doc.Tools))
	for i := range doc.Tools {
		entries[i] = doc.Tools[i].Name
	}
	var metadata, vectors []string
	for name, t := range st.Tools.All() {
		if t.Metadata != nil || t.MetadataErr != nil {
			metadata = append(metadata, name)
		}
		if t.HasVector {
			vectors = append(vectors, name)
		}
	}
	if int64(len(metadata)) != kept.stamp.Metadata || int64(len(vectors)) != kept.stamp.Vectors {
		return false, nil, nil
	}
	for _, hash := range []struct {
		key   string
		names []string
		equal func(name, raw string) bool
	}{
		{c.cfg.Keys.Tools(), entries, func(name, raw string) bool {
			e, err := contract.ParseEntry(name, raw)
			i, ok := slices.BinarySearchFunc(doc.Tools, name, func(t contract.Tool, name string) int { return strings.Compare(t.Name, name) })
			return err == nil && ok && e.Equal(doc.Entry(i))
		}},
		{c.cfg.Keys.Metadata(), metadata, func(name, raw string) bool {
			want := st.Tools.Get(name)
			if want.MetadataDigest != 0 {
				return contract.MetadataDigest(raw) == want.MetadataDigest
			}
			m, err := contract.ParseMetadata(raw)
			if err != nil || want.Metadata == nil {
				return err != nil && want.MetadataErr != nil
			}
			return m.Equal(want.Metadata)
		}},
		{c.cfg.Keys.Embeddings(), vectors, func(name, raw string) bool {
			return contract.VectorDigestString(raw) == st.Tools.Get(name).Vector
		}},
	} {
		same, n := true, 0
		err := contract.ReadFields(ctx, c.rc, hash.key, hash.names, func(name, raw string) {
			n++
			same = same && hash.equal(name, raw)
		})
		if err != nil || !same || n != len(hash.names) {
			return false, nil, err
		}
	}
	// Every writer of the hashes moves P:version: the fields read belong
	// to the kept version when the stamp is still its.
	stamp, staged, err := versions.ReadStamp(ctx, c.rc, c.cfg.Keys)
	if err != nil {
		return false, nil, err
	}
	return stamp == kept.stamp, staged, nil
}

// Learned reads the recorded requests of a learning catalog, dropping
// those past retention or beyond the cap, and picks each tool's learned
// queries. A catalog that stopped learning has its recorded requests
// deleted (its tools are then re-embedded without them).
func (c *State) Learned(ctx context.Context, stored catalog.Stored, tools []*catalog.Tool) (map[string][]string, error) {
	learned, err := c.learned(ctx, stored, tools)
	if err != nil {
		metrics.RedisErrors.WithLabelValues(c.id, "read").Inc()
	}
	return learned, err
}

func (c *State) learned(ctx context.Context, stored catalog.Stored, tools []*catalog.Tool) (map[string][]string, error) {
	l := c.cfg.Learning
	if l == nil {
		if stored.Doc != nil && stored.Doc.Search.LearnFromRequests {
			return nil, contract.PurgeRequests(ctx, c.rc, c.cfg.Keys)
		}
		return nil, nil
	}
	recorded, err := contract.TrimRequests(ctx, c.rc, c.cfg.Keys, c.cs.now().Add(-l.Retention), l.MaxRecorded)
	if err != nil {
		return nil, err
	}
	examples := make(map[string][]string, len(tools))
	for _, t := range tools {
		examples[t.Entry.Name] = t.Examples
	}
	return catalog.Learn(recorded, examples, catalog.LearnOptions{PerTool: l.PerTool, MinCount: l.MinCount, MinPrincipals: l.MinPrincipals}), nil
}

// Stage keeps the vectors and metadata of a build that may not be
// published yet for the version that may carry them. It returns
// contract.ErrConflict when the version read is no longer current.
func (c *State) Stage(ctx context.Context, stored catalog.Stored, b catalog.Build) error {
	err := versions.Stage(ctx, c.rc, c.cfg.Keys, stored.Version, b.Vectors, b.Metadata)
	if err != nil && !errors.Is(err, contract.ErrConflict) {
		metrics.RedisErrors.WithLabelValues(c.id, "write").Inc()
	}
	return err
}

// Publish writes the build as the version after both the one read and
// floor, in one MULTI/EXEC, then announces it and keeps what it wrote as
// the stored state. floor is the last version recorded elsewhere (the
// catalog's status), so that after Redis lost the catalog consumers see a
// newer version, not an older one. It returns contract.ErrConflict when
// the version read is no longer current; then the next pass reads
// everything.
func (c *State) Publish(ctx context.Context, stored catalog.Stored, b catalog.Build, floor int64) (int64, error) {
	read := stored.Version
	version := max(read, floor) + 1
	b.Document.Version = version
	start := c.cs.now()
	err := versions.Write(ctx, c.rc, c.cfg.Keys, versions.Update{
		ExpectVersion: read, Document: b.Document, Previous: stored.Doc, Rewrite: !stored.Contract2,
		Vectors: b.Vectors, Metadata: b.Metadata, Remove: b.Removed, Retain: c.cfg.Retain, Kept: b.Kept,
	})
	if err != nil {
		c.keep(nil)
		if !errors.Is(err, contract.ErrConflict) {
			metrics.RedisErrors.WithLabelValues(c.id, "write").Inc()
		}
		return 0, err
	}
	metrics.PublishDuration.WithLabelValues(c.id).Observe(c.cs.now().Sub(start).Seconds())
	metrics.ToolsEmbedded.WithLabelValues(c.id).Add(float64(len(b.Vectors)))

	notice, _ := json.Marshal(contract.NoticeOf(b.Document))
	if err := versions.Notify(ctx, c.rc, c.cfg.Channel, notice); err != nil {
		// The version is written; consumers that missed the notice find
		// it when they next check P:version.
		metrics.RedisErrors.WithLabelValues(c.id, "notify").Inc()
		ctrl.LoggerFrom(ctx).Error(err, "Published version but could not announce it", "version", version)
	}
	c.saw(version)
	c.keepPublished(ctx, stored, b, version)
	return version, nil
}

// keepPublished keeps what a publish wrote as the catalog's stored state,
// once Redis's stamp confirms that it holds that version; otherwise the
// next pass reads everything.
func (c *State) keepPublished(ctx context.Context, stored catalog.Stored, b catalog.Build, version int64) {
	next, err := stored.Published(b, version)
	if err != nil {
		c.keep(nil)
		return
	}
	stamp, _, err := versions.ReadStamp(ctx, c.rc, c.cfg.Keys)
	if err != nil || stamp.Version != version {
		c.keep(nil)
		return
	}
	readAt := c.cs.now()
	if kept := c.kept(); kept != nil {
		readAt = kept.readAt
	}
	c.keep(&snapshot{uid: c.uid, where: c.where(), stamp: stamp, stored: next, readAt: readAt})
}

// Vectors reads the published vectors of the named tools, for what
// indexes a version outside the pass (grading): the stored state keeps
// only their digests.
func (c *State) Vectors(ctx context.Context, names []string) (map[string]string, error) {
	vecs, err := contract.ReadVectors(ctx, c.rc, c.cfg.Keys, names)
	if err != nil {
		metrics.RedisErrors.WithLabelValues(c.id, "read").Inc()
	}
	return vecs, err
}

// RecordQuality keeps a version's self-grading with the retained
// versions, for consumers that chart it.
func (c *State) RecordQuality(ctx context.Context, q contract.Quality) error {
	err := versions.RecordQuality(ctx, c.rc, c.cfg.Keys, q, c.cfg.Retain)
	if err != nil {
		metrics.RedisErrors.WithLabelValues(c.id, "write").Inc()
	}
	return err
}

// Release lets go of the stored state kept for a catalog of fewer than
// KeepMinTools tools, once its pass is done and the grading has taken the
// version it needs: its next pass reads the state whole.
func (c *State) Release() {
	c.cs.mu.Lock()
	defer c.cs.mu.Unlock()
	least := c.cs.KeepMinTools
	if least <= 0 {
		least = DefaultKeepMinTools
	}
	if s := c.mem.snapshot; s != nil && s.stored.Tools.Len() < least {
		// The next pass reads a state of its own, which no plan kept
		// here was made from.
		c.mem.snapshot = nil
		c.mem.planner.Forget()
	}
}

// Kept returns the stored state kept for version, the one a pass read or
// published, if that is what is kept.
func (c *State) Kept(version int64) (catalog.Stored, bool) {
	kept := c.kept()
	if kept == nil || kept.stored.Doc == nil || kept.stored.Doc.Version != version {
		return catalog.Stored{}, false
	}
	return kept.stored, true
}
