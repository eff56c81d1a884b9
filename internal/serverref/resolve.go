package serverref

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/mcpsource"
)

// DefaultPath is the MCP endpoint path of a server reached through a
// Service reference that names none.
const DefaultPath = "/mcp"

// MaxPinned bounds the ready Pods a reference is pinned to, and so the
// Pods read to check them.
const MaxPinned = 8

// maxSlices bounds the EndpointSlices of a Service read.
const maxSlices = 16

// DefaultPodNetworks are the ranges a Pod's address may lie in when the
// operator is not told its cluster's: the private networks (RFC 1918,
// carrier-grade NAT, IPv6 unique local).
var DefaultPodNetworks = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("fc00::/7"),
}

// PodNetworksHelp describes the --pod-networks flag of the binaries.
const PodNetworksHelp = "Comma-separated address ranges the cluster's Pods are in (env POD_NETWORKS; default: the private ranges 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10, fc00::/7). A ToolSource's serverRef leads only to Pods whose address is in one; give the cluster's Pod CIDRs to narrow it."

// ParseNetworks reads address ranges (10.244.0.0/16); nil for none, so
// the Resolver uses DefaultPodNetworks.
func ParseNetworks(raw []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, r := range raw {
		p, err := netip.ParsePrefix(r)
		if err != nil {
			return nil, fmt.Errorf("%q is not an address range such as 10.244.0.0/16", r)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Resolver follows ToolSources' spec.mcp.serverRef to the server's URL
// and the addresses of the Pods that serve it.
type Resolver struct {
	// Reader reads Services, EndpointSlices, Pods, server objects and
	// ReferenceGrants; uncached, so a resolution sees the objects as they
	// are.
	Reader client.Reader
	// Domain is the cluster's DNS domain; cluster.local when "".
	Domain string
	// PodNetworks are the ranges Pods' addresses lie in;
	// DefaultPodNetworks when nil.
	PodNetworks []netip.Prefix
}

// Endpoint is where a reference leads.
type Endpoint struct {
	v1alpha1.ServerEndpoint
	// Pinned are the addresses of the ready Pods behind the Service, the
	// only ones dialled for URL; nil for a server outside the cluster,
	// which the egress policy decides on.
	Pinned []netip.AddrPort
}

// Error is a reference that cannot be followed now: Reason is a
// ToolSource condition reason (v1alpha1.ReasonServerRefRefused,
// ReasonServerRefNotFound or ReasonServerNotReady) and Wait says a change
// of the referenced objects, not of the ToolSource, can end it.
type Error struct {
	Reason  string
	Message string
	Wait    bool
}

func (e *Error) Error() string { return e.Message }

func refused(format string, args ...any) error {
	return &Error{Reason: v1alpha1.ReasonServerRefRefused, Message: fmt.Sprintf(format, args...)}
}

func waiting(reason, format string, args ...any) error {
	return &Error{Reason: reason, Message: fmt.Sprintf(format, args...), Wait: true}
}

// Apply resolves ts's serverRef into cfg (its URL and pinned addresses);
// a ToolSource without one keeps cfg as it is and gets a nil Endpoint.
func (r *Resolver) Apply(ctx context.Context, ts *v1alpha1.ToolSource, cfg *mcpsource.Config) (*Endpoint, error) {
	ref := ts.Spec.MCP.ServerRef
	if ref == nil {
		return nil, nil
	}
	ep, err := r.Resolve(ctx, ts.Namespace, ref)
	cfg.URL, cfg.Pinned = ep.URL, ep.Pinned
	return &ep, err
}

// Resolve follows a reference of a ToolSource of namespace. The Endpoint
// names the referenced object even when the reference cannot be followed
// (an *Error, or the API server's).
func (r *Resolver) Resolve(ctx context.Context, namespace string, ref *v1alpha1.ServerReference) (Endpoint, error) {
	target := cmp.Or(ref.Namespace, namespace)
	ep := Endpoint{ServerEndpoint: v1alpha1.ServerEndpoint{Kind: ref.Kind, Namespace: target, Name: ref.Name}}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return ep, refused("serverRef.apiVersion %q is not GROUP/VERSION", ref.APIVersion)
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
	if target != namespace {
		if grantErr := r.granted(ctx, namespace, target, gk, ref.Name); grantErr != nil {
			return ep, grantErr
		}
	}
	if gk == (schema.GroupKind{Kind: "Service"}) {
		if gv.Version != "v1" {
			return ep, refused("a Service is referenced as apiVersion v1, not %s", ref.APIVersion)
		}
		u := &url.URL{}
		u.Path, u.RawPath = pathOf(cmp.Or(ref.Path, DefaultPath))
		return r.service(ctx, ep, target, ref.Name, ref.Port, u)
	}
	k, ok := Lookup(gk)
	if !ok {
		return ep, refused("%s is not a kind of MCP server a ToolSource may reference: name a Service, %s", gk, kindList())
	}
	if !k.Served(gv.Version) {
		return ep, refused("%s %s is not a version this operator reads: use %s", gk, gv.Version, kindVersions(k))
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gv.WithKind(ref.Kind))
	if getErr := r.Reader.Get(ctx, client.ObjectKey{Namespace: target, Name: ref.Name}, u); getErr != nil {
		switch {
		case apierrors.IsNotFound(getErr):
			return ep, waiting(v1alpha1.ReasonServerRefNotFound, "%s %s %s/%s does not exist", k.Project, k.Kind, target, ref.Name)
		case meta.IsNoMatchError(getErr):
			return ep, waiting(v1alpha1.ReasonServerRefNotFound, "%s %s is not installed on this cluster (no CRD serves %s)", k.Project, k.Kind, gv.WithKind(ref.Kind))
		}
		return ep, fmt.Errorf("reading %s %s/%s: %w", k.Kind, target, ref.Name, getErr)
	}
	s, err := Read(u)
	if err != nil {
		return ep, refused("%v", err)
	}
	if !s.Ready || s.URL == "" {
		return ep, waiting(v1alpha1.ReasonServerNotReady, "%s", s.Waiting(k, target, ref.Name))
	}
	t, err := TargetOf(s.URL, target, r.domain())
	if err != nil {
		return ep, refused("%s %s %s/%s reports the URL %s, which a reference may not lead to: %v", k.Project, k.Kind, target, ref.Name, s.URL, err)
	}
	u2, _ := url.Parse(s.URL)
	port, err := urlPort(u2)
	if err != nil {
		return ep, refused("%s %s %s/%s reports the URL %s: %v", k.Project, k.Kind, target, ref.Name, s.URL, err)
	}
	if ref.Port != 0 {
		port = ref.Port
		u2.Host = u2.Hostname() + ":" + strconv.Itoa(int(port))
	}
	if ref.Path != "" {
		u2.Path, u2.RawPath = pathOf(ref.Path)
	}
	if t.External {
		ep.URL, ep.Ready = u2.String(), true
		return ep, nil
	}
	return r.service(ctx, ep, t.Namespace, t.Service, port, u2)
}

// pathOf is a serverRef.path as a URL's Path and RawPath.
func pathOf(p string) (string, string) {
	u, err := url.Parse(p)
	if err != nil {
		return p, ""
	}
	return u.Path, u.RawPath
}

// service leads to Service namespace/name: its URL (u with the Service's
// host and port; http, or https for a port of that name or application
// protocol, when u has no scheme), and the addresses of the ready Pods it
// selects, each proven to be one (a Pod of namespace whose labels the
// Service selects, not on the host's network, whose own status gives the
// address, in the Pod networks). The port is the Service's port of that
// number, or its only one when 0.
func (r *Resolver) service(ctx context.Context, ep Endpoint, namespace, name string, port int32, u *url.URL) (Endpoint, error) {
	svc := &corev1.Service{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, svc); err != nil {
		if apierrors.IsNotFound(err) {
			return ep, waiting(v1alpha1.ReasonServerRefNotFound, "Service %s/%s does not exist", namespace, name)
		}
		return ep, fmt.Errorf("reading Service %s/%s: %w", namespace, name, err)
	}
	what := fmt.Sprintf("Service %s/%s", namespace, name)
	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		return ep, refused("%s is of type ExternalName (%s): a reference leads to the Pods a Service selects, not to a name outside the cluster; give the ToolSource that URL instead, as the egress policy allows", what, svc.Spec.ExternalName)
	case len(svc.Spec.Selector) == 0:
		return ep, refused("%s has no selector: its endpoints are written by hand, not the Pods it selects, so a reference does not lead to them", what)
	}
	sp, err := servicePort(svc, port)
	if err != nil {
		return ep, err
	}
	withHost := *u
	if withHost.Scheme == "" {
		withHost.Scheme = "http"
		if sp.Name == "https" || sp.AppProtocol != nil && *sp.AppProtocol == "https" {
			withHost.Scheme = "https"
		}
	}
	withHost.Host = fmt.Sprintf("%s.%s.svc.%s:%d", name, namespace, r.domain(), sp.Port)
	ep.URL = withHost.String()
	list := &discoveryv1.EndpointSliceList{}
	if err := r.Reader.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{discoveryv1.LabelServiceName: name}, client.Limit(maxSlices)); err != nil {
		return ep, fmt.Errorf("listing the EndpointSlices of %s: %w", what, err)
	}
	selector := labels.SelectorFromSet(svc.Spec.Selector)
	var unproven string
	for _, es := range list.Items {
		target, ok := slicePort(es, sp.Name)
		if !ok {
			continue
		}
		for _, e := range es.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, raw := range e.Addresses {
				if len(ep.Pinned) == MaxPinned {
					break
				}
				a, why := r.prove(ctx, namespace, selector, e.TargetRef, raw)
				if why != "" {
					unproven = cmp.Or(unproven, why)
					continue
				}
				if ap := netip.AddrPortFrom(a, target); !slices.Contains(ep.Pinned, ap) {
					ep.Pinned = append(ep.Pinned, ap)
				}
			}
		}
	}
	switch {
	case len(ep.Pinned) > 0:
		slices.SortFunc(ep.Pinned, netip.AddrPort.Compare)
		ep.Ready = true
		return ep, nil
	case unproven != "":
		return ep, refused("%s leads to no Pod it selects: %s", what, unproven)
	}
	return ep, waiting(v1alpha1.ReasonServerNotReady, "%s has no ready Pod behind port %d", what, sp.Port)
}

// prove checks that an endpoint's address is a ready Pod's the Service
// selects, saying why not otherwise.
func (r *Resolver) prove(ctx context.Context, namespace string, selector labels.Selector, ref *corev1.ObjectReference, raw string) (netip.Addr, string) {
	a, err := netip.ParseAddr(raw)
	if err != nil {
		return a, fmt.Sprintf("the endpoint %q is not an address", raw)
	}
	a = a.Unmap()
	if ref == nil || ref.Kind != "Pod" || (ref.Namespace != "" && ref.Namespace != namespace) {
		return a, fmt.Sprintf("the endpoint %s names no Pod of namespace %s", a, namespace)
	}
	pod := &corev1.Pod{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, pod); err != nil {
		return a, fmt.Sprintf("the endpoint %s names Pod %s, which cannot be read (%v)", a, ref.Name, apierrors.ReasonForError(err))
	}
	ips := make([]string, 0, len(pod.Status.PodIPs))
	for _, ip := range pod.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	switch {
	case ref.UID != "" && ref.UID != pod.UID:
		return a, fmt.Sprintf("the endpoint %s names an earlier Pod %s", a, ref.Name)
	case !selector.Matches(labels.Set(pod.Labels)):
		return a, fmt.Sprintf("the endpoint %s names Pod %s, which the Service does not select", a, ref.Name)
	case pod.Spec.HostNetwork:
		return a, fmt.Sprintf("the endpoint %s is Pod %s on its node's network: its address is the node's", a, ref.Name)
	case !slices.ContainsFunc(ips, func(ip string) bool { p, err := netip.ParseAddr(ip); return err == nil && p.Unmap() == a }):
		return a, fmt.Sprintf("the endpoint %s is not an address of Pod %s (%v)", a, ref.Name, ips)
	case !slices.ContainsFunc(r.podNetworks(), func(p netip.Prefix) bool { return p.Contains(a) }):
		return a, fmt.Sprintf("the endpoint %s of Pod %s is outside the cluster's Pod networks", a, ref.Name)
	}
	return a, ""
}

// servicePort is svc's TCP port numbered port, or its only TCP port when
// port is 0.
func servicePort(svc *corev1.Service, port int32) (corev1.ServicePort, error) {
	var tcp []corev1.ServicePort
	for _, p := range svc.Spec.Ports {
		if p.Protocol == "" || p.Protocol == corev1.ProtocolTCP {
			tcp = append(tcp, p)
		}
	}
	what := fmt.Sprintf("Service %s/%s", svc.Namespace, svc.Name)
	if port != 0 {
		if i := slices.IndexFunc(tcp, func(p corev1.ServicePort) bool { return p.Port == port }); i >= 0 {
			return tcp[i], nil
		}
		return corev1.ServicePort{}, refused("%s has no TCP port %d", what, port)
	}
	if len(tcp) != 1 {
		return corev1.ServicePort{}, refused("%s has %d TCP ports: set serverRef.port to the MCP server's", what, len(tcp))
	}
	return tcp[0], nil
}

// slicePort is the port number an EndpointSlice gives the Service port
// named name.
func slicePort(es discoveryv1.EndpointSlice, name string) (uint16, bool) {
	for _, p := range es.Ports {
		if p.Port != nil && ptr.Deref(p.Name, "") == name && *p.Port > 0 && *p.Port < 65536 {
			if p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP {
				return uint16(*p.Port), true
			}
		}
	}
	return 0, false
}

// urlPort is a URL's port, its scheme's when it names none.
func urlPort(u *url.URL) (int32, error) {
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return 0, fmt.Errorf("port %q is not a port number", p)
		}
		return int32(n), nil
	}
	if u.Scheme == "https" {
		return 443, nil
	}
	return 80, nil
}

func (r *Resolver) domain() string { return cmp.Or(r.Domain, "cluster.local") }

func (r *Resolver) podNetworks() []netip.Prefix {
	if r.PodNetworks == nil {
		return DefaultPodNetworks
	}
	return r.PodNetworks
}

func kindList() string {
	var out []string
	for _, k := range Kinds {
		out = append(out, fmt.Sprintf("%s %s (%s)", k.Project, k.Kind, k.Group))
	}
	return fmt.Sprint(out)
}

func kindVersions(k Kind) string {
	var out []string
	for _, v := range k.Versions {
		out = append(out, k.Group+"/"+v)
	}
	return fmt.Sprint(out)
}

// ReferenceGrantVersion is the Gateway API ReferenceGrant a namespace
// grants references into it with.
var ReferenceGrantVersion = schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1beta1", Kind: "ReferenceGrantList"}

// maxGrants bounds the ReferenceGrants of a namespace read.
const maxGrants = 100

// granted checks that namespace target grants ToolSources of namespace
// from a reference to the object gk/name, with a ReferenceGrant of target
// (Gateway API's) whose from names ToolSources of namespace and whose to
// names the kind and, when it names one, the object.
func (r *Resolver) granted(ctx context.Context, from, target string, gk schema.GroupKind, name string) error {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(ReferenceGrantVersion)
	if err := r.Reader.List(ctx, list, client.InNamespace(target), client.Limit(maxGrants)); err != nil {
		if meta.IsNoMatchError(err) {
			return refused("the reference leads to namespace %s, and this cluster has no ReferenceGrant kind (gateway.networking.k8s.io) to grant it with: reference an object of the ToolSource's own namespace", target)
		}
		return fmt.Errorf("listing the ReferenceGrants of namespace %s: %w", target, err)
	}
	for _, g := range list.Items {
		froms, _, _ := unstructured.NestedSlice(g.Object, "spec", "from")
		tos, _, _ := unstructured.NestedSlice(g.Object, "spec", "to")
		fromOK := slices.ContainsFunc(froms, func(f any) bool {
			m, _ := f.(map[string]any)
			return m["group"] == v1alpha1.GroupVersion.Group && m["kind"] == "ToolSource" && m["namespace"] == from
		})
		toOK := slices.ContainsFunc(tos, func(t any) bool {
			m, _ := t.(map[string]any)
			group, _ := m["group"].(string)
			n, _ := m["name"].(string)
			return group == gk.Group && m["kind"] == gk.Kind && (n == "" || n == name)
		})
		if fromOK && toOK {
			return nil
		}
	}
	return refused("the reference leads to namespace %s, which grants ToolSources of namespace %s no reference to %s %s: its owners may add a ReferenceGrant (gateway.networking.k8s.io) from group %s kind ToolSource namespace %s to group %q kind %s", target, from, gk.Kind, name, v1alpha1.GroupVersion.Group, from, gk.Group, gk.Kind)
}
