// Package kube is the Kubernetes client of the kubectl plugin and its
// console: get, list, create and merge-patch of the project's kinds,
// Secrets and Namespaces, acting as the user, over client-go's REST
// client with a scheme of those kinds only.
//
// The manager and the gateway use controller-runtime's client. The plugin
// does not: that client registers every built-in API group (client-go's
// kubernetes/scheme) in whatever binary links it, about 16 MB the plugin
// has no use for. Code both sides share takes a Getter, which
// controller-runtime's client.Reader is adapted to by package crkube.
package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
)

// Object is a Kubernetes object: controller-runtime's client.Object has
// the same methods.
type Object interface {
	metav1.Object
	runtime.Object
}

// Getter gets an object by its key.
type Getter interface {
	Get(ctx context.Context, key types.NamespacedName, obj Object) error
}

// resource is where the API serves a kind.
type resource struct {
	plural     string
	namespaced bool
}

// resources are the kinds the client serves.
var resources = map[schema.GroupVersionKind]resource{
	v1alpha1.GroupVersion.WithKind("ToolCatalog"):        {"toolcatalogs", true},
	v1alpha1.GroupVersion.WithKind("ToolDefinition"):     {"tooldefinitions", true},
	v1alpha1.GroupVersion.WithKind("ToolSource"):         {"toolsources", true},
	v1alpha1.GroupVersion.WithKind("ToolSourceApproval"): {"toolsourceapprovals", true},
	// Only created: a SelfSubjectReview says who the client is.
	authenticationv1.SchemeGroupVersion.WithKind("SelfSubjectReview"): {"selfsubjectreviews", false},
	corev1.SchemeGroupVersion.WithKind("Secret"):                      {"secrets", true},
	corev1.SchemeGroupVersion.WithKind("Namespace"):                   {"namespaces", false},
}

// Client reads and patches the kinds of resources as the identity of its
// rest.Config.
type Client struct {
	scheme *runtime.Scheme
	rest   map[schema.GroupVersion]*rest.RESTClient
}

var _ Getter = (*Client)(nil)

// New returns a Client for cfg.
func New(cfg *rest.Config) (*Client, error) {
	scheme := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	utilruntime.Must(authenticationv1.AddToScheme(scheme))
	codecs := serializer.WithoutConversionCodecFactory{CodecFactory: serializer.NewCodecFactory(scheme)}
	c := &Client{scheme: scheme, rest: map[schema.GroupVersion]*rest.RESTClient{}}
	for gvk := range resources {
		gv := gvk.GroupVersion()
		if c.rest[gv] != nil {
			continue
		}
		rc := rest.CopyConfig(cfg)
		rc.GroupVersion = &gv
		rc.APIPath = "/apis"
		if gv.Group == "" {
			rc.APIPath = "/api"
		}
		rc.NegotiatedSerializer = codecs
		if rc.UserAgent == "" {
			rc.UserAgent = rest.DefaultKubernetesUserAgent()
		}
		client, err := rest.RESTClientFor(rc)
		if err != nil {
			return nil, fmt.Errorf("a client for %s: %w", gv, err)
		}
		c.rest[gv] = client
	}
	return c, nil
}

// where is the client and resource of obj's kind, or of its items' for a
// list.
func (c *Client) where(obj runtime.Object) (*rest.RESTClient, resource, error) {
	kinds, _, err := c.scheme.ObjectKinds(obj)
	if err != nil {
		return nil, resource{}, err
	}
	gvk := kinds[0]
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	r, ok := resources[gvk]
	if !ok {
		return nil, resource{}, fmt.Errorf("kube: %s is not a kind this client serves", gvk)
	}
	return c.rest[gvk.GroupVersion()], r, nil
}

// Get reads the object of key into obj.
func (c *Client) Get(ctx context.Context, key types.NamespacedName, obj Object) error {
	rc, r, err := c.where(obj)
	if err != nil {
		return err
	}
	return rc.Get().NamespaceIfScoped(key.Namespace, r.namespaced).Resource(r.plural).Name(key.Name).Do(ctx).Into(obj)
}

// List reads the objects of list's kind in namespace (every namespace the
// caller may list when empty) whose labels match, into list.
func (c *Client) List(ctx context.Context, list runtime.Object, namespace string, match labels.Set) error {
	rc, r, err := c.where(list)
	if err != nil {
		return err
	}
	req := rc.Get().NamespaceIfScoped(namespace, r.namespaced).Resource(r.plural)
	if len(match) > 0 {
		req = req.Param("labelSelector", match.String())
	}
	return req.Do(ctx).Into(list)
}

// MergePatch applies a JSON merge patch to obj's object and reads the
// result back into obj.
func (c *Client) MergePatch(ctx context.Context, obj Object, patch []byte) error {
	rc, r, err := c.where(obj)
	if err != nil {
		return err
	}
	return rc.Patch(types.MergePatchType).NamespaceIfScoped(obj.GetNamespace(), r.namespaced).Resource(r.plural).Name(obj.GetName()).
		Body(patch).Do(ctx).Into(obj)
}

// Create creates obj's object and reads the result back into obj.
func (c *Client) Create(ctx context.Context, obj Object) error {
	rc, r, err := c.where(obj)
	if err != nil {
		return err
	}
	return rc.Post().NamespaceIfScoped(obj.GetNamespace(), r.namespaced).Resource(r.plural).Body(obj).Do(ctx).Into(obj)
}

// WhoAmI is the user the API server authenticates the client as (a
// SelfSubjectReview, as kubectl auth whoami makes).
func (c *Client) WhoAmI(ctx context.Context) (v1alpha1.Approver, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return v1alpha1.Approver{}, err
	}
	u := review.Status.UserInfo
	if u.Username == "" {
		return v1alpha1.Approver{}, fmt.Errorf("the API server authenticated no user name")
	}
	return v1alpha1.Approver{Username: u.Username, UID: u.UID, Groups: u.Groups}, nil
}

// AnnotationsPatch is the merge patch setting the given annotations, and
// removing those whose value is nil.
func AnnotationsPatch(set map[string]*string) []byte {
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": set}})
	utilruntime.Must(err) // strings and nils always encode
	return b
}
