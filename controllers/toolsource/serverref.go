package toolsource

import (
	"cmp"
	"context"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/serverref"
)

// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=referencegrants,verbs=get;list;watch
// +kubebuilder:rbac:groups=mcp.x-k8s.io,resources=mcpservers,verbs=get;list;watch
// +kubebuilder:rbac:groups=toolhive.stacklok.dev,resources=mcpservers;mcpremoteproxies;virtualmcpservers,verbs=get;list;watch
// +kubebuilder:rbac:groups=kagent.dev,resources=remotemcpservers,verbs=get;list;watch

// referenceIndex indexes ToolSources by the objects their serverRef
// leads to: the object named, and the Service it was last followed to.
const referenceIndex = "toolsource.serverRef"

// referenceKey identifies an object a reference may lead to.
func referenceKey(group, kind, namespace, name string) string {
	return group + "/" + kind + "/" + namespace + "/" + name
}

// referencedObjects are the index values of a ToolSource.
func referencedObjects(obj client.Object) []string {
	ts, ok := obj.(*v1alpha1.ToolSource)
	if !ok || ts.Spec.MCP.ServerRef == nil {
		return nil
	}
	ref := ts.Spec.MCP.ServerRef
	gv, _ := schema.ParseGroupVersion(ref.APIVersion)
	keys := []string{referenceKey(gv.Group, ref.Kind, cmp.Or(ref.Namespace, ts.Namespace), ref.Name)}
	if ep := ts.Status.Endpoint; ep != nil && ep.URL != "" {
		if u, err := url.Parse(ep.URL); err == nil {
			if labels := strings.Split(u.Hostname(), "."); len(labels) > 2 && labels[2] == "svc" {
				keys = append(keys, referenceKey("", "Service", labels[1], labels[0]))
			}
		}
	}
	return keys
}

// sourcesReferencing maps an object to the ToolSources whose reference
// leads to it, by key.
func (r *Reconciler) sourcesReferencing(ctx context.Context, key string) []ctrl.Request {
	list := &v1alpha1.ToolSourceList{}
	if err := r.List(ctx, list, client.MatchingFields{referenceIndex: key}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the ToolSources referencing an object", "object", key)
		return nil
	}
	reqs := make([]ctrl.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// watchReferences makes a change of what a reference leads to (the
// server object, its Service, the Service's EndpointSlices) sync the
// sources that reference it. The server kinds are watched where their
// CRDs are installed when the manager starts.
func (r *Reconciler) watchReferences(mgr ctrl.Manager, b *builder.Builder) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.ToolSource{}, referenceIndex, referencedObjects); err != nil {
		return err
	}
	service := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []ctrl.Request {
		return r.sourcesReferencing(ctx, referenceKey("", "Service", obj.GetNamespace(), obj.GetName()))
	})
	slice := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []ctrl.Request {
		name := obj.GetLabels()[discoveryv1.LabelServiceName]
		if name == "" {
			return nil
		}
		return r.sourcesReferencing(ctx, referenceKey("", "Service", obj.GetNamespace(), name))
	})
	b.WatchesMetadata(&corev1.Service{}, service).
		WatchesMetadata(&discoveryv1.EndpointSlice{}, slice)
	for _, k := range serverref.Kinds {
		mapping, err := mgr.GetRESTMapper().RESTMapping(k.GroupKind, k.Versions...)
		if err != nil {
			ctrl.Log.WithName("toolsource").V(1).Info("Not watching a server kind: not installed", "kind", k.String())
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(mapping.GroupVersionKind)
		group, kind := k.Group, k.Kind
		b.Watches(u, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []ctrl.Request {
			return r.sourcesReferencing(ctx, referenceKey(group, kind, obj.GetNamespace(), obj.GetName()))
		}), builder.WithPredicates(serverChanged))
	}
	return nil
}

// serverChanged passes creations, deletions and the updates that change
// what a server object says of its server (address, readiness), not its
// other status writes.
var serverChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		a, aok := e.ObjectOld.(*unstructured.Unstructured)
		b, bok := e.ObjectNew.(*unstructured.Unstructured)
		if !aok || !bok {
			return true
		}
		sa, erra := serverref.Read(a)
		sb, errb := serverref.Read(b)
		return erra != nil || errb != nil || sa.URL != sb.URL || sa.Ready != sb.Ready || sa.Status != sb.Status || sa.Reason != sb.Reason
	},
}
