package controllers

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/metrics"
	"github.com/toolcatalog/tool-catalog-operator/internal/records"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// A catalog grades each version it publishes with its own queries and
// names the tools it cannot tell apart, on both ToolDefinitions, until
// their descriptions differ.
func TestSelfGradingNamesConfusableTools(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	tc := builtinCatalog(ns, "graded")
	// Two tools that say the same thing, among distinct ones.
	same := "Look up a customer record by its customer id and return the account details."
	createAll(g,
		testTool(ns, "weather", "get_weather", "Get the current weather conditions and the forecast for a city.", "graded"),
		testTool(ns, "email", "send_email", "Send an email message to a recipient.", "graded"),
		testTool(ns, "issue", "create_issue", "Open an issue in a GitHub repository.", "graded"),
		testTool(ns, "sql", "run_sql", "Run a read-only SQL query on the analytics warehouse.", "graded"),
		testTool(ns, "lookup", "lookup_customer", same, "graded"),
		testTool(ns, "find", "find_customer", same, "graded"),
		tc,
	)

	var q *v1alpha1.CatalogQuality
	g.Eventually(func(g Gomega) {
		tc = getTC(g, ns, "graded")
		q = tc.Status.Quality
		g.Expect(q).NotTo(BeNil())
		g.Expect(q.Version).To(Equal(tc.Status.Version))
		g.Expect(q.GradedTools).To(Equal(int32(6)))
	}).Should(Succeed())
	g.Expect(q.GradedQueries).To(Equal(int32(30)))
	g.Expect(q.ConfusablePairs).To(HaveLen(1))
	g.Expect(q.ConfusablePairs[0].Tools).To(Equal([]string{"find_customer", "lookup_customer"}))
	sim, err := strconv.ParseFloat(q.ConfusablePairs[0].Similarity, 64)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sim).To(BeNumerically(">", 0.8))
	recall, err := strconv.ParseFloat(q.SelfRecallAt5, 64)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(recall).To(BeNumerically(">", 0.5))
	// The metrics follow the status write.
	g.Eventually(func(g Gomega) {
		g.Expect(testutil.ToFloat64(metrics.SelfRecall.WithLabelValues(ns + "/graded"))).To(BeNumerically("~", recall, 0.001))
		g.Expect(testutil.ToFloat64(metrics.Quality.WithLabelValues(ns+"/graded", "confusable_pairs"))).To(Equal(1.0))
	}).Should(Succeed())
	// Events are sent on their own, after the status.
	g.Eventually(func(g Gomega) {
		g.Expect(hasEvent(eventsFor(g, ns, "graded"), corev1.EventTypeWarning, v1alpha1.ReasonConfusableTools)).NotTo(BeNil())
	}).Should(Succeed())

	// Both ToolDefinitions name the other tool and the similarity.
	for name, other := range map[string]string{"lookup": "find_customer", "find": "lookup_customer"} {
		g.Eventually(func(g Gomega) {
			td := getTD(g, ns, name)
			c := expectCondition(g, td, v1alpha1.ConditionConfusable, metav1.ConditionTrue, v1alpha1.ReasonConfusableWith)
			g.Expect(c.Message).To(ContainSubstring(other))
			g.Expect(c.Message).To(ContainSubstring("similarity " + q.ConfusablePairs[0].Similarity))
			rec := records.Of(td, "graded")
			g.Expect(rec).NotTo(BeNil())
			g.Expect(rec.ConfusableWith).To(Equal(&v1alpha1.ConfusableTool{Name: other, Similarity: q.ConfusablePairs[0].Similarity}))
		}).Should(Succeed())
	}
	out := runKubectl(t, "describe", "td", "-n", ns, "find")
	t.Logf("kubectl describe td find:\n%s", out)
	for _, re := range []string{`Confusable With:\s+Name:\s+lookup_customer`, `Type:\s+Confusable`, `Reason:\s+ConfusableWith`} {
		g.Expect(out).To(MatchRegexp(re))
	}
	out = runKubectl(t, "describe", "tc", "-n", ns, "graded")
	t.Logf("kubectl describe tc graded:\n%s", out)
	for _, re := range []string{`Quality:`, `selfRecallAt5:\s+[01]\.\d{3}`, `Confusable Pairs:`, `Warning\s+ConfusableTools\s+.*find_customer and lookup_customer are confusable`} {
		g.Expect(out).To(MatchRegexp(re))
	}
	g.Expect(runKubectl(t, "get", "tc", "-n", ns, "-o", "wide")).To(MatchRegexp(`SELF-RECALL@5[\s\S]*graded\s+True.*\s` + q.SelfRecallAt5))

	// A distinct tool's record is written (so the pass that would have
	// marked it has run) and carries no such condition.
	g.Eventually(func(g Gomega) {
		td := getTD(g, ns, "weather")
		g.Expect(records.Of(td, "graded")).NotTo(BeNil())
		g.Expect(conditionOf(td, v1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(conditionOf(td, v1alpha1.ConditionConfusable)).To(BeNil())
	}).Should(Succeed())

	// Reworded, the pair is gone from the next grading and from both tools.
	graded := q.Version
	editTD(g, ns, "find", func(td *v1alpha1.ToolDefinition) {
		td.Spec.Description = "Search the order history of a shop between two dates."
	})
	g.Eventually(func(g Gomega) {
		tc = getTC(g, ns, "graded")
		g.Expect(tc.Status.Quality).NotTo(BeNil())
		g.Expect(tc.Status.Quality.Version).To(BeNumerically(">", graded))
	}).Should(Succeed())
	g.Expect(tc.Status.Quality.ConfusablePairs).To(BeEmpty())
	// Both gradings are kept with their versions, for the console's chart.
	rc := redisClient(t)
	g.Eventually(func(g Gomega) {
		qs, err := contract.ReadQuality(t.Context(), rc, catalogKeys(ns, "graded"))
		g.Expect(err).NotTo(HaveOccurred())
		byVersion := map[int64]contract.Quality{}
		for _, q := range qs {
			byVersion[q.Version] = q
		}
		g.Expect(byVersion).To(HaveKey(graded))
		g.Expect(byVersion[graded].Confusable).To(Equal(1))
		g.Expect(strconv.FormatFloat(byVersion[graded].SelfRecallAt5, 'f', 3, 64)).To(Equal(q.SelfRecallAt5))
		g.Expect(byVersion).To(HaveKey(tc.Status.Quality.Version))
		g.Expect(byVersion[tc.Status.Quality.Version].Confusable).To(Equal(0))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(testutil.ToFloat64(metrics.Quality.WithLabelValues(ns+"/graded", "confusable_pairs"))).To(Equal(0.0))
	}).Should(Succeed())
	for _, name := range []string{"lookup", "find"} {
		g.Eventually(func(g Gomega) {
			td := getTD(g, ns, name)
			g.Expect(conditionOf(td, v1alpha1.ConditionConfusable)).To(BeNil())
			g.Expect(records.Of(td, "graded").ConfusableWith).To(BeNil())
		}).Should(Succeed())
	}
}

// Grading follows the pass and never holds it: a pass publishes and writes
// its status with no grading run at all, and the grading, run afterwards,
// records the version it graded.
func TestGradingFollowsThePass(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	createAll(g,
		testTool(ns, "weather", "get_weather", "Get the current weather conditions and the forecast for a city.", "direct"),
		testTool(ns, "email", "send_email", "Send an email message to a recipient.", "direct"),
	)
	d := newDirectCatalog(t, g, builtinCatalog(ns, "direct"))
	_, err := d.reconcile()
	g.Expect(err).NotTo(HaveOccurred())
	tc := d.get()
	g.Expect(tc.Status.Version).To(BeEquivalentTo(1))
	expectCondition(g, tc, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSucceeded)
	g.Expect(tc.Status.Quality).To(BeNil(), "the pass graded the version itself")
	g.Expect(d.r.Grades.Len()).To(Equal(1), "the pass handed no version to the grading")

	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- d.r.Grades.Start(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	g.Eventually(func(g Gomega) {
		q := d.get().Status.Quality
		g.Expect(q).NotTo(BeNil())
		g.Expect(q.Version).To(BeEquivalentTo(1))
		g.Expect(q.GradedTools).To(BeEquivalentTo(2))
	}).Should(Succeed())
}

// A catalog's grading state leaves memory after Idle without a grading,
// and its next version is graded from scratch as the kept state would
// have graded it.
func TestIdleGradingStateIsDropped(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	createAll(g,
		testTool(ns, "weather", "get_weather", "Get the current weather conditions and the forecast for a city.", "direct"),
		testTool(ns, "email", "send_email", "Send an email message to a recipient.", "direct"),
		testTool(ns, "calendar", "create_event", "Create an event in the user's calendar.", "direct"),
	)
	d := newDirectCatalog(t, g, builtinCatalog(ns, "direct"))
	gs := d.r.Grades
	gs.Idle = time.Second
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- gs.Start(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	key := client.ObjectKeyFromObject(d.tc)
	graded := func(version int64) *v1alpha1.CatalogQuality {
		var q *v1alpha1.CatalogQuality
		g.Eventually(func(g Gomega) {
			q = d.get().Status.Quality
			g.Expect(q).NotTo(BeNil())
			g.Expect(q.Version).To(BeEquivalentTo(version))
		}).Should(Succeed())
		return q
	}
	_, err := d.reconcile()
	g.Expect(err).NotTo(HaveOccurred())
	first := graded(1)
	g.Expect(gs.Holds(key)).To(BeTrue(), "no state kept after a grading")
	g.Eventually(func() bool { return gs.Holds(key) }).Should(BeFalse(), "the idle catalog's grading state is kept")

	editTD(g, ns, "email", func(td *v1alpha1.ToolDefinition) {
		td.Spec.Description = "Send an email message with attachments to a recipient."
	})
	d.reconcileUntil(2)
	second := graded(2)
	g.Expect(second.GradedTools).To(Equal(first.GradedTools))
	g.Expect(second.GradedQueries).To(Equal(first.GradedQueries))
}

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
