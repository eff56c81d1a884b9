package check

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalogconfig"
	"github.com/toolcatalog/tool-catalog-operator/internal/grading"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/selfgrade"
)

// CatalogGrade is the grading of one catalog of the input.
type CatalogGrade struct {
	Catalog string `json:"catalog"`
	// Model is the embedding model graded with (the builtin one).
	Model string `json:"model"`
	// Tools counts the tools selected, GradedTools and GradedQueries
	// what was graded (tools with two queries or more).
	Tools         int     `json:"tools"`
	GradedTools   int     `json:"gradedTools"`
	GradedQueries int     `json:"gradedQueries"`
	SelfRecallAt5 float64 `json:"selfRecallAt5"`
	// Confusable and Outranked are the grading's, as status.quality
	// reports them.
	Confusable []selfgrade.ConfusablePair `json:"confusable,omitempty"`
	Outranked  []selfgrade.Outranked      `json:"outranked,omitempty"`
}

// grade grades each catalog as the operator does, with the builtin
// providers: the pass's own steps (plan, generate and embed, build) make
// the version a first pass would publish, and the operator's grading
// grades all of it at once.
func (c *checker) grade(ctx context.Context, selections []*selected) []CatalogGrade {
	grades, errs := gradeAll(ctx, selections)
	var out []CatalogGrade
	for i, s := range selections {
		g, tc := grades[i], s.catalog.TC
		name := objectName(tc)
		if errs[i] != nil {
			c.at(s.catalog.Object, "spec", Finding{Rule: RuleSelfRecall, Object: name, Catalog: name, Message: fmt.Sprintf("cannot grade the catalog: %v", errs[i])})
			continue
		}
		out = append(out, *g)
		byTool := map[string]*ToolObject{}
		for _, t := range s.tools {
			byTool[t.TD.Spec.Name] = t
		}
		for _, p := range g.Confusable {
			for _, pair := range [][2]string{{p.A, p.B}, {p.B, p.A}} {
				if t := byTool[pair[0]]; t != nil {
					c.at(t.Object, "spec.description", Finding{Rule: RuleConfusable, Object: objectName(t.TD), Tool: pair[0], Catalog: name,
						Message: fmt.Sprintf("confusable with %q in %s: their own queries find each other first (similarity %.2f); say in the descriptions how they differ", pair[1], name, p.Similarity)})
				}
			}
		}
		for _, o := range g.Outranked {
			if t := byTool[o.Tool]; t != nil {
				c.at(t.Object, "spec.description", Finding{Rule: RuleUnfindable, Object: objectName(t.TD), Tool: o.Tool, Catalog: name,
					Message: fmt.Sprintf("%d of its %d own queries do not find it in the top %d of %s; %q ranks first most often instead", o.Missed, o.Queries, selfgrade.K, name, o.By)})
			}
		}
		if g.GradedQueries == 0 {
			continue
		}
		c.at(s.catalog.Object, "spec", Finding{Rule: RuleSelfRecall, Object: name, Catalog: name,
			Message: fmt.Sprintf("self-recall@%d %.3f over %d queries of %d tools with the builtin model; %d confusable pairs, %d tools outranked", selfgrade.K, g.SelfRecallAt5, g.GradedQueries, g.GradedTools, len(g.Confusable), len(g.Outranked))})
	}
	return out
}

// gradeAll grades catalogs as many at once as there are CPUs: the
// embedding of one keeps the cores busy while another's grading, which
// runs on one, goes on.
func gradeAll(ctx context.Context, selections []*selected) ([]*CatalogGrade, []error) {
	grades, errs := make([]*CatalogGrade, len(selections)), make([]error, len(selections))
	var group errgroup.Group
	group.SetLimit(runtime.GOMAXPROCS(0))
	for i, s := range selections {
		group.Go(func() error {
			grades[i], errs[i] = gradeSelection(ctx, s)
			return nil
		})
	}
	_ = group.Wait()
	return grades, errs
}

// gradeSelection builds and grades one catalog's first version.
func gradeSelection(ctx context.Context, s *selected) (*CatalogGrade, error) {
	tc := s.catalog.TC
	providers, err := catalogconfig.BuildProviders(catalogconfig.ProviderSettings{}, nil)
	if err != nil {
		return nil, err
	}
	// The grading searches every query the pass embedded: keep them all.
	queries := &catalog.QueryVectors{Limit: -1}
	model := providers.Embedder.Model()
	plans := catalog.Plan(catalog.PlanInput{Tools: s.selection.Tools, Model: model, QueriesPerTool: catalogconfig.QueriesPerTool(tc.Spec)})
	now := time.Now()
	refreshed := catalog.Refresh(ctx, catalog.Providers{Generator: providers.Generator, Embedder: queries.Recording(providers.Embedder), Concurrency: 4}, plans, now, catalog.Budget{})
	if len(refreshed.Failures) > 0 {
		f := refreshed.Failures[0]
		return nil, fmt.Errorf("tool %s: %s", f.Tool, f.Message)
	}
	build, err := catalog.BuildDocument(catalog.BuildInput{
		Catalog: catalog.ID(tc), Provider: "builtin", Model: model, Search: catalogconfig.SearchOf(tc.Spec),
		Plans: plans, Rejected: s.selection.Rejected, Refreshed: refreshed, Now: now,
	})
	if err != nil {
		return nil, err
	}
	stored, err := catalog.Stored{}.Published(build, 1)
	if err != nil {
		return nil, err
	}
	vectors := func(_ context.Context, names []string) (map[string]string, error) {
		out := make(map[string]string, len(names))
		for _, n := range names {
			if v, ok := build.Vectors[n]; ok {
				out[n] = string(v)
			}
		}
		return out, nil
	}
	g, err := grading.Whole(ctx, stored, providers.Embedder, queries, vectors)
	if err != nil {
		return nil, err
	}
	return &CatalogGrade{
		Catalog: objectName(tc), Model: model, Tools: len(s.selection.Tools),
		GradedTools: g.Tools, GradedQueries: g.Queries, SelfRecallAt5: g.SelfRecallAt5, Confusable: g.Confusable, Outranked: g.Outranked,
	}, nil
}
