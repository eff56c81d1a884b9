package controllers

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
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

// podServer is an MCP server named name offering one tool, at this
// machine's address, standing for a Pod's.
func podServer(t *testing.T, name, tool, description string) (*mcptest.Server, netip.Addr) {
	addr, err := testenv.PodAddress()
	if err != nil {
		t.Fatal(err)
	}
	srv := mcptest.New(t, mcptest.Options{Name: name, Host: addr.String()})
	srv.Tool(tool, description, nil, nil)
	return srv, addr
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
	srv, addr := podServer(t, "docs", "search", "Search the documentation by keywords.")
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
	srv, addr := podServer(t, "fetch", "fetch", "Fetch a web page and return its text.")
	servedBy(g, ns, "fetch", addr, int32(serverPort(t, srv.URL)), true)

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

// labelService marks a Service for discovery.
func labelService(g *WithT, ns, name string, value string) {
	svc := &corev1.Service{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, svc)).To(Succeed())
	patch := client.MergeFrom(svc.DeepCopy())
	if value == "" {
		delete(svc.Labels, "mcp.example.com/discover")
	} else {
		svc.Labels = map[string]string{"mcp.example.com/discover": value}
	}
	g.Expect(k8sClient.Patch(context.Background(), svc, patch)).To(Succeed())
}

// A ToolSourceTemplate makes a ToolSource for each Service it selects,
// whose tools are imported under the server's own prefix; it leaves a
// ToolSource of the same name it did not make alone, says when it selects
// more servers than allowed, and removes a server's ToolSource, and its
// tools, when the server is no longer selected. Under RequireApproval a
// discovered server's tools wait for approval as a hand-written source's.
func TestToolSourceTemplateDiscoversServers(t *testing.T) {
	g := gomegaFor(t)
	ctx := context.Background()
	ns := newNamespace(t)
	docs, addr := podServer(t, "docs", "search", "Search the documentation by keywords.")
	servedBy(g, ns, "docs", addr, int32(serverPort(t, docs.URL)), true)
	labelService(g, ns, "docs", "true")
	servedBy(g, ns, "quiet", addr, int32(serverPort(t, docs.URL)), true) // not selected

	tpl := &v1alpha1.ToolSourceTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mcp"}, Spec: v1alpha1.ToolSourceTemplateSpec{
		Kinds:    []v1alpha1.ServerKind{{APIVersion: "v1", Kind: "Service"}},
		Selector: metav1.LabelSelector{MatchLabels: map[string]string{"mcp.example.com/discover": "true"}},
		Template: v1alpha1.ToolSourceTemplateSource{ToolNamePrefix: "{name}_", Labels: map[string]string{catalogLabel: "imported"}},
	}}
	createAll(g, tpl)
	g.Eventually(func(g Gomega) {
		got := &v1alpha1.ToolSourceTemplate{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(tpl), got)).To(Succeed())
		expectCondition(g, got, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonDiscovered)
		g.Expect(got.Status.ServerCount).To(Equal(int32(1)))
		expectCondition(g, getTS(g, ns, "mcp-docs"), v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSynced)
		g.Expect(sourceTools(g, ns, "mcp-docs")).To(HaveKey("docs_search"))
	}).Should(Succeed())
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mcp-quiet"}, &v1alpha1.ToolSource{})).NotTo(Succeed())

	// A ToolSource of the name the template would give a new server,
	// written by hand, is not the template's.
	createAll(g, toolSource(ns, "mcp-billing", "https://billing.example.com/mcp"))
	servedBy(g, ns, "billing", addr, 1, false)
	labelService(g, ns, "billing", "true")
	g.Eventually(func(g Gomega) {
		got := &v1alpha1.ToolSourceTemplate{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(tpl), got)).To(Succeed())
		c := expectCondition(g, got, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonServerSkipped)
		g.Expect(c.Message).To(ContainSubstring("2 servers, 1 ToolSources"))
		g.Expect(got.Status.Servers).To(ContainElement(HaveField("Reason", ContainSubstring("a ToolSource named mcp-billing exists that this template did not make"))))
	}).Should(Succeed())
	g.Expect(getTS(g, ns, "mcp-billing").Spec.MCP.URL).To(Equal("https://billing.example.com/mcp"))

	// More servers than --template-max-servers.
	for _, name := range []string{"extra-1", "extra-2"} {
		servedBy(g, ns, name, addr, 1, false)
		labelService(g, ns, name, "true")
	}
	g.Eventually(func(g Gomega) {
		got := &v1alpha1.ToolSourceTemplate{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(tpl), got)).To(Succeed())
		c := expectCondition(g, got, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonTooManyServers)
		g.Expect(c.Message).To(ContainSubstring("more than --template-max-servers %d", templateMaxServers))
		g.Expect(got.Status.Servers).To(HaveLen(templateMaxServers))
	}).Should(Succeed())
	for _, name := range []string{"extra-1", "extra-2", "billing"} {
		labelService(g, ns, name, "")
	}

	// docs leaves the selection: its ToolSource goes, and its tools.
	labelService(g, ns, "docs", "")
	g.Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mcp-docs"}, &v1alpha1.ToolSource{})).NotTo(Succeed())
		g.Expect(sourceTools(g, ns, "mcp-docs")).To(BeEmpty())
		g.Expect(hasEvent(eventsFor(g, ns, "mcp"), "Normal", "ServerGone")).NotTo(BeNil())
	}).Should(Succeed())
	g.Expect(getTS(g, ns, "mcp-billing").Spec.MCP.URL).To(Equal("https://billing.example.com/mcp"))

	// Under RequireApproval a discovered server's tools are held.
	held := tpl.DeepCopy()
	held.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "held"}
	held.Spec.Template.ChangePolicy = v1alpha1.ChangePolicyRequireApproval
	held.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{"mcp.example.com/discover": "held"}}
	labelService(g, ns, "docs", "held")
	createAll(g, held)
	g.Eventually(func(g Gomega) {
		ts := getTS(g, ns, "held-docs")
		expectCondition(g, ts, v1alpha1.ConditionChangePending, metav1.ConditionTrue, v1alpha1.ReasonAwaitingApproval)
		g.Expect(ts.Status.PendingChanges).To(ContainElement(HaveField("Tool", "docs_search")))
	}).Should(Succeed())
	g.Expect(sourceTools(g, ns, "held-docs")).To(BeEmpty())
}
