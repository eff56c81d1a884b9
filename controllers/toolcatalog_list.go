package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
)

// toolDefinitions lists the ToolDefinitions of a namespace that sel
// matches, as the cache holds them: read-only, never to be changed. A
// typed list from the cache is a copy of every object's struct (30 MB at
// 50,000 tools), made by each pass and each turn of the records writer;
// this reads the informer's namespace index instead, and lists through
// the client where the cache has no such index (a cache of several
// namespaces).
func (r *ToolCatalogReconciler) toolDefinitions(ctx context.Context, namespace string, sel labels.Selector) ([]*v1alpha1.ToolDefinition, error) {
	idx, err := r.toolDefinitionIndex(ctx)
	if err != nil {
		return nil, err
	}
	if idx != nil {
		objs, err := idx.ByIndex(toolscache.NamespaceIndex, namespace)
		if err != nil {
			return nil, err
		}
		out := make([]*v1alpha1.ToolDefinition, 0, len(objs))
		for _, obj := range objs {
			td, ok := obj.(*v1alpha1.ToolDefinition)
			if !ok {
				return nil, fmt.Errorf("the cache holds a %T among ToolDefinitions", obj)
			}
			if sel.Matches(labels.Set(td.Labels)) {
				out = append(out, td)
			}
		}
		return out, nil
	}
	list := &v1alpha1.ToolDefinitionList{}
	if err := r.List(ctx, list, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: sel}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make([]*v1alpha1.ToolDefinition, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// toolDefinitionIndex is the informer's store of ToolDefinitions, with its
// namespace index; nil when the cache has none (a cache of several
// namespaces). Read-only.
func (r *ToolCatalogReconciler) toolDefinitionIndex(ctx context.Context) (toolscache.Indexer, error) {
	if r.informers == nil {
		return nil, nil
	}
	inf, err := r.informers.GetInformer(ctx, &v1alpha1.ToolDefinition{}, cache.BlockUntilSynced(true))
	if err != nil {
		return nil, err
	}
	if shared, ok := inf.(toolscache.SharedIndexInformer); ok {
		return shared.GetIndexer(), nil
	}
	return nil, nil
}

// toolSources lists a namespace's ToolSources once, for a pass or a
// validation to look up the sources ToolDefinitions name, and read
// their records, without a copy of each record per tool. Read-only.
func toolSources(ctx context.Context, c client.Reader, namespace string) (catalog.Sources, error) {
	list := &v1alpha1.ToolSourceList{}
	if err := c.List(ctx, list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing ToolSources: %w", err)
	}
	byName := make(map[string]*v1alpha1.ToolSource, len(list.Items))
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	return func(name string) *v1alpha1.ToolSource { return byName[name] }, nil
}
