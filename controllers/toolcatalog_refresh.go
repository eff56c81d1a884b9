package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalogconfig"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/internal/metrics"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// selectedTool is a valid ToolDefinition selected by the catalog.
type selectedTool struct {
	td       *v1alpha1.ToolDefinition
	entry    contract.Tool
	examples []string
}

// toolFailure says why a ToolDefinition is not (fully) in the catalog.
type toolFailure struct {
	toolDefinition string
	tool           string
	reason         string
	message        string
	// kind classifies provider failures, to tell auth from transient.
	kind embedding.ErrorKind
}

// toolResult is a tool embedded in this pass.
type toolResult struct {
	vector []byte
	meta   contract.Metadata
}

// pass is the state of one incremental refresh of a catalog.
type pass struct {
	tc  *v1alpha1.ToolCatalog
	cfg *catalogconfig.Config

	tools    []selectedTool
	byName   map[string]*selectedTool
	failures []toolFailure
	snap     *contract.Snapshot
	prevDoc  *contract.Document
	stored   map[string]catalog.StoredTool
	plans    []catalog.ToolPlan
	results  map[string]toolResult
	doc      *contract.Document

	// refreshToken is a new refresh request handled by this pass.
	refreshToken string
	mode         catalog.Mode
	targets      []string
	// invalidRefresh explains a refresh request that was ignored.
	invalidRefresh string

	// version is the current version after the pass; published says the
	// pass wrote it.
	version   int64
	published bool
	removed   []string
	// blocked explains why nothing could be published.
	blocked string
}

func (p *pass) fail(f toolFailure) { p.failures = append(p.failures, f) }

// redisError marks a failure to reach Redis.
type redisError struct{ err error }

func (e *redisError) Error() string { return e.err.Error() }
func (e *redisError) Unwrap() error { return e.err }

// refresh runs one incremental pass: select, read, plan, generate, embed,
// publish.
func (r *ToolCatalogReconciler) refresh(ctx context.Context, tc *v1alpha1.ToolCatalog, cfg *catalogconfig.Config) (*pass, error) {
	p := &pass{tc: tc, cfg: cfg, results: map[string]toolResult{}}
	if err := r.selectTools(ctx, p); err != nil {
		return p, err
	}
	rc := r.Redis.Get(catalogID(tc), cfg.Redis)
	snap, err := contract.Read(ctx, rc, cfg.Keys)
	if err != nil {
		metrics.RedisErrors.WithLabelValues(catalogID(tc), "read").Inc()
		return p, &redisError{err}
	}
	p.snap = snap
	p.loadStored()
	p.readRefreshRequest()
	p.plans = catalog.Plan(catalog.PlanInput{
		Tools: p.planTools(), Stored: p.stored,
		Model: cfg.Embedder.Model(), Dimensions: cfg.Dimensions, QueriesPerTool: cfg.QueriesPerTool,
		Mode: p.mode, Targets: p.targets,
	})
	queries := r.generateQueries(ctx, p)
	r.embedTools(ctx, p, queries)
	if err := p.buildDocument(r.now()); err != nil {
		return p, err
	}
	if err := r.publish(ctx, p, rc); err != nil {
		return p, err
	}
	return p, nil
}

// selectTools lists the selected ToolDefinitions, keeps the valid ones and
// records the rejected and the conflicting ones.
func (r *ToolCatalogReconciler) selectTools(ctx context.Context, p *pass) error {
	sel, err := metav1.LabelSelectorAsSelector(&p.tc.Spec.Selector)
	if err != nil {
		return &catalogconfig.Error{Reason: v1alpha1.ReasonInvalidConfiguration, Message: fmt.Sprintf("spec.selector: %v", err)}
	}
	list := &v1alpha1.ToolDefinitionList{}
	if err := r.List(ctx, list, client.InNamespace(p.tc.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return fmt.Errorf("listing ToolDefinitions: %w", err)
	}
	byName := map[string][]*v1alpha1.ToolDefinition{}
	for i := range list.Items {
		td := &list.Items[i]
		if !td.DeletionTimestamp.IsZero() {
			continue
		}
		params := parametersBytes(td)
		if err := catalog.ValidateParameters(params); err != nil {
			p.fail(toolFailure{toolDefinition: td.Name, tool: td.Spec.Name, reason: v1alpha1.ReasonInvalidSpec, message: err.Error()})
			continue
		}
		byName[td.Spec.Name] = append(byName[td.Spec.Name], td)
	}
	for name, tds := range byName {
		if len(tds) > 1 {
			var names []string
			for _, td := range tds {
				names = append(names, td.Name)
			}
			sort.Strings(names)
			for _, td := range tds {
				p.fail(toolFailure{toolDefinition: td.Name, tool: name, reason: v1alpha1.ReasonNameConflict,
					message: fmt.Sprintf("tool name %q is used by ToolDefinitions %s: rename or unselect all but one", name, strings.Join(names, ", "))})
			}
			continue
		}
		td := tds[0]
		hash, err := catalog.SpecHash(td.Spec.Name, td.Spec.Description, parametersBytes(td))
		if err != nil {
			return fmt.Errorf("hashing ToolDefinition %s: %w", td.Name, err)
		}
		entry, err := contract.NormalizeTool(contract.Tool{
			Name: td.Spec.Name, Description: td.Spec.Description, Parameters: parametersBytes(td), Toolset: td.Spec.Toolset,
			AlwaysInclude: td.Spec.AlwaysInclude, AllowRepeat: td.Spec.AllowRepeat, NoBackground: td.Spec.NoBackground, SpecHash: hash,
		})
		if err != nil {
			return err
		}
		p.tools = append(p.tools, selectedTool{td: td, entry: entry, examples: td.Spec.ExampleQueries})
	}
	sort.Slice(p.tools, func(i, j int) bool { return p.tools[i].entry.Name < p.tools[j].entry.Name })
	p.byName = make(map[string]*selectedTool, len(p.tools))
	for i := range p.tools {
		p.byName[p.tools[i].entry.Name] = &p.tools[i]
	}
	return nil
}

// loadStored parses the stored document and per-tool metadata; anything
// unreadable simply counts as stale.
func (p *pass) loadStored() {
	if p.snap.Document != nil {
		if d, err := contract.ParseDocument(p.snap.Document); err == nil {
			p.prevDoc = d
		}
	}
	p.stored = map[string]catalog.StoredTool{}
	for name, raw := range p.snap.Metadata {
		m, err := contract.ParseMetadata(raw)
		_, hasVec := p.snap.Vectors[name]
		p.stored[name] = catalog.StoredTool{Metadata: m, MetadataErr: err, HasVector: hasVec}
	}
	for name := range p.snap.Vectors {
		if _, ok := p.stored[name]; !ok {
			p.stored[name] = catalog.StoredTool{HasVector: true}
		}
	}
}

// readRefreshRequest picks up a refresh annotation not handled before.
func (p *pass) readRefreshRequest() {
	token := p.tc.Annotations[v1alpha1.AnnotationRefreshRequestedAt]
	if token == "" || token == p.tc.Status.LastHandledRefreshAt {
		return
	}
	p.refreshToken = token
	p.mode = catalog.Mode(p.tc.Annotations[v1alpha1.AnnotationRefreshMode])
	if !validRefreshMode(p.mode) {
		p.invalidRefresh = fmt.Sprintf("refresh request %q ignored: %s must be force, invalid-only or embed-only, not %q",
			token, v1alpha1.AnnotationRefreshMode, p.mode)
		p.mode = catalog.ModeNormal
		return
	}
	for _, t := range strings.Split(p.tc.Annotations[v1alpha1.AnnotationRefreshTools], ",") {
		if t = strings.TrimSpace(t); t != "" {
			p.targets = append(p.targets, t)
		}
	}
}

// validRefreshMode reports whether a requested mode is known.
func validRefreshMode(m catalog.Mode) bool {
	switch m {
	case catalog.ModeNormal, catalog.ModeForce, catalog.ModeInvalidOnly, catalog.ModeEmbedOnly:
		return true
	}
	return false
}

func (p *pass) planTools() []catalog.PlanTool {
	out := make([]catalog.PlanTool, len(p.tools))
	for i, t := range p.tools {
		out[i] = catalog.PlanTool{Name: t.entry.Name, SpecHash: t.entry.SpecHash, ExampleQueries: t.examples}
	}
	return out
}

// tool returns the selected, valid tool of that name, or nil.
func (p *pass) tool(name string) *selectedTool { return p.byName[name] }

// generateQueries asks the generator for the queries the plan needs, with
// bounded concurrency; it returns the full query set per tool.
func (r *ToolCatalogReconciler) generateQueries(ctx context.Context, p *pass) map[string][]string {
	sets := map[string][]string{}
	var reqs []embedding.QueryRequest
	var names []string
	for _, pl := range p.plans {
		if pl.Action == catalog.ActionNone {
			continue
		}
		sets[pl.Name] = pl.Queries
		if pl.Action == catalog.ActionRegenerate && pl.Generate > 0 {
			t := p.tool(pl.Name)
			reqs = append(reqs, embedding.QueryRequest{
				Tool:  embedding.ToolSpec{Name: t.entry.Name, Description: t.entry.Description, Parameters: t.entry.Parameters},
				Count: pl.Generate, Existing: pl.Queries,
			})
			names = append(names, pl.Name)
		}
	}
	for i, res := range embedding.GenerateAll(ctx, p.cfg.Generator, reqs, p.cfg.Concurrency) {
		name := names[i]
		if res.Err != nil {
			p.fail(toolFailure{toolDefinition: p.tool(name).td.Name, tool: name, reason: v1alpha1.ReasonQueryGenerationFailed,
				message: res.Err.Error(), kind: embedding.KindOf(res.Err)})
			delete(sets, name)
			continue
		}
		sets[name] = append(slices.Clone(sets[name]), res.Queries...)
	}
	return sets
}

// embedTools embeds every tool's queries in one batched call; when that
// fails, each tool is embedded on its own so one bad tool does not fail
// the others.
func (r *ToolCatalogReconciler) embedTools(ctx context.Context, p *pass, sets map[string][]string) {
	names := make([]string, 0, len(sets))
	for name := range sets {
		names = append(names, name)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return
	}
	querySets := make([][]string, len(names))
	for i, n := range names {
		querySets[i] = sets[n]
	}
	centroids, errs, err := embedding.QueryCentroids(ctx, p.cfg.Embedder, querySets)
	if err != nil && len(names) > 1 && isolatable(err) {
		centroids, errs = make([][]float32, len(names)), make([]error, len(names))
		for i := range names {
			var one [][]float32
			var oneErrs []error
			one, oneErrs, errs[i] = embedding.QueryCentroids(ctx, p.cfg.Embedder, querySets[i:i+1])
			if errs[i] == nil {
				centroids[i], errs[i] = one[0], oneErrs[0]
			}
		}
		err = nil
	}
	now := metav1.Now().UTC()
	for i, name := range names {
		e := err
		if e == nil {
			e = errs[i]
		}
		t := p.tool(name)
		if e != nil {
			p.fail(toolFailure{toolDefinition: t.td.Name, tool: name, reason: v1alpha1.ReasonEmbeddingError, message: e.Error(), kind: embedding.KindOf(e)})
			continue
		}
		p.results[name] = toolResult{
			vector: contract.EncodeVector(centroids[i]),
			meta: contract.Metadata{
				SpecHash: t.entry.SpecHash, Description: t.entry.Description, Model: p.cfg.Embedder.Model(),
				Dimensions: len(centroids[i]), SyntheticQueries: querySets[i], EmbeddedAt: now,
			},
		}
	}
}

// isolatable reports whether embedding tools one by one may get further
// than embedding them together.
func isolatable(err error) bool {
	switch embedding.KindOf(err) {
	case embedding.KindAuth, embedding.KindDimensionMismatch:
		return false
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}
