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
func (c *checker) grade(ctx context.Context, selections []*selected, from map[string]*gradeRun) []CatalogGrade {
	runs, errs := gradeAll(ctx, selections, from)
	var out []CatalogGrade
	for i, s := range selections {
		tc := s.catalog.TC
		name := objectName(tc)
		if errs[i] != nil {
			c.at(s.catalog.Object, "spec", Finding{Rule: RuleSelfRecall, Object: name, Catalog: name, Message: fmt.Sprintf("cannot grade the catalog: %v", errs[i])})
			continue
		}
		g := runs[i].grade
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
// runs on one, goes on. from holds, by catalog, the version each is
// graded from, if any.
func gradeAll(ctx context.Context, selections []*selected, from map[string]*gradeRun) ([]*gradeRun, []error) {
	runs, errs := make([]*gradeRun, len(selections)), make([]error, len(selections))
	var group errgroup.Group
	group.SetLimit(runtime.GOMAXPROCS(0))
	for i, s := range selections {
		prev := from[objectName(s.catalog.TC)]
		group.Go(func() error {
			runs[i], errs[i] = gradeSelection(ctx, s, prev)
			return nil
		})
	}
	_ = group.Wait()
	return runs, errs
}

// gradeRun is a catalog's version as a grading left it, for the next
// version to be built and graded from.
type gradeRun struct {
	grade   *CatalogGrade
	stored  catalog.Stored
	vectors map[string][]byte
	grader  *grading.Whole
}

// gradeSelection builds and grades a catalog's version as the operator
// would: its first, or, from prev (the same catalog's version before the
// change), the next one, for which the pass embeds only the tools that
// changed and the grading searches again only what they can move.
func gradeSelection(ctx context.Context, s *selected, prev *gradeRun) (*gradeRun, error) {
	tc := s.catalog.TC
	providers, err := catalogconfig.BuildProviders(catalogconfig.ProviderSettings{}, nil)
	if err != nil {
		return nil, err
	}
	run := &gradeRun{grader: grading.NewWhole(), vectors: map[string][]byte{}}
	var before catalog.Stored
	if prev != nil {
		before, run.grader = prev.stored, prev.grader
		for name, v := range prev.vectors {
			run.vectors[name] = v
		}
	}
	// The grading searches every query the pass embedded: keep them all.
	queries := &catalog.QueryVectors{Limit: -1}
	model := providers.Embedder.Model()
	plans := catalog.Plan(catalog.PlanInput{Tools: s.selection.Tools, Stored: before.Tools, Model: model, QueriesPerTool: catalogconfig.QueriesPerTool(tc.Spec), Lineage: before.Lineage()})
	now := time.Now()
	refreshed := catalog.Refresh(ctx, catalog.Providers{Generator: providers.Generator, Embedder: queries.Recording(providers.Embedder), Concurrency: 4}, plans, now, catalog.Budget{})
	if len(refreshed.Failures) > 0 {
		f := refreshed.Failures[0]
		return nil, fmt.Errorf("tool %s: %s", f.Tool, f.Message)
	}
	build, err := catalog.BuildDocument(catalog.BuildInput{
		Catalog: catalog.ID(tc), Provider: "builtin", Model: model, Search: catalogconfig.SearchOf(tc.Spec),
		Plans: plans, Rejected: s.selection.Rejected, Refreshed: refreshed, Stored: before, Now: now,
	})
	if err != nil {
		return nil, err
	}
	if run.stored, err = before.Published(build, before.Version+1); err != nil {
		return nil, err
	}
	for name, v := range build.Vectors {
		run.vectors[name] = v
	}
	for _, name := range build.Removed {
		delete(run.vectors, name)
	}
	vectors := func(_ context.Context, names []string) (map[string]string, error) {
		out := make(map[string]string, len(names))
		for _, n := range names {
			if v, ok := run.vectors[n]; ok {
				out[n] = string(v)
			}
		}
		return out, nil
	}
	g, err := run.grader.Grade(ctx, run.stored, providers.Embedder, queries, vectors)
	if err != nil {
		return nil, err
	}
	run.grade = &CatalogGrade{
		Catalog: objectName(tc), Model: model, Tools: len(s.selection.Tools),
		GradedTools: g.Tools, GradedQueries: g.Queries, SelfRecallAt5: g.SelfRecallAt5, Confusable: g.Confusable, Outranked: g.Outranked,
	}
	return run, nil
}
