package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalogconfig"
	"github.com/toolcatalog/tool-catalog-operator/internal/metrics"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// passResult is what one pass of a catalog came to: the outcome of a pass
// that ran to the end (published, or found nothing to publish), or the
// error that stopped it.
type passResult struct {
	outcome *catalog.Outcome
	err     error
	// request is the refresh request the pass saw.
	request catalog.Request
	// resync is when the next periodic pass is due.
	resync time.Duration
	// quality is the self-grading of a version the pass graded.
	quality *v1alpha1.CatalogQuality
}

// stepError is a step's failure, classified for status: the condition
// reason, a message that says what happened and what to do, and whether
// retrying can help before something changes.
type stepError struct {
	reason, message string
	// terminal means the user must change the catalog or a Secret.
	terminal bool
	// published means the step failed to reach Redis (Published=False).
	published bool
	err       error
}

func (e *stepError) Error() string { return e.message }
func (e *stepError) Unwrap() error { return e.err }

// runPass resolves the catalog's configuration and runs one refresh.
func (r *ToolCatalogReconciler) runPass(ctx context.Context, tc *v1alpha1.ToolCatalog) passResult {
	res := passResult{resync: catalogconfig.DefaultResync, request: catalog.ReadRequest(tc.Annotations, tc.Status.LastHandledRefreshAt)}
	cfg, err := r.resolver().Resolve(ctx, tc)
	if err != nil {
		res.err = configError(err)
		return res
	}
	res.resync = cfg.Resync
	providers, err := r.providers().Providers(catalogID(tc), cfg.Providers)
	if err != nil {
		res.err = configError(err)
		return res
	}
	res.outcome, res.err = r.refresh(ctx, tc, cfg, providers, res.request)
	if res.err == nil {
		res.quality = r.grade(ctx, tc, providers.Embedder, res.outcome)
	}
	return res
}

// configError classifies a failure to resolve the configuration.
func configError(err error) error {
	var cerr *catalogconfig.Error
	if errors.As(err, &cerr) {
		return &stepError{reason: cerr.Reason, message: cerr.Message, terminal: true, published: true, err: err}
	}
	return &stepError{reason: v1alpha1.ReasonAPIError, message: fmt.Sprintf("resolving the configuration: %v; retrying with backoff", err), err: err}
}

// refresh runs the pipeline of internal/catalog: select, read, plan,
// generate and embed, build, publish.
func (r *ToolCatalogReconciler) refresh(ctx context.Context, tc *v1alpha1.ToolCatalog, cfg *catalogconfig.Config, prov catalogconfig.Providers, req catalog.Request) (*catalog.Outcome, error) {
	tds, err := r.selectedToolDefinitions(ctx, tc)
	if err != nil {
		return nil, err
	}
	sel, err := r.selector(catalogID(tc)).Select(tds)
	if err != nil {
		return nil, err
	}
	rc := r.Redis.Get(catalogID(tc), cfg.Redis)
	stored, err := r.readStored(ctx, rc, tc, cfg, req.Token != "")
	if err != nil {
		metrics.RedisErrors.WithLabelValues(catalogID(tc), "read").Inc()
		return nil, redisError(tc, err)
	}
	learned, err := r.learned(ctx, rc, cfg, stored, sel.Tools)
	if err != nil {
		metrics.RedisErrors.WithLabelValues(catalogID(tc), "read").Inc()
		return nil, redisError(tc, err)
	}
	plans := catalog.Plan(catalog.PlanInput{
		Tools: sel.Tools, Stored: stored.Tools,
		Model: prov.Embedder.Model(), Dimensions: cfg.Dimensions, QueriesPerTool: cfg.QueriesPerTool,
		Mode: req.Mode, Targets: req.Targets, Learned: learned,
	})
	now := r.now()
	// Provider work is bounded by the budget and, should a provider hang,
	// by the pass timeout; reading and publishing are not, so the tools
	// refreshed before a timeout are still published.
	workCtx, cancel := context.WithTimeout(ctx, r.passTimeout())
	// The query vectors embedded are kept to grade the version.
	emb := recordingEmbedder{Embedder: prov.Embedder, keep: r.queryVectorsOf(catalogID(tc))}
	refreshed := catalog.Refresh(workCtx, catalog.Providers{Generator: prov.Generator, Embedder: emb, Concurrency: cfg.Concurrency, Generated: r.generated(catalogID(tc))}, plans, now, r.budget())
	cancel()
	build, err := catalog.BuildDocument(catalog.BuildInput{
		Catalog: catalogID(tc), CatalogUID: string(tc.UID), DocumentKey: cfg.Keys.Head(), Provider: cfg.Provider, Model: prov.Embedder.Model(), Dimensions: cfg.Dimensions, Search: cfg.Search,
		Plans: plans, Rejected: sel.Rejected, Refreshed: refreshed, Stored: stored, Now: now,
	})
	if err != nil {
		return nil, err
	}
	out := &catalog.Outcome{
		Catalog: tc.Name, Model: prov.Embedder.Model(), Plans: plans, Rejected: sel.Rejected,
		Refreshed: refreshed, Build: build, Stored: stored, Version: stored.Version,
	}
	if build.Blocked != "" && len(build.Vectors) > 0 {
		// Keep the work of this pass for the version that may carry it.
		if err := contract.Stage(ctx, rc, cfg.Keys, stored.Version, build.Vectors, build.Metadata); err != nil {
			if errors.Is(err, contract.ErrConflict) {
				return nil, err
			}
			metrics.RedisErrors.WithLabelValues(catalogID(tc), "write").Inc()
			return nil, redisError(tc, err)
		}
	}
	if build.Changed {
		if out.Version, err = r.publish(ctx, rc, tc, cfg, stored, build); err != nil {
			r.snapshots.forget(catalogID(tc))
			return nil, err
		}
		r.keepPublished(ctx, rc, tc, cfg, stored, build, out.Version)
		out.Published = true
	}
	return out, nil
}

// learned reads the recorded requests of a learning catalog, dropping
// those past retention or beyond the cap, and picks each tool's learned
// queries. A catalog that stopped learning has its recorded requests
// deleted (its tools are then re-embedded without them).
func (r *ToolCatalogReconciler) learned(ctx context.Context, rc redis.UniversalClient, cfg *catalogconfig.Config, stored catalog.Stored, tools []catalog.Tool) (map[string][]string, error) {
	l := cfg.Learning
	if l == nil {
		if stored.Doc != nil && stored.Doc.Search.LearnFromRequests {
			return nil, contract.PurgeRequests(ctx, rc, cfg.Keys)
		}
		return nil, nil
	}
	recorded, err := contract.TrimRequests(ctx, rc, cfg.Keys, r.now().Add(-l.Retention), l.MaxRecorded)
	if err != nil {
		return nil, err
	}
	examples := make(map[string][]string, len(tools))
	for _, t := range tools {
		examples[t.Entry.Name] = t.Examples
	}
	return catalog.Learn(recorded, examples, catalog.LearnOptions{PerTool: l.PerTool, MinCount: l.MinCount, MinPrincipals: l.MinPrincipals}), nil
}

// selectedToolDefinitions lists the ToolDefinitions the selector matches.
func (r *ToolCatalogReconciler) selectedToolDefinitions(ctx context.Context, tc *v1alpha1.ToolCatalog) ([]v1alpha1.ToolDefinition, error) {
	sel, err := metav1.LabelSelectorAsSelector(&tc.Spec.Selector)
	if err != nil {
		return nil, &stepError{reason: v1alpha1.ReasonInvalidConfiguration, message: fmt.Sprintf("spec.selector: %v", err), terminal: true, published: true, err: err}
	}
	list := &v1alpha1.ToolDefinitionList{}
	// Read-only: the pass never changes the objects, so the cache's own
	// copies do.
	if err := r.List(ctx, list, client.InNamespace(tc.Namespace), client.MatchingLabelsSelector{Selector: sel}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, &stepError{reason: v1alpha1.ReasonAPIError, message: fmt.Sprintf("listing ToolDefinitions: %v; retrying with backoff", err), err: err}
	}
	return list.Items, nil
}

// redisError classifies a failure to read or write Redis.
func redisError(tc *v1alpha1.ToolCatalog, err error) error {
	return &stepError{reason: v1alpha1.ReasonRedisUnavailable, published: true, err: err,
		message: fmt.Sprintf("cannot reach Redis at %s: %v; retrying with backoff, nothing was written", joinAddresses(tc), err)}
}

// publish writes the build as the version after the one read, in one
// MULTI/EXEC, then announces it. After Redis lost the catalog, versions
// continue from the last one the status recorded, so consumers see a newer
// version, not an older one.
func (r *ToolCatalogReconciler) publish(ctx context.Context, rc redis.UniversalClient, tc *v1alpha1.ToolCatalog, cfg *catalogconfig.Config, stored catalog.Stored, b catalog.Build) (int64, error) {
	read := stored.Version
	version := max(read, tc.Status.Version) + 1
	b.Document.Version = version
	id := catalogID(tc)
	start := time.Now()
	err := contract.Write(ctx, rc, cfg.Keys, contract.Update{
		ExpectVersion: read, Document: b.Document, Previous: stored.Doc, Rewrite: !stored.Contract2,
		Vectors: b.Vectors, Metadata: b.Metadata, Remove: b.Removed, Retain: cfg.Retain,
	})
	if errors.Is(err, contract.ErrConflict) {
		return 0, err
	}
	if err != nil {
		metrics.RedisErrors.WithLabelValues(id, "write").Inc()
		return 0, redisError(tc, err)
	}
	metrics.PublishDuration.WithLabelValues(id).Observe(time.Since(start).Seconds())
	metrics.ToolsEmbedded.WithLabelValues(id).Add(float64(len(b.Vectors)))

	notice, _ := json.Marshal(contract.NoticeOf(b.Document))
	if err := contract.Notify(ctx, rc, cfg.Channel, notice); err != nil {
		// The version is written; consumers that missed the notice find
		// it when they next check P:version.
		metrics.RedisErrors.WithLabelValues(id, "notify").Inc()
		ctrl.LoggerFrom(ctx).Error(err, "Published version but could not announce it", "version", version)
	}
	return version, nil
}
