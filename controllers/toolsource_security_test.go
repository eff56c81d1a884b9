package controllers

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/mcptest"
)

// A source pointing outside the egress policy (the suite allows only
// 127.0.0.1) is EgressDenied and its server never sees a request.
func TestToolSourceOutsideTheEgressPolicyIsDenied(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	trap := mcptest.NewTrap(t, "127.0.0.2", nil)
	createAll(g, toolSource(ns, "metadata", trap.URL+"/latest/meta-data"))
	g.Eventually(func(g Gomega) {
		c := expectCondition(g, getTS(g, ns, "metadata"), v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonEgressDenied)
		g.Expect(c.Message).To(ContainSubstring("127.0.0.2"))
		g.Expect(c.Message).To(ContainSubstring("--egress-allow"))
		g.Expect(hasEvent(eventsFor(g, ns, "metadata"), "Warning", v1alpha1.ReasonEgressDenied)).NotTo(BeNil())
	}).Should(Succeed())
	g.Expect(trap.Requests()).To(Equal(0))
}

// A server that redirects is not followed, so its bearer token, meant for
// the configured host only, never reaches the redirect's target.
func TestToolSourceRedirectIsNotFollowed(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	target := mcptest.NewTrap(t, "127.0.0.1", nil)
	redirecting := mcptest.NewTrap(t, "127.0.0.1", mcptest.Redirect(target.URL+"/collect"))
	ts := toolSource(ns, "redirecting", redirecting.URL+"/mcp")
	ts.Spec.MCP.BearerTokenSecretRef = &v1alpha1.SecretKeySelector{Name: "mcp-token", Key: "token"}
	createAll(g, secret(ns, "mcp-token", map[string]string{"token": "tok-redirected"}), ts)
	g.Eventually(func(g Gomega) {
		c := expectCondition(g, getTS(g, ns, "redirecting"), v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonServerUnreachable)
		g.Expect(c.Message).To(ContainSubstring("redirect"))
	}).Should(Succeed())
	// The configured host got the token; the target got nothing.
	g.Expect(redirecting.Authorizations()).To(ContainElement("Bearer tok-redirected"))
	g.Expect(target.Requests()).To(Equal(0))
}

// A source's permissions go on every tool it imports, and follow edits.
func TestToolSourceGivesItsToolsPermissions(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	srv := mcptest.New(t, mcptest.Options{})
	srv.Tool("refund", "Refund an order.", nil, nil)
	srv.Tool("lookup", "Look up an order.", nil, nil)
	ts := toolSource(ns, "orders", srv.URL)
	ts.Spec.Permissions = &v1alpha1.ToolPermissions{AllowedPrincipals: []string{"group:support"}}
	createAll(g, ts)
	g.Eventually(func(g Gomega) {
		tools := sourceTools(g, ns, "orders")
		g.Expect(tools).To(HaveLen(2))
		for _, td := range tools {
			g.Expect(td.Spec.Permissions).To(Equal(&v1alpha1.ToolPermissions{AllowedPrincipals: []string{"group:support"}}))
		}
	}).Should(Succeed())
	edit := getTS(g, ns, "orders")
	patch := client.MergeFrom(edit.DeepCopy())
	edit.Spec.Permissions.AllowedPrincipals = []string{"group:support", "alice"}
	g.Expect(k8sClient.Patch(context.Background(), edit, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		for _, td := range sourceTools(g, ns, "orders") {
			g.Expect(td.Spec.Permissions.AllowedPrincipals).To(Equal([]string{"group:support", "alice"}))
		}
	}).Should(Succeed())
}

// A server whose tools/list never ends is stopped at the source's bound
// (the suite's 100 tools): nothing is imported, the condition says why,
// and the server served only the pages up to the bound.
func TestToolSourceEndlessListIsStopped(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	endless := mcptest.NewEndless(t)
	createAll(g, toolSource(ns, "endless", endless.URL))
	g.Eventually(func(g Gomega) {
		c := expectCondition(g, getTS(g, ns, "endless"), v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSyncLimitExceeded)
		g.Expect(c.Message).To(ContainSubstring("more than 100"))
	}).Should(Succeed())
	g.Expect(sourceTools(g, ns, "endless")).To(BeEmpty())
	g.Expect(endless.Pages()).To(BeNumerically("<=", 11*3), "pages served over at most three syncs")
}
