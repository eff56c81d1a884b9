package controllers

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/mcptest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/testenv"
)

// serverPort is the port of a test server's URL.
func serverPort(t *testing.T, raw string) int {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// servedBy is testenv.ServePod with the suite's client.
func servedBy(g *WithT, ns, name string, addr netip.Addr, port int32, ready bool) *discoveryv1.EndpointSlice {
	slice, err := testenv.ServePod(context.Background(), k8sClient, ns, name, addr, port, ready)
	g.Expect(err).NotTo(HaveOccurred())
	return slice
}

// A ToolSource that references the Service in front of an MCP server
// imports its tools with no egress entry, where the server's own address
// is refused to a URL; it waits, saying why, while no Pod is ready, syncs
// as soon as one is (the EndpointSlice is watched), and dials the Pod
// under the Service's name. An endpoint that stops being the Pod's is
// refused, and what was imported is kept.
func TestToolSourceFollowsAServiceToItsPods(t *testing.T) {
	g := gomegaFor(t)
	ctx := context.Background()
	ns := newNamespace(t)
	addr, err := testenv.PodAddress()
	if err != nil {
		t.Fatal(err)
	}
	srv := mcptest.New(t, mcptest.Options{Name: "docs", Host: addr.String()})
	srv.Tool("search", "Search the documentation by keywords.", nil, nil)
	port := serverPort(t, srv.URL)

	// The same server by URL: the egress policy refuses its address.
	createAll(g, toolSource(ns, "by-url", srv.URL))
	g.Eventually(func(g Gomega) {
		expectCondition(g, getTS(g, ns, "by-url"), v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonEgressDenied)
	}).Should(Succeed())
	g.Expect(srv.Hosts()).To(BeEmpty())

	slice := servedBy(g, ns, "docs", addr, int32(port), false)
	ts := toolSource(ns, "by-ref", "")
	ts.Spec.MCP.ServerRef = &v1alpha1.ServerReference{APIVersion: "v1", Kind: "Service", Name: "docs"}
	createAll(g, ts)
	g.Eventually(func(g Gomega) {
		got := getTS(g, ns, "by-ref")
		c := expectCondition(g, got, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonServerNotReady)
		g.Expect(c.Message).To(ContainSubstring("Service %s/docs has no ready Pod behind port 8080", ns))
		g.Expect(got.Status.Endpoint).NotTo(BeNil())
		g.Expect(got.Status.Endpoint.Ready).To(BeFalse())
	}).Should(Succeed())

	*slice.Endpoints[0].Conditions.Ready = true
	g.Expect(k8sClient.Update(ctx, slice)).To(Succeed())
	service := fmt.Sprintf("docs.%s.svc.cluster.local:8080", ns)
	g.Eventually(func(g Gomega) {
		got := getTS(g, ns, "by-ref")
		expectCondition(g, got, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSynced)
		g.Expect(got.Status.Endpoint).To(Equal(&v1alpha1.ServerEndpoint{Kind: "Service", Namespace: ns, Name: "docs", URL: "http://" + service + "/mcp", Ready: true}))
		g.Expect(sourceTools(g, ns, "by-ref")).To(HaveKey("search"))
	}).Should(Succeed())
	g.Expect(srv.Hosts()).To(ContainElement(service))

	// The EndpointSlice is rewritten to an address that is not the Pod's.
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(slice), slice)).To(Succeed())
	slice.Endpoints[0].Addresses = []string{"192.0.2.99"}
	g.Expect(k8sClient.Update(ctx, slice)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := expectCondition(g, getTS(g, ns, "by-ref"), v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonServerRefRefused)
		g.Expect(c.Message).To(ContainSubstring("the endpoint 192.0.2.99 is not an address of Pod docs-0"))
		g.Expect(c.Message).To(ContainSubstring("the ToolDefinitions already imported are kept"))
		g.Expect(hasEvent(eventsFor(g, ns, "by-ref"), "Warning", v1alpha1.ReasonServerRefRefused)).NotTo(BeNil())
	}).Should(Succeed())
	g.Expect(sourceTools(g, ns, "by-ref")).To(HaveKey("search"))
}

// A ToolSource that references an mcp-lifecycle-operator MCPServer waits,
// in the words of the server's own condition, until the server says it is
// ready with an address, then follows that address to its Service's Pods;
// the server object is watched.
func TestToolSourceFollowsAnMCPServerObject(t *testing.T) {
	g := gomegaFor(t)
	ctx := context.Background()
	ns := newNamespace(t)
	addr, err := testenv.PodAddress()
	if err != nil {
		t.Fatal(err)
	}
	srv := mcptest.New(t, mcptest.Options{Name: "fetch", Host: addr.String()})
	srv.Tool("fetch", "Fetch a web page and return its text.", nil, nil)
	port := serverPort(t, srv.URL)
	servedBy(g, ns, "fetch", addr, int32(port), true)

	server := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"source": map[string]any{"type": "ContainerImage", "containerImage": map[string]any{"ref": "registry.example/mcp/fetch:1"}},
		"config": map[string]any{"port": int64(8080)},
	}}}
	server.SetAPIVersion("mcp.x-k8s.io/v1alpha1")
	server.SetKind("MCPServer")
	server.SetNamespace(ns)
	server.SetName("fetch")
	g.Expect(k8sClient.Create(ctx, server)).To(Succeed())
	setStatus := func(status string, url string) {
		condition := map[string]any{"type": "Ready", "status": status, "reason": "Deploying", "message": "1 of 1 replicas starting",
			"lastTransitionTime": metav1.Now().UTC().Format("2006-01-02T15:04:05Z")}
		g.Expect(unstructured.SetNestedSlice(server.Object, []any{condition}, "status", "conditions")).To(Succeed())
		if url != "" {
			g.Expect(unstructured.SetNestedField(server.Object, url, "status", "address", "url")).To(Succeed())
		}
		g.Expect(k8sClient.Status().Update(ctx, server)).To(Succeed())
	}
	setStatus("False", "")

	ts := toolSource(ns, "fetch", "")
	ts.Spec.MCP.ServerRef = &v1alpha1.ServerReference{APIVersion: "mcp.x-k8s.io/v1alpha1", Kind: "MCPServer", Name: "fetch"}
	createAll(g, ts)
	g.Eventually(func(g Gomega) {
		c := expectCondition(g, getTS(g, ns, "fetch"), v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonServerNotReady)
		g.Expect(c.Message).To(ContainSubstring("mcp-lifecycle-operator MCPServer %s/fetch is not ready: its Ready condition is False (Deploying): 1 of 1 replicas starting", ns))
		g.Expect(conditionOf(getTS(g, ns, "fetch"), v1alpha1.ConditionStalled)).To(BeNil())
	}).Should(Succeed())
	g.Expect(srv.Hosts()).To(BeEmpty())

	setStatus("True", fmt.Sprintf("http://fetch.%s.svc.cluster.local:8080/mcp", ns))
	g.Eventually(func(g Gomega) {
		got := getTS(g, ns, "fetch")
		expectCondition(g, got, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSynced)
		g.Expect(got.Status.Endpoint).To(Equal(&v1alpha1.ServerEndpoint{Kind: "MCPServer", Namespace: ns, Name: "fetch",
			URL: fmt.Sprintf("http://fetch.%s.svc.cluster.local:8080/mcp", ns), Ready: true}))
		g.Expect(sourceTools(g, ns, "fetch")).To(HaveKey("fetch"))
	}).Should(Succeed())
}
