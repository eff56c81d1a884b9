package serverref

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
)

var namespaces atomic.Int32

// namespace creates a namespace of its own for a test.
func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("refs-%d", namespaces.Add(1))}}
	if err := kube.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// podNetworks are the test's cluster's: its Pods are at 10.244.0.0/24.
var podNetworks = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/24")}

// served is a Service, the Pod it selects and the EndpointSlice that
// names it, as the EndpointSlice controller would write it.
type served struct {
	svc   *corev1.Service
	pod   *corev1.Pod
	slice *discoveryv1.EndpointSlice
}

func serve(ns, name, podIP string) served {
	selector := map[string]string{"app": name}
	s := served{
		svc: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{
			Selector: selector, Ports: []corev1.ServicePort{{Port: 8080, TargetPort: intstr.FromInt32(9090)}}}},
		pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-0", Labels: selector},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "mcp", Image: "registry.example/mcp:1"}}}},
	}
	s.slice = &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-x", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{podIP}, Conditions: discoveryv1.EndpointConditions{Ready: new(true)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: name + "-0"}}},
		Ports: []discoveryv1.EndpointPort{{Name: new(""), Port: new(int32(9090)), Protocol: new(corev1.ProtocolTCP)}},
	}
	s.pod.Status.PodIPs = []corev1.PodIP{{IP: podIP}}
	return s
}

// create writes the objects: the Pod's status as its kubelet would.
func (s served) create(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	status := s.pod.Status
	for _, obj := range []client.Object{s.svc, s.pod, s.slice} {
		if obj == s.slice && s.slice.Endpoints[0].TargetRef != nil {
			s.slice.Endpoints[0].TargetRef.UID = s.pod.UID
		}
		if err := kube.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	s.pod.Status = status
	if err := kube.Status().Update(ctx, s.pod); err != nil {
		t.Fatal(err)
	}
}

func resolver() *Resolver { return &Resolver{Reader: kube, PodNetworks: podNetworks} }

func serviceRef(name string) *v1alpha1.ServerReference {
	return &v1alpha1.ServerReference{APIVersion: "v1", Kind: "Service", Name: name}
}

// A Service leads to the ready Pods it selects: the URL names the Service
// (its port), the addresses pinned are the Pods' (their port).
func TestAServiceLeadsToTheReadyPodsItSelects(t *testing.T) {
	ns := namespace(t)
	s := serve(ns, "docs", "10.244.0.3")
	s.create(t)
	ep, err := resolver().Resolve(t.Context(), ns, serviceRef("docs"))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("http://docs.%s.svc.cluster.local:8080/mcp", ns)
	if ep.URL != want || !ep.Ready || fmt.Sprint(ep.Pinned) != "[10.244.0.3:9090]" || ep.Kind != "Service" || ep.Namespace != ns || ep.Name != "docs" {
		t.Fatalf("resolved %+v; want %s pinned to 10.244.0.3:9090", ep, want)
	}

	// A second port: the reference must say which; https by its name.
	svc := &corev1.Service{}
	if getErr := kube.Get(t.Context(), client.ObjectKeyFromObject(s.svc), svc); getErr != nil {
		t.Fatal(getErr)
	}
	svc.Spec.Ports[0].Name = "http"
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "https", Port: 8443, TargetPort: intstr.FromInt32(9443)})
	if updateErr := kube.Update(t.Context(), svc); updateErr != nil {
		t.Fatal(updateErr)
	}
	slice := &discoveryv1.EndpointSlice{}
	if getErr := kube.Get(t.Context(), client.ObjectKeyFromObject(s.slice), slice); getErr != nil {
		t.Fatal(getErr)
	}
	slice.Ports = []discoveryv1.EndpointPort{{Name: new("http"), Port: new(int32(9090))}, {Name: new("https"), Port: new(int32(9443))}}
	if updateErr := kube.Update(t.Context(), slice); updateErr != nil {
		t.Fatal(updateErr)
	}
	if _, portErr := resolver().Resolve(t.Context(), ns, serviceRef("docs")); !refusedSaying(portErr, "has 2 TCP ports: set serverRef.port") {
		t.Fatalf("two ports, none chosen: %v", portErr)
	}
	ref := serviceRef("docs")
	ref.Port, ref.Path = 8443, "/v2/mcp"
	ep, err = resolver().Resolve(t.Context(), ns, ref)
	if err != nil || ep.URL != fmt.Sprintf("https://docs.%s.svc.cluster.local:8443/v2/mcp", ns) || fmt.Sprint(ep.Pinned) != "[10.244.0.3:9443]" {
		t.Fatalf("resolved %+v, %v; want the https port", ep, err)
	}
}

func refusedSaying(err error, text string) bool {
	e := (*Error)(nil)
	return errors.As(err, &e) && !e.Wait && e.Reason == v1alpha1.ReasonServerRefRefused && strings.Contains(e.Message, text)
}

func waitingSaying(err error, reason, text string) bool {
	e := (*Error)(nil)
	return errors.As(err, &e) && e.Wait && e.Reason == reason && strings.Contains(e.Message, text)
}

// A reference authorizes what it names and nothing more: each way of
// making a Service lead elsewhere (outside the cluster, to a node, to an
// address no Pod of the namespace has) is refused, saying which.
func TestAServiceLeadsNowhereButToItsPods(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(s *served)
		want  string
	}{
		{"an ExternalName Service", func(s *served) {
			s.svc.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "metadata.google.internal"}
		}, "is of type ExternalName (metadata.google.internal)"},
		{"endpoints written by hand", func(s *served) {
			s.svc.Spec.Selector = nil
			s.slice.Endpoints[0].Addresses = []string{"10.96.0.1"}
			s.slice.Endpoints[0].TargetRef = nil
		}, "has no selector: its endpoints are written by hand"},
		{"an address that is not the Pod's", func(s *served) {
			s.slice.Endpoints[0].Addresses = []string{"10.244.0.9"}
		}, "the endpoint 10.244.0.9 is not an address of Pod"},
		{"a Pod the Service does not select", func(s *served) {
			s.pod.Labels = map[string]string{"app": "other"}
		}, "which the Service does not select"},
		{"a Pod on its node's network", func(s *served) {
			s.pod.Spec.HostNetwork = true
		}, "on its node's network"},
		{"a Pod outside the Pod networks", func(s *served) {
			s.pod.Status.PodIPs = []corev1.PodIP{{IP: "10.245.0.2"}}
			s.slice.Endpoints[0].Addresses = []string{"10.245.0.2"}
		}, "outside the cluster's Pod networks"},
		{"an endpoint that names no Pod", func(s *served) {
			s.slice.Endpoints[0].TargetRef = &corev1.ObjectReference{Kind: "Node", Name: "node-1"}
		}, "names no Pod of namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := namespace(t)
			s := serve(ns, "docs", "10.244.0.3")
			tc.setup(&s)
			s.create(t)
			ep, err := resolver().Resolve(t.Context(), ns, serviceRef("docs"))
			if !refusedSaying(err, tc.want) {
				t.Fatalf("resolved %+v, %v; want refused saying %q", ep, err, tc.want)
			}
			if len(ep.Pinned) != 0 {
				t.Fatalf("pinned %v", ep.Pinned)
			}
		})
	}
}

// What may change by itself is waited for: a Service that does not exist
// yet, one with no ready Pod, a server kind that is not installed.
func TestAReferenceWaitsForWhatMayComeByItself(t *testing.T) {
	ns := namespace(t)
	if _, err := resolver().Resolve(t.Context(), ns, serviceRef("docs")); !waitingSaying(err, v1alpha1.ReasonServerRefNotFound, "Service "+ns+"/docs does not exist") {
		t.Fatalf("no Service: %v", err)
	}
	s := serve(ns, "docs", "10.244.0.3")
	s.slice.Endpoints[0].Conditions.Ready = new(false)
	s.create(t)
	if _, err := resolver().Resolve(t.Context(), ns, serviceRef("docs")); !waitingSaying(err, v1alpha1.ReasonServerNotReady, "has no ready Pod behind port 8080") {
		t.Fatalf("no ready Pod: %v", err)
	}
	ref := &v1alpha1.ServerReference{APIVersion: "toolhive.stacklok.dev/v1beta1", Kind: "MCPServer", Name: "fetch"}
	if _, err := resolver().Resolve(t.Context(), ns, ref); !waitingSaying(err, v1alpha1.ReasonServerRefNotFound, "ToolHive MCPServer "+ns+"/fetch does not exist") {
		t.Fatalf("no MCPServer: %v", err)
	}
	for _, tc := range []struct {
		ref  v1alpha1.ServerReference
		want string
	}{
		{v1alpha1.ServerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "x"}, "is not a kind of MCP server a ToolSource may reference"},
		{v1alpha1.ServerReference{APIVersion: "mcp.x-k8s.io/v9", Kind: "MCPServer", Name: "x"}, "is not a version this operator reads"},
		{v1alpha1.ServerReference{APIVersion: "v2", Kind: "Service", Name: "x"}, "a Service is referenced as apiVersion v1"},
	} {
		if _, err := resolver().Resolve(t.Context(), ns, &tc.ref); !refusedSaying(err, tc.want) {
			t.Errorf("%+v: %v; want refused saying %q", tc.ref, err, tc.want)
		}
	}
}

// setServer writes a server object of kind at version whose URL field is
// url and whose ready condition has status.
func setServer(t *testing.T, ns, name string, k Kind, version, url, status string) {
	t.Helper()
	ctx := t.Context()
	u := &unstructured.Unstructured{Object: map[string]any{"spec": specs[k.GroupKind]}}
	u.SetGroupVersionKind(k.WithVersion(version))
	u.SetNamespace(ns)
	u.SetName(name)
	if k.URL[0] == "spec" {
		if err := unstructured.SetNestedField(u.Object, url, k.URL...); err != nil {
			t.Fatal(err)
		}
	}
	if err := kube.Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	if k.URL[0] == "status" {
		if err := unstructured.SetNestedField(u.Object, url, k.URL...); err != nil {
			t.Fatal(err)
		}
	}
	condition := map[string]any{"type": k.ReadyCondition(version), "status": status, "reason": "Deployed", "message": "the server's pods are up",
		"lastTransitionTime": metav1.Now().UTC().Format("2006-01-02T15:04:05Z")}
	if err := unstructured.SetNestedSlice(u.Object, []any{condition}, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	if err := kube.Status().Update(ctx, u); err != nil {
		t.Fatal(err)
	}
}

// A server object leads to the Service its URL names in its own namespace,
// and from there to the Pods, as a Service reference does; a URL outside
// the cluster is left to the egress policy; a URL naming another
// namespace or the API server is refused; a server not ready is waited
// for in the words of its own condition.
func TestAServerObjectLeadsToItsService(t *testing.T) {
	ns := namespace(t)
	serve(ns, "fetch-proxy", "10.244.0.4").create(t)
	mcpServer, _ := Lookup(Kinds[0].GroupKind)
	remote, _ := Lookup(Kinds[4].GroupKind)
	setServer(t, ns, "fetch", mcpServer, "v1beta1", fmt.Sprintf("http://fetch-proxy.%s.svc.cluster.local:8080/sse", ns), "True")
	ref := &v1alpha1.ServerReference{APIVersion: "mcp.x-k8s.io/v1beta1", Kind: "MCPServer", Name: "fetch", Path: "/mcp"}
	ep, err := resolver().Resolve(t.Context(), ns, ref)
	if err != nil || ep.URL != fmt.Sprintf("http://fetch-proxy.%s.svc.cluster.local:8080/mcp", ns) || fmt.Sprint(ep.Pinned) != "[10.244.0.4:9090]" || !ep.Ready {
		t.Fatalf("resolved %+v, %v", ep, err)
	}

	setServer(t, ns, "starting", mcpServer, "v1alpha1", "", "False")
	ref = &v1alpha1.ServerReference{APIVersion: "mcp.x-k8s.io/v1alpha1", Kind: "MCPServer", Name: "starting"}
	if _, waitErr := resolver().Resolve(t.Context(), ns, ref); !waitingSaying(waitErr, v1alpha1.ReasonServerNotReady, "its Ready condition is False (Deployed): the server's pods are up") {
		t.Fatalf("a server not ready: %v", waitErr)
	}

	setServer(t, ns, "public", remote, "v1alpha2", "https://mcp.example.com/tools/mcp", "True")
	ref = &v1alpha1.ServerReference{APIVersion: "kagent.dev/v1alpha2", Kind: "RemoteMCPServer", Name: "public", Port: 8443}
	ep, err = resolver().Resolve(t.Context(), ns, ref)
	if err != nil || ep.URL != "https://mcp.example.com:8443/tools/mcp" || ep.Pinned != nil {
		t.Fatalf("an external server resolved %+v, %v; want its URL, no pinned address", ep, err)
	}

	for name, url := range map[string]string{
		"elsewhere": "http://fetch-proxy.kube-system.svc:8080/mcp",
		"apiserver": "https://kubernetes.default.svc/api",
		"address":   "http://169.254.169.254/latest",
	} {
		setServer(t, ns, name, remote, "v1alpha3", url, "True")
		ref = &v1alpha1.ServerReference{APIVersion: "kagent.dev/v1alpha3", Kind: "RemoteMCPServer", Name: name}
		if ep, err := resolver().Resolve(t.Context(), ns, ref); !refusedSaying(err, "which a reference may not lead to") {
			t.Errorf("%s (%s): resolved %+v, %v; want refused", name, url, ep, err)
		}
	}
}

// referenceGrantCRD is Gateway API's ReferenceGrant as far as the
// operator reads it: the test API server has no Gateway API until a test
// installs it.
func referenceGrantCRD() *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		// Gateway API's own CRDs carry the approval of their group.
		ObjectMeta: metav1.ObjectMeta{Name: "referencegrants.gateway.networking.k8s.io",
			Annotations: map[string]string{"api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/gateway-api/pull/1538"}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "gateway.networking.k8s.io", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "referencegrants", Singular: "referencegrant", Kind: "ReferenceGrant", ListKind: "ReferenceGrantList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1beta1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}}}},
		},
	}
}

func grant(ns, name, from string, to map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"from": []any{map[string]any{"group": "toolcatalog.dev", "kind": "ToolSource", "namespace": from}},
		"to":   []any{to},
	}}}
	u.SetAPIVersion("gateway.networking.k8s.io/v1beta1")
	u.SetKind("ReferenceGrant")
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// Another namespace's object is followed only where that namespace grants
// it with a ReferenceGrant naming the source's namespace and the object's
// kind (and name, when it gives one); without the ReferenceGrant kind,
// never.
func TestAnotherNamespaceIsFollowedOnlyWhereItGrantsIt(t *testing.T) {
	ctx := t.Context()
	team, tools := namespace(t), namespace(t)
	serve(tools, "docs", "10.244.0.3").create(t)
	ref := serviceRef("docs")
	ref.Namespace = tools
	if _, err := resolver().Resolve(ctx, team, ref); !refusedSaying(err, "this cluster has no ReferenceGrant kind") {
		t.Fatalf("no Gateway API: %v", err)
	}
	crd := referenceGrantCRD()
	if err := kube.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), crd) })
	// The kind is served once the API server says so.
	if err := wait.PollUntilContextTimeout(ctx, 50e6, 30e9, true, func(ctx context.Context) (bool, error) {
		_, err := resolver().Resolve(ctx, team, ref)
		return refusedSaying(err, "grants ToolSources of namespace "+team+" no reference to Service docs"), nil
	}); err != nil {
		t.Fatalf("with Gateway API and no grant, the reference is not refused as ungranted")
	}
	for _, g := range []*unstructured.Unstructured{
		grant(tools, "other-kind", team, map[string]any{"group": "", "kind": "Secret"}),
		grant(tools, "other-name", team, map[string]any{"group": "", "kind": "Service", "name": "billing"}),
		grant(tools, "other-source", "someone-else", map[string]any{"group": "", "kind": "Service"}),
	} {
		if err := kube.Create(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := resolver().Resolve(ctx, team, ref); !refusedSaying(err, "no reference to Service docs") {
		t.Fatalf("grants of another kind, name or namespace: %v", err)
	}
	if err := kube.Create(ctx, grant(tools, "docs", team, map[string]any{"group": "", "kind": "Service", "name": "docs"})); err != nil {
		t.Fatal(err)
	}
	ep, err := resolver().Resolve(ctx, team, ref)
	if err != nil || ep.URL != fmt.Sprintf("http://docs.%s.svc.cluster.local:8080/mcp", tools) || fmt.Sprint(ep.Pinned) != "[10.244.0.3:9090]" {
		t.Fatalf("granted: %+v, %v", ep, err)
	}
}
