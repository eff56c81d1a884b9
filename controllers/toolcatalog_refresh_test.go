package controllers

import (
	"context"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/records"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// callDelta is what a step cost: chat calls per tool and embedded texts.
type callDelta struct {
	chat  map[string]int
	texts int
}

func measure(p *provider, step func()) callDelta {
	chatBefore := p.ChatCalls()
	_, textsBefore := p.EmbeddingCalls()
	step()
	d := callDelta{chat: map[string]int{}}
	for tool, n := range p.ChatCalls() {
		if n > chatBefore[tool] {
			d.chat[tool] = n - chatBefore[tool]
		}
	}
	_, texts := p.EmbeddingCalls()
	d.texts = texts - textsBefore
	return d
}

// corruptQueries overwrites a tool's stored query set with one entry.
func corruptQueries(g *WithT, ns, tool string) {
	rc := redisServer.Client()
	defer rc.Close()
	k := catalogKeys(ns, "tools")
	m, err := contract.ParseMetadata(rc.HGet(context.Background(), k.Metadata(), tool).Val())
	g.Expect(err).NotTo(HaveOccurred())
	m.SyntheticQueries = []string{"only one"}
	raw, _ := m.Marshal()
	g.Expect(rc.HSet(context.Background(), k.Metadata(), tool, raw).Err()).To(Succeed())
}

func TestCatalogRefreshModes(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	p := newProvider(t, ns)
	threeTools(t, g, ns, p)

	// A corrupted query set is invalid: only that tool's queries are
	// regenerated, by a normal pass.
	corruptQueries(g, ns, "send_email")
	d := measure(p, func() { requestRefresh(g, ns, "tools", "1", "", "") })
	g.Expect(d.chat).To(Equal(map[string]int{"send_email": 1}))
	g.Expect(d.texts).To(Equal(3))
	waitVersion(g, ns, "tools", 2)

	// embed-only: vectors from stored queries, no chat call at all.
	d = measure(p, func() { requestRefresh(g, ns, "tools", "2", "embed-only", "") })
	g.Expect(d.chat).To(BeEmpty())
	g.Expect(d.texts).To(Equal(9))

	// invalid-only: only the tool whose set is invalid.
	corruptQueries(g, ns, "create_issue")
	d = measure(p, func() { requestRefresh(g, ns, "tools", "3", "invalid-only", "") })
	g.Expect(d.chat).To(Equal(map[string]int{"create_issue": 1}))
	g.Expect(d.texts).To(Equal(3))

	// force: every tool.
	d = measure(p, func() { requestRefresh(g, ns, "tools", "4", "force", "") })
	g.Expect(d.chat).To(Equal(map[string]int{"get_weather": 1, "create_issue": 1, "send_email": 1}))
	g.Expect(d.texts).To(Equal(9))

	// A tool list alone forces those tools only.
	d = measure(p, func() { requestRefresh(g, ns, "tools", "5", "", "get_weather, send_email") })
	g.Expect(d.chat).To(Equal(map[string]int{"get_weather": 1, "send_email": 1}))
	g.Expect(d.texts).To(Equal(6))

	// The same token again is not a new request.
	d = measure(p, func() { requestRefresh(g, ns, "tools", "5", "force", "") })
	g.Expect(d.chat).To(BeEmpty())

	// An unknown mode is reported and ignored.
	requestRefresh(g, ns, "tools", "6", "everything", "")
	g.Eventually(func(g Gomega) {
		g.Expect(hasEvent(eventsFor(g, ns, "tools"), "Warning", v1alpha1.ReasonInvalidRefreshRequest)).NotTo(BeNil())
	}).Should(Succeed())
}

func TestCatalogModelChangeMakesEveryToolStale(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	p := newProvider(t, ns)
	threeTools(t, g, ns, p)
	rc := redisClient(t)

	d := measure(p, func() {
		editTC(g, ns, "tools", func(tc *v1alpha1.ToolCatalog) { tc.Spec.Embedding.Model = "text-embedding-3-large" })
		waitVersion(g, ns, "tools", 2)
	})
	// Queries are still valid: re-embedded, not regenerated.
	g.Expect(d.chat).To(BeEmpty())
	g.Expect(d.texts).To(Equal(9))
	doc := storedDoc(g, rc, catalogKeys(ns, "tools"))
	g.Expect(doc.Embedding.Model).To(Equal("text-embedding-3-large"))
	for name, m := range storedMetadata(g, rc, catalogKeys(ns, "tools")) {
		g.Expect(m.Model).To(Equal("text-embedding-3-large"), "model of %s", name)
	}
}

func TestCatalogProviderFailures(t *testing.T) {
	c := newCatalogCase(t)
	g, ctx, ns, p, rc, k := c.g, c.ctx, c.ns, c.p, c.rc, c.k
	oldVectors := rc.HGetAll(ctx, k.Embeddings()).Val()
	oldMeta := rc.HGetAll(ctx, k.Metadata()).Val()

	// One tool's provider fails: the others are published, it keeps its
	// previous vector, metadata and document entry, and is listed.
	p.Fail("get_weather", http.StatusInternalServerError)
	for _, name := range []string{"weather", "email"} {
		editTD(g, ns, name, func(td *v1alpha1.ToolDefinition) {
			td.Spec.Description += " Now with more detail."
		})
	}
	var tc *v1alpha1.ToolCatalog
	g.Eventually(func(g Gomega) {
		tc = getTC(g, ns, "tools")
		g.Expect(tc.Status.Version).To(BeEquivalentTo(2))
		g.Expect(tc.Status.FailingTools).To(HaveLen(1))
	}).Should(Succeed())
	f := tc.Status.FailingTools[0]
	g.Expect(f.ToolDefinition).To(Equal("weather"))
	g.Expect(f.Tool).To(Equal("get_weather"))
	g.Expect(f.Reason).To(Equal(v1alpha1.ReasonQueryGenerationFailed))
	g.Expect(f.Message).To(ContainSubstring("cannot serve get_weather"))
	g.Expect(tc.Status.Counts.Failed).To(BeEquivalentTo(1))
	g.Expect(tc.Status.Counts.Stale).To(BeEquivalentTo(1))
	expectCondition(g, tc, v1alpha1.ConditionEmbeddingsSynced, metav1.ConditionFalse, v1alpha1.ReasonToolsFailed)
	expectCondition(g, tc, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonToolsFailed)
	g.Expect(rc.HGet(ctx, k.Embeddings(), "get_weather").Val()).To(Equal(oldVectors["get_weather"]))
	g.Expect(rc.HGet(ctx, k.Metadata(), "get_weather").Val()).To(Equal(oldMeta["get_weather"]))
	g.Expect(rc.HGet(ctx, k.Embeddings(), "send_email").Val()).NotTo(Equal(oldVectors["send_email"]))
	doc := storedDoc(g, rc, k)
	w, _ := doc.ToolByName("get_weather")
	g.Expect(w.Description).To(Equal("Get the current weather for a city."))
	e, _ := doc.ToolByName("send_email")
	g.Expect(e.Description).To(HaveSuffix("Now with more detail."))
	g.Eventually(func(g Gomega) {
		td := getTD(g, ns, "weather")
		rec := records.Of(td, "tools")
		g.Expect(rec.Reason).To(Equal(v1alpha1.ReasonQueryGenerationFailed))
		expectCondition(g, td, v1alpha1.ConditionEmbedded, metav1.ConditionFalse, v1alpha1.ReasonEmbeddingFailed)
		g.Expect(hasEvent(eventsFor(g, ns, "tools"), "Warning", v1alpha1.ReasonToolsFailed)).NotTo(BeNil())
	}).Should(Succeed())

	// Every target fails: Redis stays byte for byte as it was, and the
	// status says why.
	p.Fail("*", http.StatusServiceUnavailable)
	before := dumpCatalog(rc, k)
	for _, name := range []string{"issue", "email"} {
		editTD(g, ns, name, func(td *v1alpha1.ToolDefinition) {
			td.Spec.Description += " Edited again."
		})
	}
	g.Eventually(func(g Gomega) {
		tc = getTC(g, ns, "tools")
		g.Expect(tc.Status.FailingTools).To(HaveLen(3))
		g.Expect(tc.Status.Counts.Failed).To(BeEquivalentTo(3))
	}).Should(Succeed())
	g.Expect(dumpCatalog(rc, k)).To(Equal(before))
	g.Expect(tc.Status.Version).To(BeEquivalentTo(2))
	synced := expectCondition(g, tc, v1alpha1.ConditionEmbeddingsSynced, metav1.ConditionFalse, v1alpha1.ReasonToolsFailed)
	g.Expect(synced.Message).To(ContainSubstring("3 tools failed to refresh"))

	// Healed: everything is published and the catalog recovers.
	p.Fail("*", 0)
	p.Fail("get_weather", 0)
	tc = waitVersion(g, ns, "tools", 3)
	g.Expect(tc.Status.FailingTools).To(BeEmpty())
	g.Expect(tc.Status.Counts).To(Equal(&v1alpha1.ToolCounts{Tools: 3, Embedded: 3}))
	g.Eventually(func(g Gomega) {
		g.Expect(hasEvent(eventsFor(g, ns, "tools"), "Normal", "Recovered")).NotTo(BeNil())
	}).Should(Succeed())
}

func TestCatalogProviderAuthFailure(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	p := newWireProvider(t)
	p.APIKeys = []string{"sk-right"}
	createAll(g, secret(ns, "llm", map[string]string{"key": "sk-wrong"}),
		testTool(ns, "weather", "get_weather", "Get the weather.", "tools"))
	tc := testCatalog(ns, "tools", p)
	tc.Spec.QueryGeneration.APIKeySecretRef = &v1alpha1.SecretKeySelector{Name: "llm", Key: "key"}
	tc.Spec.Embedding.APIKeySecretRef = &v1alpha1.SecretKeySelector{Name: "llm", Key: "key"}
	createAll(g, tc)
	g.Eventually(func(g Gomega) {
		tc := getTC(g, ns, "tools")
		c := expectCondition(g, tc, v1alpha1.ConditionEmbeddingsSynced, metav1.ConditionFalse, v1alpha1.ReasonProviderAuthFailed)
		g.Expect(c.Message).To(ContainSubstring("apiKeySecretRef"))
		g.Expect(c.Message).NotTo(ContainSubstring("sk-wrong"))
	}).Should(Succeed())
	// One attempt per route: a rejected key is not retried.
	g.Expect(len(p.ChatRequests())).To(BeNumerically("<=", 2))
}

// Tool names in toolcatalog.dev/refresh-tools that the catalog does not
// have are reported; a request naming none it has fails visibly.
func TestRefreshReportsUnknownTools(t *testing.T) {
	c := newCatalogCase(t)
	g, ns := c.g, c.ns

	tc := requestRefresh(g, ns, "tools", "partly", "force", "get_weather, get_wether")
	g.Expect(tc.Status.LastRefresh).To(Equal(&v1alpha1.RefreshResult{
		RequestedAt: "partly", Result: v1alpha1.RefreshPartiallyIgnored, UnknownTools: []string{"get_wether"},
		Message: `refresh request "partly" ignored 1 tools that are not in the catalog (get_wether) and refreshed the others`,
	}))
	g.Expect(c.p.ChatCalls()["get_weather"]).To(Equal(2), "the known tool was still refreshed")
	g.Eventually(func(g Gomega) {
		e := hasEvent(eventsFor(g, ns, "tools"), "Warning", v1alpha1.ReasonInvalidRefreshRequest)
		g.Expect(e).NotTo(BeNil())
		g.Expect(e.Note).To(ContainSubstring("get_wether"))
	}).Should(Succeed())

	tc = requestRefresh(g, ns, "tools", "none", "embed-only", "nope,nada")
	g.Expect(tc.Status.LastRefresh.Result).To(Equal(v1alpha1.RefreshFailed))
	g.Expect(tc.Status.LastRefresh.UnknownTools).To(Equal([]string{"nope", "nada"}))
	g.Expect(tc.Status.LastRefresh.Message).To(ContainSubstring("none of the requested tools (nope, nada) is in the catalog"))

	tc = requestRefresh(g, ns, "tools", "all-known", "force", "send_email")
	g.Expect(tc.Status.LastRefresh.Result).To(Equal(v1alpha1.RefreshSucceeded))
	g.Expect(tc.Status.LastRefresh.UnknownTools).To(BeEmpty())
}
