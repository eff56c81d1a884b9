package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalogconfig"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/internal/grading"
	"github.com/toolcatalog/tool-catalog-operator/internal/published"
	"github.com/toolcatalog/tool-catalog-operator/internal/reconcile"
	"github.com/toolcatalog/tool-catalog-operator/internal/telemetry"
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
	// grade hands the version the pass left published to the grading.
	grade func()
	// at is when the pass started, on the reconciler's clock.
	at time.Time
	// hold is what the catalog serves after the pass saw its pin; held
	// says the pass got that far.
	hold published.Hold
	held bool
}

// runPass resolves the catalog's configuration and runs one refresh.
func (r *ToolCatalogReconciler) runPass(ctx context.Context, tc *v1alpha1.ToolCatalog) passResult {
	res := passResult{resync: catalogconfig.DefaultResync, request: catalog.ReadRequest(tc.Annotations, tc.Status.LastHandledRefreshAt), at: r.now()}
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
	st := r.catalogs().Open(catalogID(tc), string(tc.UID), cfg)
	// What a catalog of the namespace already paid for is not asked
	// again, unless someone asked for a refresh.
	qs := st.QueryStore()
	qs.Renew = res.request.Token != ""
	var reusedSets, reusedVectors atomic.Int64
	observe := qs.Observe
	qs.Observe = func(kind, outcome string, n int) {
		if observe != nil {
			observe(kind, outcome, n)
		}
		switch {
		case outcome != "hit":
		case kind == "queries":
			reusedSets.Add(int64(n))
		default:
			reusedVectors.Add(int64(n))
		}
	}
	providers.Generator, providers.Embedder = qs.Generator(providers.Generator), qs.Embedder(providers.Embedder)
	res.outcome, res.err = r.refresh(ctx, tc, cfg, providers, st, res.request, res.at)
	if res.outcome != nil {
		// The grading, later, finds its vectors there too; it is not counted.
		res.outcome.Reused = catalog.Reused{QuerySets: int(reusedSets.Load()), Vectors: int(reusedVectors.Load())}
	}
	if res.err == nil {
		res.grade = func() {
			r.grades().Submit(tc, providers.Embedder, st, res.outcome)
			st.Release()
		}
		res.hold, res.err = r.hold(ctx, tc, st, res.outcome)
		res.held = res.err == nil
	}
	return res
}

// hold serves the catalog at spec.publish.pinVersion, or at the newest
// version when it is not set, after the pass left the newest published.
func (r *ToolCatalogReconciler) hold(ctx context.Context, tc *v1alpha1.ToolCatalog, st publishedState, o *catalog.Outcome) (published.Hold, error) {
	var pin int64
	if p := tc.Spec.Publish.PinVersion; p != nil {
		pin = *p
	}
	cur := o.Stored.Doc
	if o.Published {
		cur = o.Build.Document
	}
	hctx, span := step(ctx, "pin")
	published := map[int64]string{}
	for _, v := range tc.Status.PublishedVersions {
		published[v.Version] = v.SchemaHash
	}
	h, err := st.Hold(hctx, cur, pin, published)
	endStep(span, err)
	if err != nil {
		return h, redisError(tc, err)
	}
	return h, nil
}

// configError classifies a failure to resolve the configuration.
func configError(err error) error {
	var cerr *catalogconfig.Error
	if errors.As(err, &cerr) {
		return &reconcile.Error{Reason: cerr.Reason, Message: cerr.Message, Kind: reconcile.Stalled, Also: []string{v1alpha1.ConditionPublished}, Err: err}
	}
	return &reconcile.Error{Reason: v1alpha1.ReasonAPIError, Message: fmt.Sprintf("resolving the configuration: %v; retrying with backoff", err), Err: err}
}

// publishedState is the pass's Redis work for one catalog, one call per
// step (published.Catalog); the pass itself does no Redis I/O. What the
// grading of the version published reads and writes there goes with it.
type publishedState interface {
	grading.Published
	// Selector, Changes, Planner and Generated are kept across passes,
	// as QueryVectors is.
	Selector() *catalog.Selector
	Changes() *catalog.Changes
	Planner() *catalog.Planner
	Generated() *catalog.Generated
	Read(ctx context.Context, fresh bool, tools []*catalog.Tool) (catalog.Stored, error)
	Learned(ctx context.Context, stored catalog.Stored, tools []*catalog.Tool) (map[string][]string, error)
	Stage(ctx context.Context, stored catalog.Stored, b catalog.Build) error
	Publish(ctx context.Context, stored catalog.Stored, b catalog.Build, floor int64) (int64, error)
	Hold(ctx context.Context, cur *contract.Document, pin int64, published map[int64]string) (published.Hold, error)
	// Release lets go of what is kept of a small catalog's stored state
	// once the pass and its grading's hand-over are done.
	Release()
}

// refresh runs the pipeline of internal/catalog: select, read, plan,
// generate and embed, build, publish. now is when the pass started.
func (r *ToolCatalogReconciler) refresh(ctx context.Context, tc *v1alpha1.ToolCatalog, cfg *catalogconfig.Config, prov catalogconfig.Providers, st publishedState, req catalog.Request, now time.Time) (*catalog.Outcome, error) {
	sctx, span := step(ctx, "select")
	sel, err := r.selection(sctx, tc, cfg, st)
	endStep(span, err)
	if err != nil {
		return nil, err
	}
	rctx, span := step(ctx, "read")
	stored, err := st.Read(rctx, req.Token != "", sel.Tools)
	var learned map[string][]string
	if err == nil {
		learned, err = st.Learned(rctx, stored, sel.Tools)
	}
	endStep(span, err)
	if err != nil {
		return nil, redisError(tc, err)
	}
	_, span = step(ctx, "plan")
	plans, reuse := st.Planner().Plan(catalog.PlanInput{
		Tools: sel.Tools, Stored: stored.Tools, Lineage: stored.Lineage(),
		Model: prov.Embedder.Model(), Dimensions: cfg.Dimensions, QueriesPerTool: cfg.QueriesPerTool,
		Mode: req.Mode, Targets: req.Targets, Learned: learned,
	})
	span.End()
	// Provider work is bounded by the budget and, should a provider hang,
	// by the pass timeout; reading and publishing are not, so the tools
	// refreshed before a timeout are still published.
	workCtx, span := step(ctx, "generate and embed")
	workCtx, cancel := context.WithTimeout(workCtx, r.passTimeout())
	// The grading of the version reads the query vectors a provider was
	// paid for from the query store; those of a model the store does not
	// keep (the builtin one, whose vectors cost time) are handed to it.
	emb := prov.Embedder
	if embedding.IdentityOf(emb) == "" {
		emb = st.QueryVectors().Recording(emb)
	}
	refreshed := catalog.Refresh(workCtx, catalog.Providers{Generator: prov.Generator, Embedder: emb, Concurrency: cfg.Concurrency, Generated: st.Generated()}, plans, now, r.budget())
	cancel()
	span.SetAttributes(attribute.Int("toolcatalog.refreshed", len(refreshed.Results)), attribute.Int("toolcatalog.failed", len(refreshed.Failures)))
	span.End()
	_, span = step(ctx, "build")
	build, err := catalog.BuildDocument(catalog.BuildInput{
		Catalog: catalogID(tc), CatalogUID: string(tc.UID), DocumentKey: cfg.Keys.Head(), Provider: cfg.Provider, Model: prov.Embedder.Model(), Dimensions: cfg.Dimensions, Search: cfg.Search,
		Plans: plans, Rejected: sel.Rejected, Refreshed: refreshed, Stored: stored, Now: now,
	})
	endStep(span, err)
	if err != nil {
		return nil, err
	}
	out := &catalog.Outcome{
		Catalog: tc.Name, Model: prov.Embedder.Model(), Plans: plans, Reuse: reuse, Rejected: sel.Rejected,
		Refreshed: refreshed, Build: build, Stored: stored, Version: stored.Version,
	}
	if build.Blocked != "" && len(build.Vectors) > 0 {
		// Keep the work of this pass for the version that may carry it.
		sctx, span := step(ctx, "stage")
		stageErr := st.Stage(sctx, stored, build)
		endStep(span, stageErr)
		if stageErr != nil {
			return nil, writeError(tc, stageErr)
		}
	}
	if build.Changed {
		pctx, span := step(ctx, "publish")
		out.Version, err = st.Publish(pctx, stored, build, tc.Status.Version)
		span.SetAttributes(attribute.Int64("toolcatalog.version", out.Version))
		endStep(span, err)
		if err != nil {
			return nil, writeError(tc, err)
		}
		out.Published = true
	}
	return out, nil
}

// selection selects the catalog's tools. Only the ToolDefinitions the
// watch named as changed since the last pass are looked at
// (catalog.Changes, Selector.Update); every one is on the catalog's first
// pass, after a change of its selector, of a ToolSource of its namespace
// or of more than catalog.MaxChanges ToolDefinitions, and at each resync.
func (r *ToolCatalogReconciler) selection(ctx context.Context, tc *v1alpha1.ToolCatalog, cfg *catalogconfig.Config, st publishedState) (catalog.Selection, error) {
	objects, whole := st.Changes().Take()
	sel, whole, err := r.selectFrom(ctx, tc, cfg, st.Selector(), objects, whole)
	trace.SpanFromContext(ctx).SetAttributes(attribute.Bool("toolcatalog.select.whole", whole), attribute.Int("toolcatalog.select.changed", len(objects)))
	if err != nil {
		// What was taken is not lost: the next pass selects whole.
		st.Changes().All()
	}
	return sel, err
}

// selectFrom selects with s, from the objects changed or whole, and
// reports whether it selected whole.
func (r *ToolCatalogReconciler) selectFrom(ctx context.Context, tc *v1alpha1.ToolCatalog, cfg *catalogconfig.Config, s *catalog.Selector, objects []string, whole bool) (catalog.Selection, bool, error) {
	selector, err := metav1.LabelSelectorAsSelector(&tc.Spec.Selector)
	if err != nil {
		return catalog.Selection{}, true, &reconcile.Error{Reason: v1alpha1.ReasonInvalidConfiguration, Message: fmt.Sprintf("spec.selector: %v", err), Kind: reconcile.Stalled, Also: []string{v1alpha1.ConditionPublished}, Err: err}
	}
	sources, err := toolSources(ctx, r.Client, tc.Namespace)
	if err != nil {
		return catalog.Selection{}, true, &reconcile.Error{Reason: v1alpha1.ReasonAPIError, Message: fmt.Sprintf("%v; retrying with backoff", err), Err: err}
	}
	made, now := s.Made(), r.now()
	if !whole && made.Key == selector.String() && now.Sub(made.At) < cfg.Resync {
		if sel, ok, updateErr := r.updateSelection(ctx, tc.Namespace, selector, s, objects, sources); updateErr != nil || ok {
			return sel, false, updateErr
		}
	}
	// Read-only: the pass never changes the objects, so the cache's own
	// do.
	tds, err := r.toolDefinitions(ctx, tc.Namespace, selector)
	if err != nil {
		return catalog.Selection{}, true, listError(err)
	}
	sel, err := s.Select(tds, sources, catalog.Made{At: now, Key: selector.String()})
	return sel, true, err
}

// updateSelection updates the selection of s with the objects changed,
// as the informer's store holds them; ok is false when there is no store
// or no selection to update.
func (r *ToolCatalogReconciler) updateSelection(ctx context.Context, namespace string, selector labels.Selector, s *catalog.Selector, objects []string, sources catalog.Sources) (sel catalog.Selection, ok bool, err error) {
	idx, err := r.toolDefinitionIndex(ctx)
	if err != nil || idx == nil {
		return catalog.Selection{}, false, listError(err)
	}
	return s.Update(objects, func(name string) *v1alpha1.ToolDefinition {
		obj, exists, err := idx.GetByKey(namespace + "/" + name)
		td, _ := obj.(*v1alpha1.ToolDefinition)
		if err != nil || !exists || td == nil || !selector.Matches(labels.Set(td.Labels)) {
			return nil
		}
		return td
	}, sources)
}

// listError classifies a failure to list ToolDefinitions; nil stays nil.
func listError(err error) error {
	if err == nil {
		return nil
	}
	return &reconcile.Error{Reason: v1alpha1.ReasonAPIError, Message: fmt.Sprintf("listing ToolDefinitions: %v; retrying with backoff", err), Err: err}
}

// redisError classifies a failure to read or write Redis.
func redisError(tc *v1alpha1.ToolCatalog, err error) error {
	return &reconcile.Error{Reason: v1alpha1.ReasonRedisUnavailable, Also: []string{v1alpha1.ConditionPublished}, Err: err,
		Message: fmt.Sprintf("cannot reach Redis at %s: %v; retrying every few seconds, nothing was written", joinAddresses(tc), err)}
}

// step starts the span of one step of the pass.
func step(ctx context.Context, name string) (context.Context, trace.Span) {
	return telemetry.Tracer().Start(ctx, name)
}

// endStep ends a step's span, marking it failed with err.
func endStep(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// writeError classifies a failure to write Redis: a conflict (another
// writer published meanwhile) is retried as is.
func writeError(tc *v1alpha1.ToolCatalog, err error) error {
	if errors.Is(err, contract.ErrConflict) {
		return err
	}
	return redisError(tc, err)
}
