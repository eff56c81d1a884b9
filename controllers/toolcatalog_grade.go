package controllers

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/internal/metrics"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
)

// Self-grading bounds: at most maxGradedTools tools are graded per version
// (changed tools first, then a sample stable across versions; the query
// vectors kept between versions are bounded by published.QueryVectors),
// and at most maxListed outranked tools and confusable pairs are listed.
const (
	maxGradedTools = 200
	maxListed      = 10
)

// grade evaluates the version the pass left published, once per version
// and only when no work remains (a catalog being built is graded when it
// is complete). It never fails the pass: a grading that cannot be done is
// logged and tried again with the next version.
func (r *ToolCatalogReconciler) grade(ctx context.Context, tc *v1alpha1.ToolCatalog, emb embedding.Embedder, st publishedState, out *catalog.Outcome) *v1alpha1.CatalogQuality {
	if out == nil || out.Version == 0 || len(out.Remaining()) > 0 || len(out.Pending()) > 0 {
		return nil
	}
	if q := tc.Status.Quality; q != nil && q.Version == out.Version {
		return nil
	}
	stored, ok := st.Kept(out.Version)
	if !ok {
		return nil
	}
	id := catalogID(tc)
	log := ctrl.LoggerFrom(ctx)
	cat, err := toolcatalog.New(stored.Doc, stored.Vectors, nil)
	if err != nil {
		log.Error(err, "Cannot grade the catalog", "version", out.Version)
		return nil
	}
	sample := gradingSample(stored, out.Build)
	var texts []string
	for _, name := range sample {
		texts = append(texts, ownQueries(stored.Tools[name].Metadata)...)
	}
	vectors := st.QueryVectors()
	found, missing := vectors.Lookup(emb.Model(), texts)
	if len(missing) > 0 {
		vecs, err := emb.Embed(ctx, missing)
		if err != nil {
			log.Error(err, "Cannot embed the queries to grade the catalog; grading the next version", "version", out.Version)
			return nil
		}
		vectors.Add(emb.Model(), missing, vecs)
		for i, t := range missing {
			found[t] = vecs[i]
		}
	}
	vectors.Retain(texts)
	sets := make(map[string]toolcatalog.QuerySet, len(sample))
	for _, name := range sample {
		qs := ownQueries(stored.Tools[name].Metadata)
		set := toolcatalog.QuerySet{Queries: qs, Vectors: make([][]float32, len(qs))}
		for i, q := range qs {
			set.Vectors[i] = found[q]
		}
		sets[name] = set
	}
	g, err := cat.Grade(ctx, sets)
	if err != nil {
		log.Error(err, "Cannot grade the catalog", "version", out.Version)
		return nil
	}
	q := qualityOf(g, out.Version)
	metrics.SelfRecall.WithLabelValues(id).Set(g.SelfRecallAt5)
	for kind, n := range map[string]int{"graded_tools": g.Tools, "graded_queries": g.Queries, "outranked_tools": len(g.Outranked), "confusable_pairs": len(g.Confusable)} {
		metrics.Quality.WithLabelValues(id, kind).Set(float64(n))
	}
	return q
}

// ownQueries are the queries a tool's vector was built from.
func ownQueries(m *contract.Metadata) []string {
	return append(slices.Clip(m.SyntheticQueries), m.LearnedQueries...)
}

// gradingSample names the tools to grade: all with a stored query set when
// they fit, else the tools this version changed, then the others in an
// order fixed by their names, so consecutive versions grade the same tools
// and reuse their query vectors.
func gradingSample(stored catalog.Stored, b catalog.Build) []string {
	var all []string
	for _, t := range stored.Doc.Tools {
		if st, ok := stored.Tools[t.Name]; ok && st.Metadata != nil && len(st.Metadata.SyntheticQueries) >= 2 {
			all = append(all, t.Name)
		}
	}
	if len(all) <= maxGradedTools {
		return all
	}
	rank := func(name string) uint64 {
		h := fnv.New64a()
		h.Write([]byte(name))
		return h.Sum64()
	}
	sort.SliceStable(all, func(i, j int) bool {
		_, ci := b.Vectors[all[i]]
		_, cj := b.Vectors[all[j]]
		if ci != cj {
			return ci
		}
		return rank(all[i]) < rank(all[j])
	})
	return all[:maxGradedTools]
}

// qualityOf is a grading as status.
func qualityOf(g *toolcatalog.Grading, version int64) *v1alpha1.CatalogQuality {
	q := &v1alpha1.CatalogQuality{
		Version: version, GradedTools: int32(g.Tools), GradedQueries: int32(g.Queries),
		OutrankedCount: int32(len(g.Outranked)),
	}
	if g.Queries > 0 {
		q.SelfRecallAt5 = strconv.FormatFloat(g.SelfRecallAt5, 'f', 3, 64)
	}
	for _, o := range g.Outranked[:min(len(g.Outranked), maxListed)] {
		q.Outranked = append(q.Outranked, v1alpha1.OutrankedTool{Tool: o.Tool, Missed: int32(o.Missed), Queries: int32(o.Queries), By: o.By})
	}
	for _, p := range g.Confusable[:min(len(g.Confusable), maxListed)] {
		q.ConfusablePairs = append(q.ConfusablePairs, v1alpha1.ConfusablePair{Tools: []string{p.A, p.B}, Similarity: similarity(p.Similarity)})
	}
	return q
}

func similarity(s float64) string { return strconv.FormatFloat(s, 'f', 2, 64) }

// confusableTools maps each tool of a confusable pair to the other.
func confusableTools(q *v1alpha1.CatalogQuality) map[string]*v1alpha1.ConfusableTool {
	out := map[string]*v1alpha1.ConfusableTool{}
	if q == nil {
		return out
	}
	for _, p := range q.ConfusablePairs {
		if len(p.Tools) != 2 {
			continue
		}
		a, b := p.Tools[0], p.Tools[1]
		// A tool in several pairs names its most similar other tool
		// (pairs come most similar first).
		if out[a] == nil {
			out[a] = &v1alpha1.ConfusableTool{Name: b, Similarity: p.Similarity}
		}
		if out[b] == nil {
			out[b] = &v1alpha1.ConfusableTool{Name: a, Similarity: p.Similarity}
		}
	}
	return out
}

// confusableMessage is a Confusable condition's message.
func confusableMessage(catalogName string, c *v1alpha1.ConfusableTool) string {
	return fmt.Sprintf("catalog %s: the queries of this tool and of %s retrieve each other (similarity %s); reword one description so a model can tell them apart",
		catalogName, c.Name, c.Similarity)
}
