package controllers

import (
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/mcptest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/openaitest"
)

// A provider endpoint outside the egress policy (the suite allows only
// 127.0.0.1; 127.0.0.2 stands for a metadata service) is never called,
// whichever of the three endpoints names it: the catalog is Stalled with
// EgressDenied naming the field and the flag, and nothing the service
// would have answered reaches the status.
func TestProviderEndpointsOutsideTheEgressPolicyAreNotCalled(t *testing.T) {
	for field, point := range map[string]func(*v1alpha1.ToolCatalog, string){
		"spec.embedding.baseURL":       func(tc *v1alpha1.ToolCatalog, u string) { tc.Spec.Embedding.BaseURL = u },
		"spec.queryGeneration.baseURL": func(tc *v1alpha1.ToolCatalog, u string) { tc.Spec.QueryGeneration.BaseURL = u },
		"spec.queryGeneration.fallback.baseURL": func(tc *v1alpha1.ToolCatalog, u string) {
			tc.Spec.QueryGeneration.Fallback = &v1alpha1.QueryGenerationFallback{BaseURL: u, Model: testChatModel}
		},
	} {
		t.Run(field, func(t *testing.T) {
			g := gomegaFor(t)
			ns := newNamespace(t)
			internal := mcptest.NewTrap(t, "127.0.0.2", openaitest.Leak)
			tc := testCatalog(ns, "tools", newWireProvider(t))
			point(tc, internal.URL+"/latest/meta-data?x=")
			createAll(g, testTool(ns, "weather", "get_weather", "Get the weather.", "tools"), tc)
			g.Eventually(func(g Gomega) {
				got := getTC(g, ns, "tools")
				c := expectCondition(g, got, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonEgressDenied)
				g.Expect(c.Message).To(HavePrefix(field + " " + internal.URL + "/ may not be reached"))
				g.Expect(c.Message).To(ContainSubstring("--egress-allow"))
				expectCondition(g, got, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonEgressDenied)
				g.Expect(hasEvent(eventsFor(g, ns, "tools"), "Warning", v1alpha1.ReasonEgressDenied)).NotTo(BeNil())
			}).Should(Succeed())
			g.Expect(internal.Requests()).To(Equal(0))
			g.Expect(statusText(g, ns, "tools")).NotTo(ContainSubstring("ASIAINTERNAL"))
		})
	}
}

// An allowed endpoint that redirects to a denied one is not followed: a
// 307 would carry the POST body and the API key there. The tool fails
// with a summary that says why, and the target saw nothing.
func TestProviderRedirectsAreNotFollowed(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	internal := mcptest.NewTrap(t, "127.0.0.2", openaitest.Leak)
	redirecting := mcptest.NewTrap(t, "127.0.0.1", mcptest.Redirect(internal.URL+"/latest/meta-data"))
	tc := testCatalog(ns, "tools", newWireProvider(t))
	tc.Spec.Embedding.BaseURL = redirecting.URL + "/v1"
	createAll(g, testTool(ns, "weather", "get_weather", "Get the weather.", "tools"), tc)
	g.Eventually(func(g Gomega) {
		got := getTC(g, ns, "tools")
		g.Expect(got.Status.FailingTools).NotTo(BeEmpty())
		g.Expect(got.Status.FailingTools[0].Message).To(ContainSubstring("redirect, which is not followed"))
	}).Should(Succeed())
	g.Expect(redirecting.Requests()).To(BeNumerically(">", 0))
	g.Expect(internal.Requests()).To(Equal(0))
	g.Expect(statusText(g, ns, "tools")).NotTo(ContainSubstring("ASIAINTERNAL"))
}

// statusText is a catalog's whole status and the notes of its events.
func statusText(g Gomega, ns, name string) string {
	raw, err := json.Marshal(getTC(g, ns, name).Status)
	g.Expect(err).NotTo(HaveOccurred())
	b := strings.Builder{}
	b.Write(raw)
	for _, e := range eventsFor(g, ns, name) {
		b.WriteString("\n" + e.Note)
	}
	return b.String()
}
