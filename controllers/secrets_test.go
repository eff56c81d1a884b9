package controllers

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/mcptest"
)

// notOptedIn is the message of a Secret that exists but did not opt in,
// worded as for one that does not exist.
const notOptedIn = "does not exist or is not labelled toolcatalog.dev/secret=true"

// unlabelled is s without the opt-in label: a Secret of the namespace that
// its owner never offered to catalogs and sources.
func unlabelled(s *corev1.Secret) *corev1.Secret {
	delete(s.Labels, v1alpha1.LabelSecret)
	return s
}

// optIn labels an existing Secret, as its owner would.
func optIn(g *WithT, ns, name string) {
	s := &corev1.Secret{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
	patch := client.MergeFrom(s.DeepCopy())
	s.Labels = map[string]string{v1alpha1.LabelSecret: v1alpha1.LabelSecretValue}
	g.Expect(k8sClient.Patch(context.Background(), s, patch)).To(Succeed())
}

// Whoever may create a ToolSource in a namespace cannot make the manager
// send a Secret of that namespace to a server of their choosing: a Secret
// is read only once it carries the opt-in label. Labelling it is enough
// for the source to use it (the watch sees the label), which shows the
// server would have received the token.
func TestToolSourceUsesOnlySecretsThatOptIn(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	collector := mcptest.NewTrap(t, "127.0.0.1", nil)
	ts := toolSource(ns, "collector", collector.URL+"/mcp")
	ts.Spec.MCP.BearerTokenSecretRef = &v1alpha1.SecretKeySelector{Name: "db-password", Key: "password"}
	createAll(g, unlabelled(secret(ns, "db-password", map[string]string{"password": "hunter2-db"})), ts)
	g.Eventually(func(g Gomega) {
		c := expectCondition(g, getTS(g, ns, "collector"), v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSecretNotFound)
		g.Expect(c.Message).To(ContainSubstring("Secret " + ns + "/db-password named in spec.mcp.bearerTokenSecretRef " + notOptedIn))
		g.Expect(hasEvent(eventsFor(g, ns, "collector"), "Warning", v1alpha1.ReasonSecretNotFound)).NotTo(BeNil())
	}).Should(Succeed())
	g.Expect(collector.Requests()).To(Equal(0))

	optIn(g, ns, "db-password")
	g.Eventually(collector.Authorizations).Should(ContainElement("Bearer hunter2-db"))
}

// The same holds for a catalog's provider key: an API key Secret that did
// not opt in is never sent to the provider, and labelling it lets the
// catalog publish.
func TestCatalogUsesOnlySecretsThatOptIn(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	p, tc := keyedCatalog(t, ns)
	createAll(g, unlabelled(secret(ns, "openai", map[string]string{"apiKey": "sk-good"})), tc, testTool(ns, "weather", "get_weather", "Get the weather.", "tools"))
	g.Eventually(func(g Gomega) {
		c := expectCondition(g, getTC(g, ns, "tools"), v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSecretNotFound)
		g.Expect(c.Message).To(ContainSubstring("Secret " + ns + "/openai named in spec.embedding.apiKeySecretRef " + notOptedIn))
	}).Should(Succeed())
	g.Expect(p.ChatRequests()).To(BeEmpty())
	g.Expect(p.EmbeddingRequests()).To(BeEmpty())

	optIn(g, ns, "openai")
	waitVersion(g, ns, "tools", 1)
}
