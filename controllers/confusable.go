package controllers

import "github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"

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
