package controllers

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalogconfig"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// snapshots keeps, per catalog, the state the operator last read from or
// wrote to Redis, so a pass reads a few small replies instead of the whole
// catalog when Redis still holds exactly that (same stamp). A refresh
// request, a change of keys and the resync interval read everything again.
type snapshots struct {
	mu      sync.Mutex
	entries map[string]*snapshot
	// selectors remember each catalog's selected tools (catalog.Selector).
	selectors map[string]*catalog.Selector
	// generated keep each catalog's queries not embedded yet.
	generated map[string]*catalog.Generated
	// queryVectors keep each catalog's query vectors for self-grading.
	queryVectors map[string]*queryVectors
}

type snapshot struct {
	// uid and where identify the catalog object and its keys.
	uid, where string
	stamp      contract.Stamp
	stored     catalog.Stored
	readAt     time.Time
}

func where(cfg *catalogconfig.Config) string {
	return fmt.Sprintf("%s@%v/%d", cfg.Keys.Prefix, cfg.Redis.Addresses, cfg.Redis.DB)
}

func (s *snapshots) get(id string) *snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.entries[id]
}

func (s *snapshots) put(id string, snap *snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entries == nil {
		s.entries = map[string]*snapshot{}
	}
	s.entries[id] = snap
}

func (s *snapshots) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.entries, id)
}

// forgetCatalog drops everything kept for a catalog that is gone.
func (s *snapshots) forgetCatalog(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.entries, id)
	delete(s.selectors, id)
	delete(s.generated, id)
	delete(s.queryVectors, id)
}

// generated returns the catalog's queries generated but not embedded yet.
func (r *ToolCatalogReconciler) generated(id string) *catalog.Generated {
	r.snapshots.mu.Lock()
	defer r.snapshots.mu.Unlock()
	return perCatalog(&r.snapshots.generated, id)
}

// selector returns the catalog's Selector.
func (r *ToolCatalogReconciler) selector(id string) *catalog.Selector {
	r.snapshots.mu.Lock()
	defer r.snapshots.mu.Unlock()
	return perCatalog(&r.snapshots.selectors, id)
}

// perCatalog returns the catalog's value of m, made on first use. The
// caller holds the lock that guards m.
func perCatalog[T any](m *map[string]*T, id string) *T {
	if *m == nil {
		*m = map[string]*T{}
	}
	if (*m)[id] == nil {
		(*m)[id] = new(T)
	}
	return (*m)[id]
}

// readStored returns the catalog's stored state: the kept one when Redis
// still holds it, else read whole.
func (r *ToolCatalogReconciler) readStored(ctx context.Context, rc redis.UniversalClient, tc *v1alpha1.ToolCatalog, cfg *catalogconfig.Config, fresh bool) (catalog.Stored, error) {
	id := catalogID(tc)
	if kept := r.snapshots.get(id); kept != nil && !fresh && kept.uid == string(tc.UID) && kept.where == where(cfg) && time.Since(kept.readAt) < cfg.Resync {
		stamp, staged, err := contract.ReadStamp(ctx, rc, cfg.Keys)
		if err != nil {
			return catalog.Stored{}, err
		}
		if stamp == kept.stamp {
			return kept.stored.WithStaged(staged.StagedMetadata, staged.StagedVectors), nil
		}
	}
	snap, err := contract.ReadWithStaged(ctx, rc, cfg.Keys)
	if err != nil {
		return catalog.Stored{}, err
	}
	published := *snap
	published.StagedMetadata, published.StagedVectors = nil, nil
	stored := catalog.ReadStored(&published)
	if snap.Head != nil && stored.DocErr == nil {
		r.snapshots.put(id, &snapshot{uid: string(tc.UID), where: where(cfg), stamp: snap.Stamp(), stored: stored, readAt: time.Now()})
	} else {
		r.snapshots.forget(id)
	}
	return stored.WithStaged(snap.StagedMetadata, snap.StagedVectors), nil
}

// keepPublished keeps what a publish wrote as the catalog's stored state,
// once Redis's stamp confirms that it holds that version; otherwise the
// next pass reads everything.
func (r *ToolCatalogReconciler) keepPublished(ctx context.Context, rc redis.UniversalClient, tc *v1alpha1.ToolCatalog, cfg *catalogconfig.Config, stored catalog.Stored, b catalog.Build, version int64) {
	id := catalogID(tc)
	next, err := stored.Published(b, version)
	if err != nil {
		r.snapshots.forget(id)
		return
	}
	stamp, _, err := contract.ReadStamp(ctx, rc, cfg.Keys)
	if err != nil || stamp.Version != version {
		r.snapshots.forget(id)
		return
	}
	readAt := time.Now()
	if kept := r.snapshots.get(id); kept != nil {
		readAt = kept.readAt
	}
	r.snapshots.put(id, &snapshot{uid: string(tc.UID), where: where(cfg), stamp: stamp, stored: next, readAt: readAt})
}
