package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/metrics"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// buildDocument assembles the catalog document. A tool is published with
// its current spec when its embedding is current (or was made current in
// this pass). A tool that failed, is deferred, rejected or in conflict keeps
// the entry and vector it was last published with, if any: nothing already
// published is lost because of a bad edit or a provider outage.
func (p *pass) buildDocument(now time.Time) error {
	model := p.cfg.Embedder.Model()
	doc := &contract.Document{
		Catalog:     p.tc.Namespace + "/" + p.tc.Name,
		Embedding:   contract.EmbeddingInfo{Provider: p.cfg.Provider, Model: model, Dimensions: p.cfg.Dimensions},
		Search:      p.cfg.Search,
		Permissions: map[string][]string{},
	}
	inDoc := map[string]bool{}
	keepPrevious := func(name string) {
		prev, ok := p.prevDoc.ToolByName(name)
		if !ok || inDoc[name] || p.snap.Vectors[name] == nil {
			return
		}
		doc.Tools = append(doc.Tools, prev)
		if perms, ok := p.prevDoc.Permissions[name]; ok {
			doc.Permissions[name] = perms
		}
		inDoc[name] = true
	}
	for i, t := range p.tools {
		name := t.entry.Name
		_, embedded := p.results[name]
		if embedded || !p.plans[i].Stale {
			doc.Tools = append(doc.Tools, t.entry)
			if perms := t.td.Spec.Permissions; perms != nil && len(perms.AllowedPrincipals) > 0 {
				doc.Permissions[name] = perms.AllowedPrincipals
			}
			inDoc[name] = true
			continue
		}
		keepPrevious(name)
	}
	for _, f := range p.failures {
		if p.tool(f.tool) == nil {
			keepPrevious(f.tool)
		}
	}

	// Never publish vectors of two models side by side: consumers compare
	// every vector with a query embedded by one model.
	var others []string
	for name := range inDoc {
		m, dims := p.vectorModel(name)
		if doc.Embedding.Dimensions == 0 {
			doc.Embedding.Dimensions = dims
		}
		if m != model || (doc.Embedding.Dimensions != 0 && dims != doc.Embedding.Dimensions) {
			others = append(others, name)
		}
	}
	if len(others) > 0 {
		sort.Strings(others)
		p.blocked = fmt.Sprintf("%d tools (%s) still have vectors of another model or size than %s; the previous version stays published until they are re-embedded",
			len(others), strings.Join(others, ", "), model)
	}

	for name := range p.stored {
		if !inDoc[name] {
			p.removed = append(p.removed, name)
		}
	}
	sort.Strings(p.removed)
	if err := doc.Seal(); err != nil {
		return fmt.Errorf("building catalog document: %w", err)
	}
	doc.GeneratedAt = now.UTC()
	p.doc = doc
	return nil
}

// vectorModel returns the model and length of the vector a tool will have.
func (p *pass) vectorModel(name string) (string, int) {
	if r, ok := p.results[name]; ok {
		return r.meta.Model, r.meta.Dimensions
	}
	if m := p.stored[name].Metadata; m != nil {
		return m.Model, m.Dimensions
	}
	return "", 0
}

// publish writes a new version when the document or any vector changed,
// in one MULTI/EXEC, then announces it.
func (r *ToolCatalogReconciler) publish(ctx context.Context, p *pass, rc redis.UniversalClient) error {
	p.version = p.snap.Version
	if p.blocked != "" {
		return nil
	}
	vectors, metas := map[string][]byte{}, map[string][]byte{}
	for name, res := range p.results {
		if p.stored[name].HasVector && string(p.snap.Vectors[name]) == string(res.vector) && sameEmbedding(p.stored[name].Metadata, &res.meta) {
			continue
		}
		raw, err := res.meta.Marshal()
		if err != nil {
			return fmt.Errorf("encoding metadata of %s: %w", name, err)
		}
		vectors[name], metas[name] = res.vector, raw
	}
	changed := p.prevDoc == nil || p.prevDoc.SchemaHash != p.doc.SchemaHash || p.prevDoc.Version != p.snap.Version ||
		len(p.removed) > 0 || len(vectors) > 0
	if !changed {
		return nil
	}

	// After Redis lost the catalog, continue from the last version the
	// status recorded so consumers see a newer version, not an older one.
	version := max(p.snap.Version, p.tc.Status.Version) + 1
	p.doc.Version = version
	data, err := p.doc.Marshal()
	if err != nil {
		return fmt.Errorf("encoding catalog document: %w", err)
	}
	id := catalogID(p.tc)
	start := time.Now()
	err = contract.Write(ctx, rc, p.cfg.Keys, contract.Update{
		ExpectVersion: p.snap.Version, Version: version, Document: data,
		Vectors: vectors, Metadata: metas, Remove: p.removed, Retain: p.cfg.Retain,
	})
	if errors.Is(err, contract.ErrConflict) {
		return err
	}
	if err != nil {
		metrics.RedisErrors.WithLabelValues(id, "write").Inc()
		return &redisError{err}
	}
	metrics.PublishDuration.WithLabelValues(id).Observe(time.Since(start).Seconds())
	metrics.ToolsEmbedded.WithLabelValues(id).Add(float64(len(vectors)))
	p.version, p.published = version, true
	for name, raw := range metas {
		if m, err := contract.ParseMetadata(string(raw)); err == nil {
			p.stored[name] = catalog.StoredTool{Metadata: m, HasVector: true}
		}
	}

	notice, _ := json.Marshal(contract.Notice{Catalog: p.doc.Catalog, Version: version, SchemaHash: p.doc.SchemaHash})
	if err := contract.Notify(ctx, rc, p.cfg.Channel, notice); err != nil {
		// The version is written; consumers that missed the notice find
		// it when they next check P:version.
		metrics.RedisErrors.WithLabelValues(id, "notify").Inc()
		ctrl.LoggerFrom(ctx).Error(err, "Published version but could not announce it", "version", version)
	}
	return nil
}

// sameEmbedding reports whether stored metadata describes the same
// embedding as a new one, ignoring when it was computed.
func sameEmbedding(a, b *contract.Metadata) bool {
	return a != nil && b != nil && a.SpecHash == b.SpecHash && a.Model == b.Model && a.Dimensions == b.Dimensions &&
		a.Description == b.Description && slices.Equal(a.SyntheticQueries, b.SyntheticQueries)
}
