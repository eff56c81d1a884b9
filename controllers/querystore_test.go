package controllers

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
)

// providerBill is what a provider was asked so far: chat requests and
// embedded texts.
type providerBill struct{ chat, texts int }

func billOf(p *provider) providerBill {
	_, texts := p.EmbeddingCalls()
	return providerBill{chat: len(p.ChatRequests()), texts: texts}
}

func (b providerBill) since(before providerBill) providerBill {
	return providerBill{chat: b.chat - before.chat, texts: b.texts - before.texts}
}

// waitGraded waits until each catalog serves version and has graded it:
// the grading embeds queries too, and its requests are part of the bill.
func waitGraded(g *WithT, ns string, version int64, names ...string) {
	for _, name := range names {
		waitVersion(g, ns, name, version)
		g.Eventually(func(g Gomega) {
			q := getTC(g, ns, name).Status.Quality
			g.Expect(q).NotTo(BeNil())
			g.Expect(q.Version).To(Equal(version))
		}).Should(Succeed())
	}
}

// Catalogs of a namespace over the same tools pay the provider once: the
// second and third cost nothing, a description edited and reverted costs
// nothing the second time, and a ToolDefinition renamed with its spec
// unchanged costs nothing.
func TestCatalogsOverTheSameToolsPayOnce(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	p := newWireProvider(t)
	shared := func(name string) *v1alpha1.ToolCatalog {
		tc := testCatalog(ns, name, p)
		tc.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{catalogLabel: "shared"}}
		return tc
	}
	var tools []client.Object
	for i := range 8 {
		tools = append(tools, testTool(ns, fmt.Sprintf("tool-%d", i), fmt.Sprintf("do_thing_%d", i), fmt.Sprintf("Do thing number %d for the user.", i), "shared"))
	}
	createAll(g, tools...)

	start := billOf(p)
	createAll(g, shared("first"))
	waitGraded(g, ns, 1, "first")
	first := billOf(p).since(start)
	if first.chat == 0 || first.texts == 0 {
		t.Fatalf("the first catalog asked nothing: %+v", first)
	}

	before := billOf(p)
	createAll(g, shared("second"), shared("third"))
	waitGraded(g, ns, 1, "second", "third")
	more := billOf(p).since(before)
	t.Logf("provider requests: first catalog %d chat, %d texts; second and third together %d chat, %d texts", first.chat, first.texts, more.chat, more.texts)
	g.Expect(more.chat*20).To(BeNumerically("<=", first.chat), "the second and third catalogs' chat requests")
	g.Expect(more.texts*20).To(BeNumerically("<=", first.texts), "the second and third catalogs' embedded texts")
	// The event of the version says what the store saved.
	g.Eventually(func(g Gomega) {
		e := hasEvent(eventsFor(g, ns, "second"), "Normal", v1alpha1.ReasonVersionPublished)
		g.Expect(e).NotTo(BeNil())
		g.Expect(e.Note).To(ContainSubstring("found 8 query sets and 24 vectors in the query store instead of asking the provider"))
	}).Should(Succeed())

	all := []string{"first", "second", "third"}
	describe := func(text string) {
		editTD(g, ns, "tool-3", func(td *v1alpha1.ToolDefinition) { td.Spec.Description = text })
	}
	before = billOf(p)
	describe("Do thing number 3 for the user, and explain it.")
	waitGraded(g, ns, 2, all...)
	edited := billOf(p).since(before)
	g.Expect(edited).To(Equal(providerBill{chat: 1, texts: 3}), "a new description is asked for, and its 3 queries embedded, once for the three catalogs")
	before = billOf(p)
	describe("Do thing number 3 for the user.")
	waitGraded(g, ns, 3, all...)
	reverted := billOf(p).since(before)
	g.Expect(reverted).To(Equal(providerBill{}), "a description reverted to one embedded before")

	before = billOf(p)
	renamed := testTool(ns, "tool-3-renamed", "do_thing_3", "Do thing number 3 for the user.", "shared")
	createAll(g, renamed)
	g.Expect(k8sClient.Delete(context.Background(), getTD(g, ns, "tool-3"))).To(Succeed())
	// Each catalog has embedded the renamed object: its passes ran.
	g.Eventually(func(g Gomega) {
		td := getTD(g, ns, "tool-3-renamed")
		g.Expect(td.Status.Catalogs).To(HaveLen(len(all)))
		expectCondition(g, td, v1alpha1.ConditionEmbedded, metav1.ConditionTrue, v1alpha1.ReasonEmbedded)
	}).Should(Succeed())
	g.Expect(billOf(p).since(before)).To(Equal(providerBill{}), "a ToolDefinition renamed with its spec unchanged")
}

// What one API key's requests produced is not another's: behind a proxy
// that maps a model name to other models per key, two catalogs of a
// namespace at the same endpoint and model, with their own keys, each ask
// the provider; a third with the first one's key pays nothing.
func TestQueryStoreEntriesAreTheirKeys(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	p := newWireProvider(t)
	p.APIKeys = []string{"sk-team-a", "sk-team-b"}
	keyed := func(name, key string) *v1alpha1.ToolCatalog {
		tc := testCatalog(ns, name, p)
		tc.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{catalogLabel: "shared"}}
		ref := &v1alpha1.SecretKeySelector{Name: key, Key: "apiKey"}
		tc.Spec.Embedding.APIKeySecretRef, tc.Spec.QueryGeneration.APIKeySecretRef = ref, ref
		return tc
	}
	var objs []client.Object
	for i := range 4 {
		objs = append(objs, testTool(ns, fmt.Sprintf("tool-%d", i), fmt.Sprintf("do_thing_%d", i), fmt.Sprintf("Do thing number %d for the user.", i), "shared"))
	}
	objs = append(objs, secret(ns, "team-a", map[string]string{"apiKey": "sk-team-a"}), secret(ns, "team-b", map[string]string{"apiKey": "sk-team-b"}))
	createAll(g, objs...)

	start := billOf(p)
	createAll(g, keyed("first", "team-a"))
	waitGraded(g, ns, 1, "first")
	first := billOf(p).since(start)
	g.Expect(first.chat).To(BeNumerically(">", 0))

	before := billOf(p)
	createAll(g, keyed("second", "team-b"))
	waitGraded(g, ns, 1, "second")
	g.Expect(billOf(p).since(before).chat).To(Equal(first.chat), "another key's catalog took the first key's query sets")

	before = billOf(p)
	createAll(g, keyed("third", "team-a"))
	waitGraded(g, ns, 1, "third")
	g.Expect(billOf(p).since(before)).To(Equal(providerBill{}), "the first key's catalog asked again")
}
