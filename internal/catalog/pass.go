package catalog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalogconfig"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/internal/querystore"
	"github.com/toolcatalog/tool-catalog-operator/internal/reconcile"
	"github.com/toolcatalog/tool-catalog-operator/internal/telemetry"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// DefaultPassTimeout bounds one pass's provider work should a provider
// hang.
const DefaultPassTimeout = 10 * time.Minute

// Pass conducts one refresh of a catalog, step by step: resolve its
// settings, select its tools, read what is published, plan, generate and
// embed, build, stage, publish, and hold the version its pin asks for.
// It reaches the world only through the ports it declares (Configs,
// Providers, States, Objects), so every step is called from here and the
// whole of it runs with in-process ports; a failure comes back classified
// (*reconcile.Error), for the reconciler to report.
type Pass struct {
	// Configs resolves a catalog's settings.
	Configs Configs
	// Providers gives each catalog its provider clients.
	Providers catalogconfig.ProviderFactory
	// States opens each catalog's published state.
	States States
	// Objects reads the ToolDefinitions and ToolSources a catalog selects.
	Objects Objects
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Budget bounds the provider work of one pass; the chunk follows the
	// catalog's concurrency and the time is DefaultPassBudget when zero.
	Budget Budget
	// Timeout bounds the provider work of one pass should a provider
	// hang; DefaultPassTimeout when zero.
	Timeout time.Duration
}

// States opens a catalog's published state, kept across passes
// (published.States).
type States interface {
	State(id, uid string, cfg *catalogconfig.Config) State
}

// Configs resolves a catalog's settings, reading its Secrets.
type Configs interface {
	Resolve(ctx context.Context, tc *v1alpha1.ToolCatalog) (*catalogconfig.Config, error)
}

// Objects reads what a catalog selects, as the cache holds it: read-only,
// never to be changed.
type Objects interface {
	// ToolDefinitions lists the ToolDefinitions of a namespace that sel
	// matches.
	ToolDefinitions(ctx context.Context, namespace string, sel labels.Selector) ([]*v1alpha1.ToolDefinition, error)
	// Lookup finds ToolDefinitions by namespace and name, nil when there
	// is none; ok is false when the objects cannot be looked up one by
	// one (the pass then lists them all).
	Lookup(ctx context.Context) (find func(namespace, name string) *v1alpha1.ToolDefinition, ok bool, err error)
	// ToolSources reads a namespace's ToolSources once.
	ToolSources(ctx context.Context, namespace string) (Sources, error)
}

// State is a catalog's published state and the pass's Redis work, one
// call per step; the pass itself does no Redis I/O. What the grading of
// the version published reads and writes there goes with it.
type State interface {
	// Selector, Changes, Planner, Generated and QueryVectors are kept
	// across passes.
	Selector() *Selector
	Changes() *Changes
	Planner() *Planner
	Generated() *Generated
	QueryVectors() *QueryVectors
	// QueryStore is the namespace's store of query sets and vectors paid
	// for.
	QueryStore() *querystore.Store
	Read(ctx context.Context, how Reading, tools []*Tool) (Stored, error)
	Learned(ctx context.Context, stored Stored, tools []*Tool) (map[string][]string, error)
	Stage(ctx context.Context, stored Stored, b Build) error
	Publish(ctx context.Context, stored Stored, b Build, floor int64) (int64, error)
	Hold(ctx context.Context, cur *contract.Document, pin int64, published map[int64]string) (Hold, error)
	// Kept, Vectors and RecordQuality serve the grading.
	Kept(version int64) (Stored, bool)
	Vectors(ctx context.Context, names []string) (map[string]string, error)
	RecordQuality(ctx context.Context, q contract.Quality) error
	// Release lets go of what is kept of a small catalog's stored state
	// once the pass and its grading's hand-over are done.
	Release()
}

// PassResult is what one pass of a catalog came to: the outcome of a pass
// that ran to the end (published, or found nothing to publish), or the
// error that stopped it.
type PassResult struct {
	Outcome *Outcome
	Err     error
	// Request is the refresh request the pass saw.
	Request Request
	// Resync is when the next periodic pass is due.
	Resync time.Duration
	// At is when the pass started, on the pass's clock.
	At time.Time
	// Hold is what the catalog serves after the pass saw its pin; Held
	// says the pass got that far.
	Hold Hold
	Held bool
	// State and Embedder are what the grading of the version the pass
	// left published needs, set when the pass ran to the end.
	State    State
	Embedder embedding.Embedder
}

func (p *Pass) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func (p *Pass) timeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return DefaultPassTimeout
}

func (p *Pass) budget() Budget {
	b := p.Budget
	if b.Time == 0 {
		b.Time = DefaultPassBudget
	}
	if b.Clock == nil {
		b.Clock = p.now
	}
	return b
}

// Reading says how much of what Redis holds a pass reads again.
type Reading struct {
	// Fresh reads everything again: a refresh request.
	Fresh bool
	// Edits says the pass follows edits the watch named: the periodic
	// check of every field is then due later (catalogconfig.ResyncDue).
	Edits bool
}

// ID is how a catalog is named to its store and providers.
func ID(tc *v1alpha1.ToolCatalog) string { return tc.Namespace + "/" + tc.Name }

// Run resolves the catalog's configuration and runs one refresh.
func (p *Pass) Run(ctx context.Context, tc *v1alpha1.ToolCatalog) PassResult {
	res := PassResult{Resync: catalogconfig.DefaultResync, Request: ReadRequest(tc.Annotations, tc.Status.LastHandledRefreshAt), At: p.now()}
	cfg, err := p.Configs.Resolve(ctx, tc)
	if err != nil {
		res.Err = configError(err)
		return res
	}
	res.Resync = cfg.Resync
	providers, err := p.Providers.Providers(ID(tc), cfg.Providers)
	if err != nil {
		res.Err = configError(err)
		return res
	}
	st := p.States.State(ID(tc), string(tc.UID), cfg)
	// What a catalog of the namespace already paid for is not asked
	// again, unless someone asked for a refresh.
	qs := st.QueryStore()
	qs.Renew = res.Request.Token != ""
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
	res.Outcome, res.Err = p.refresh(ctx, tc, cfg, providers, st, res.Request, res.At)
	if res.Outcome != nil {
		// The grading, later, finds its vectors there too; it is not counted.
		res.Outcome.Reused = Reused{QuerySets: int(reusedSets.Load()), Vectors: int(reusedVectors.Load())}
	}
	if res.Err == nil {
		res.State, res.Embedder = st, providers.Embedder
		res.Hold, res.Err = p.hold(ctx, tc, st, res.Outcome)
		res.Held = res.Err == nil
	}
	return res
}

// hold serves the catalog at spec.publish.pinVersion, or at the newest
// version when it is not set, after the pass left the newest published.
func (p *Pass) hold(ctx context.Context, tc *v1alpha1.ToolCatalog, st State, o *Outcome) (Hold, error) {
	var pin int64
	if v := tc.Spec.Publish.PinVersion; v != nil {
		pin = *v
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

// refresh runs the pipeline: select, read, plan, generate and embed,
// build, stage, publish. now is when the pass started.
func (p *Pass) refresh(ctx context.Context, tc *v1alpha1.ToolCatalog, cfg *catalogconfig.Config, prov catalogconfig.Providers, st State, req Request, now time.Time) (*Outcome, error) {
	sctx, span := step(ctx, "select")
	sel, edits, err := p.selection(sctx, tc, cfg, st)
	endStep(span, err)
	if err != nil {
		return nil, err
	}
	rctx, span := step(ctx, "read")
	stored, err := st.Read(rctx, Reading{Fresh: req.Token != "", Edits: edits}, sel.Tools)
	var learned map[string][]string
	if err == nil {
		learned, err = st.Learned(rctx, stored, sel.Tools)
	}
	endStep(span, err)
	if err != nil {
		return nil, redisError(tc, err)
	}
	_, span = step(ctx, "plan")
	plans, reuse := st.Planner().Plan(PlanInput{
		Tools: sel.Tools, Stored: stored.Tools, Lineage: stored.Lineage(),
		Model: prov.Embedder.Model(), Dimensions: cfg.Dimensions, QueriesPerTool: cfg.QueriesPerTool,
		Mode: req.Mode, Targets: req.Targets, Learned: learned,
	})
	span.End()
	// Provider work is bounded by the budget and, should a provider hang,
	// by the pass timeout; reading and publishing are not, so the tools
	// refreshed before a timeout are still published.
	workCtx, span := step(ctx, "generate and embed")
	workCtx, cancel := context.WithTimeout(workCtx, p.timeout())
	// The grading of the version reads the query vectors a provider was
	// paid for from the query store; those of a model the store does not
	// keep (the builtin one, whose vectors cost time) are handed to it.
	emb := prov.Embedder
	if embedding.IdentityOf(emb) == "" {
		emb = st.QueryVectors().Recording(emb)
	}
	refreshed := Refresh(workCtx, Providers{Generator: prov.Generator, Embedder: emb, Concurrency: cfg.Concurrency, Generated: st.Generated()}, plans, now, p.budget())
	cancel()
	span.SetAttributes(attribute.Int("toolcatalog.refreshed", len(refreshed.Results)), attribute.Int("toolcatalog.failed", len(refreshed.Failures)))
	span.End()
	_, span = step(ctx, "build")
	build, err := BuildDocument(BuildInput{
		Catalog: ID(tc), CatalogUID: string(tc.UID), DocumentKey: cfg.Keys.Head(), Provider: cfg.Provider, Model: prov.Embedder.Model(), Dimensions: cfg.Dimensions, Search: cfg.Search,
		Plans: plans, Rejected: sel.Rejected, Refreshed: refreshed, Stored: stored, Now: now,
	})
	endStep(span, err)
	if err != nil {
		return nil, err
	}
	out := &Outcome{
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
// watch named as changed since the last pass are looked at (Changes,
// Selector.Update); every one is on the catalog's first pass, after a
// change of its selector, of a ToolSource of its namespace or of more
// than MaxChanges ToolDefinitions, and at each resync (ResyncDue). It
// reports whether the pass follows edits the watch named.
func (p *Pass) selection(ctx context.Context, tc *v1alpha1.ToolCatalog, cfg *catalogconfig.Config, st State) (Selection, bool, error) {
	objects, whole := st.Changes().Take()
	sel, whole, err := p.selectFrom(ctx, tc, cfg, st.Selector(), objects, whole)
	trace.SpanFromContext(ctx).SetAttributes(attribute.Bool("toolcatalog.select.whole", whole), attribute.Int("toolcatalog.select.changed", len(objects)))
	if err != nil {
		// What was taken is not lost: the next pass selects whole.
		st.Changes().All()
	}
	return sel, len(objects) > 0, err
}

// selectFrom selects with s, from the objects changed or whole, and
// reports whether it selected whole.
func (p *Pass) selectFrom(ctx context.Context, tc *v1alpha1.ToolCatalog, cfg *catalogconfig.Config, s *Selector, objects []string, whole bool) (Selection, bool, error) {
	selector, err := metav1.LabelSelectorAsSelector(&tc.Spec.Selector)
	if err != nil {
		return Selection{}, true, &reconcile.Error{Reason: v1alpha1.ReasonInvalidConfiguration, Message: fmt.Sprintf("spec.selector: %v", err), Kind: reconcile.Stalled, Also: []string{v1alpha1.ConditionPublished}, Err: err}
	}
	sources, err := p.Objects.ToolSources(ctx, tc.Namespace)
	if err != nil {
		return Selection{}, true, &reconcile.Error{Reason: v1alpha1.ReasonAPIError, Message: fmt.Sprintf("%v; retrying with backoff", err), Err: err}
	}
	made, now := s.Made(), p.now()
	if !whole && made.Key == selector.String() && !cfg.ResyncDue(now.Sub(made.At), len(objects) > 0) {
		if sel, ok, updateErr := p.updateSelection(ctx, tc.Namespace, selector, s, objects, sources); updateErr != nil || ok {
			return sel, false, updateErr
		}
	}
	tds, err := p.Objects.ToolDefinitions(ctx, tc.Namespace, selector)
	if err != nil {
		return Selection{}, true, listError(err)
	}
	sel, err := s.Select(tds, sources, Made{At: now, Key: selector.String()})
	return sel, true, err
}

// updateSelection updates the selection of s with the objects changed,
// as the cache holds them; ok is false when they cannot be looked up or
// there is no selection to update.
func (p *Pass) updateSelection(ctx context.Context, namespace string, selector labels.Selector, s *Selector, objects []string, sources Sources) (sel Selection, ok bool, err error) {
	find, ok, err := p.Objects.Lookup(ctx)
	if err != nil || !ok {
		return Selection{}, false, listError(err)
	}
	return s.Update(objects, func(name string) *v1alpha1.ToolDefinition {
		td := find(namespace, name)
		if td == nil || !selector.Matches(labels.Set(td.Labels)) {
			return nil
		}
		return td
	}, sources)
}

// configError classifies a failure to resolve the configuration.
func configError(err error) error {
	var cerr *catalogconfig.Error
	if errors.As(err, &cerr) {
		return &reconcile.Error{Reason: cerr.Reason, Message: cerr.Message, Kind: reconcile.Stalled, Also: []string{v1alpha1.ConditionPublished}, Err: err}
	}
	return &reconcile.Error{Reason: v1alpha1.ReasonAPIError, Message: fmt.Sprintf("resolving the configuration: %v; retrying with backoff", err), Err: err}
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
		Message: fmt.Sprintf("cannot reach Redis at %s: %v; retrying every few seconds, nothing was written", strings.Join(tc.Spec.Redis.Addresses, ","), err)}
}

// writeError classifies a failure to write Redis: a conflict (another
// writer published meanwhile) is retried as is.
func writeError(tc *v1alpha1.ToolCatalog, err error) error {
	if errors.Is(err, contract.ErrConflict) {
		return err
	}
	return redisError(tc, err)
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
