// Package cached reads the operator's own kinds from the manager's cache,
// read-only, without a copy of each object: the catalog pass's Objects
// port (catalog.Objects), and the reads the records writer and the
// ToolDefinition reconciler make of the same objects.
package cached

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
)

// Objects reads ToolDefinitions and ToolSources as the cache holds them:
// never to be changed.
type Objects struct {
	// Reader lists what the informers cannot give.
	Reader client.Reader
	// Informers is the manager's cache; nil lists through Reader.
	Informers cache.Informers
}

var _ catalog.Objects = (*Objects)(nil)

// ToolDefinitions lists the ToolDefinitions of a namespace that sel
// matches. A typed list from the cache is a copy of every object's struct
// (30 MB at 50,000 tools), made by each pass and each turn of the records
// writer; this reads the informer's namespace index instead, and lists
// through the reader where the cache has no such index (a cache of
// several namespaces).
func (o *Objects) ToolDefinitions(ctx context.Context, namespace string, sel labels.Selector) ([]*v1alpha1.ToolDefinition, error) {
	idx, err := o.index(ctx)
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
	if err := o.Reader.List(ctx, list, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: sel}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make([]*v1alpha1.ToolDefinition, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// Lookup finds ToolDefinitions by name in the informer's store; ok is
// false when the cache has no such store.
func (o *Objects) Lookup(ctx context.Context) (func(namespace, name string) *v1alpha1.ToolDefinition, bool, error) {
	idx, err := o.index(ctx)
	if err != nil || idx == nil {
		return nil, false, err
	}
	return func(namespace, name string) *v1alpha1.ToolDefinition {
		obj, exists, err := idx.GetByKey(namespace + "/" + name)
		td, _ := obj.(*v1alpha1.ToolDefinition)
		if err != nil || !exists {
			return nil
		}
		return td
	}, true, nil
}

// index is the informer's store of ToolDefinitions, with its namespace
// index; nil when the cache has none (a cache of several namespaces).
func (o *Objects) index(ctx context.Context) (toolscache.Indexer, error) {
	if o.Informers == nil {
		return nil, nil
	}
	inf, err := o.Informers.GetInformer(ctx, &v1alpha1.ToolDefinition{}, cache.BlockUntilSynced(true))
	if err != nil {
		return nil, err
	}
	if shared, ok := inf.(toolscache.SharedIndexInformer); ok {
		return shared.GetIndexer(), nil
	}
	return nil, nil
}

// ToolSources lists a namespace's ToolSources once, for a pass or a
// validation to look up the sources ToolDefinitions name, and read their
// records, without a copy of each record per tool.
func (o *Objects) ToolSources(ctx context.Context, namespace string) (catalog.Sources, error) {
	list := &v1alpha1.ToolSourceList{}
	if err := o.Reader.List(ctx, list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing ToolSources: %w", err)
	}
	byName := make(map[string]*v1alpha1.ToolSource, len(list.Items))
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	return func(name string) *v1alpha1.ToolSource { return byName[name] }, nil
}

// CatalogsSelecting returns the names of the catalogs in the object's
// namespace that select it (SelectingCatalogs).
func CatalogsSelecting(ctx context.Context, c client.Reader, obj client.Object) ([]string, error) {
	selecting, err := SelectingCatalogs(ctx, c, obj.GetNamespace())
	if err != nil {
		return nil, err
	}
	return selecting(obj), nil
}

// SelectingCatalogs lists a namespace's catalogs once and returns what
// selects an object there: the names of the catalogs whose selector
// matches its labels. A catalog whose selector does not parse selects
// nothing (it reports that itself), and neither does one being deleted,
// as its cleanup records.
func SelectingCatalogs(ctx context.Context, c client.Reader, namespace string) (func(client.Object) []string, error) {
	list := &v1alpha1.ToolCatalogList{}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing ToolCatalogs: %w", err)
	}
	type sel struct {
		name     string
		selector labels.Selector
	}
	var sels []sel
	for i := range list.Items {
		if !list.Items[i].DeletionTimestamp.IsZero() {
			continue
		}
		if s, err := metav1.LabelSelectorAsSelector(&list.Items[i].Spec.Selector); err == nil {
			sels = append(sels, sel{list.Items[i].Name, s})
		}
	}
	return func(obj client.Object) []string {
		names := []string{}
		for _, s := range sels {
			if s.selector.Matches(labels.Set(obj.GetLabels())) {
				names = append(names, s.name)
			}
		}
		return names
	}, nil
}
