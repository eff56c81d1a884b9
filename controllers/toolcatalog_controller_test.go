package controllers

import (
	"context"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/controllers/tooldefinition"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/records"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/providertest"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// threeTools creates the catalog "tools" with three tools and waits for
// version 1.
func threeTools(t *testing.T, g *WithT, ns string, p *provider) {
	t.Helper()
	weather := testTool(ns, "weather", "get_weather", "Get the current weather for a city.", "tools")
	weather.Spec.Permissions = &v1alpha1.ToolPermissions{AllowedPrincipals: []string{"group:b", "group:a"}}
	weather.Spec.AlwaysInclude = true
	issue := testTool(ns, "issue", "create_issue", "Open an issue in a GitHub repository.", "tools")
	issue.Spec.ExampleQueries = []string{"file a bug about the login page"}
	email := testTool(ns, "email", "send_email", "Send an email to a recipient.", "tools")
	email.Spec.Parameters = nil
	createAll(g, weather, issue, email, testCatalog(ns, "tools", p))
	waitVersion(g, ns, "tools", 1)
}

func TestCatalogPublishesFirstVersion(t *testing.T) {
	g := gomegaFor(t)
	ctx := context.Background()
	ns := newNamespace(t)
	p := newProvider(t, ns)
	rc := redisClient(t)
	k := catalogKeys(ns, "tools")

	sub := rc.Subscribe(ctx, "toolcatalog:test:"+ns)
	defer sub.Close()
	_, err := sub.Receive(ctx)
	g.Expect(err).NotTo(HaveOccurred())

	threeTools(t, g, ns, p)
	tc := getTC(g, ns, "tools")

	// The document follows the contract.
	doc := storedDoc(g, rc, k)
	g.Expect(doc.Version).To(BeEquivalentTo(1))
	g.Expect(doc.Catalog).To(Equal(ns + "/tools"))
	g.Expect(doc.SchemaHash).To(MatchRegexp(`^[0-9a-f]{64}$`))
	g.Expect(doc.SchemaHash).To(Equal(tc.Status.SchemaHash))
	g.Expect(doc.Embedding).To(Equal(contract.EmbeddingInfo{Provider: "openai", Model: testEmbeddingModel, Dimensions: testDims}))
	g.Expect(doc.Search.Method).To(Equal("hybrid"))
	g.Expect(doc.Search.TopK).To(Equal(5))
	var names []string
	for _, tool := range doc.Tools {
		names = append(names, tool.Name)
	}
	g.Expect(names).To(Equal([]string{"create_issue", "get_weather", "send_email"}))
	weather, _ := doc.ToolByName("get_weather")
	g.Expect(weather.AlwaysInclude).To(BeTrue())
	g.Expect(string(weather.Parameters)).To(Equal(`{"properties":{"q":{"type":"string"}},"required":["q"],"type":"object"}`))
	email, _ := doc.ToolByName("send_email")
	g.Expect(string(email.Parameters)).To(Equal(`{"properties":{},"type":"object"}`))
	g.Expect(doc.Permissions).To(Equal(map[string][]string{"get_weather": {"group:a", "group:b"}}))
	// Contract 2: the head, one entry per tool, the change record of
	// version 1, and a P:catalog that contract-1 readers refuse.
	raw := map[string]any{}
	g.Expect(json.Unmarshal([]byte(rc.Get(ctx, k.Head()).Val()), &raw)).To(Succeed())
	g.Expect(raw).To(HaveKey("generated_at"))
	g.Expect(raw).To(HaveKeyWithValue("contract", BeEquivalentTo(2)))
	g.Expect(rc.HLen(ctx, k.Tools()).Val()).To(BeEquivalentTo(3))
	g.Expect(rc.Exists(ctx, k.Changes(1)).Val()).To(BeEquivalentTo(1))
	g.Expect(rc.Get(ctx, k.Catalog()).Val()).To(ContainSubstring("version 2 of the Redis contract"))
	g.Expect(rc.Get(ctx, k.Version()).Val()).To(Equal("1"))

	// One vector and one metadata entry per tool.
	vecs := rc.HGetAll(ctx, k.Embeddings()).Val()
	g.Expect(vecs).To(HaveLen(3))
	for name, v := range vecs {
		g.Expect(v).To(HaveLen(4*testDims), "vector of %s", name)
	}
	meta := storedMetadata(g, rc, k)
	g.Expect(meta).To(HaveLen(3))
	issueTD := getTD(g, ns, "issue")
	wantHash, err := catalog.SpecHash(issueTD.Spec.Name, issueTD.Spec.Description, issueTD.Spec.Parameters.Raw)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(meta["create_issue"].SpecHash).To(Equal(wantHash))
	g.Expect(meta["create_issue"].Model).To(Equal(testEmbeddingModel))
	g.Expect(meta["create_issue"].Dimensions).To(Equal(testDims))
	about := providertest.ShortHash(issueTD.Spec.Description)
	g.Expect(meta["create_issue"].SyntheticQueries).To(Equal([]string{"file a bug about the login page",
		"create_issue request number 1 about " + about, "create_issue request number 2 about " + about}))
	g.Expect(meta["get_weather"].SyntheticQueries).To(HaveLen(3))

	// One chat call per tool and all queries embedded in one request.
	g.Expect(p.ChatCalls()).To(Equal(map[string]int{"get_weather": 1, "create_issue": 1, "send_email": 1}))
	reqs, texts := p.EmbeddingCalls()
	g.Expect(reqs).To(Equal(1))
	g.Expect(texts).To(Equal(9))

	// Subscribers hear about it.
	msg, err := sub.ReceiveMessage(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	var notice contract.Notice
	g.Expect(json.Unmarshal([]byte(msg.Payload), &notice)).To(Succeed())
	g.Expect(notice).To(Equal(contract.Notice{Catalog: ns + "/tools", CatalogUID: string(tc.UID), Version: 1, SchemaHash: doc.SchemaHash}))
	g.Expect(doc.CatalogUID).To(Equal(string(tc.UID)))

	// Status and records.
	g.Expect(tc.Status.Counts).To(Equal(&v1alpha1.ToolCounts{Tools: 3, Embedded: 3}))
	g.Expect(tc.Status.LastPublishedTime).NotTo(BeNil())
	expectCondition(g, tc, v1alpha1.ConditionPublished, metav1.ConditionTrue, v1alpha1.ReasonVersionPublished)
	expectCondition(g, tc, v1alpha1.ConditionEmbeddingsSynced, metav1.ConditionTrue, v1alpha1.ReasonAllEmbedded)
	g.Eventually(func(g Gomega) {
		td := getTD(g, ns, "issue")
		rec := records.Of(td, "tools")
		g.Expect(rec).NotTo(BeNil())
		g.Expect(rec.SpecHash).To(Equal(td.Status.SpecHash))
		g.Expect(rec.Model).To(Equal(testEmbeddingModel))
		g.Expect(rec.QueryCount).To(BeEquivalentTo(3))
		g.Expect(rec.CatalogVersion).To(BeEquivalentTo(1))
		g.Expect(rec.EmbeddedTime).NotTo(BeNil())
		expectCondition(g, td, v1alpha1.ConditionEmbedded, metav1.ConditionTrue, v1alpha1.ReasonEmbedded)
		expectCondition(g, td, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonEmbedded)
		// The record is written by the ToolDefinition reconciler, the
		// status's one writer.
		var managers []string
		for _, mf := range td.ManagedFields {
			if mf.Subresource == "status" {
				managers = append(managers, mf.Manager)
			}
		}
		g.Expect(managers).To(ConsistOf(tooldefinition.FieldOwner))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(hasEvent(eventsFor(g, ns, "tools"), corev1.EventTypeNormal, v1alpha1.ReasonVersionPublished)).NotTo(BeNil())
	}).Should(Succeed())
}

func TestCatalogReembedsOnlyTheEditedTool(t *testing.T) {
	c := newCatalogCase(t)
	g, ctx, ns, p, rc, k := c.g, c.ctx, c.ns, c.p, c.rc, c.k
	before := storedMetadata(g, rc, k)
	vecBefore := rc.HGetAll(ctx, k.Embeddings()).Val()
	chatBefore := p.ChatCalls()
	embBefore, _ := p.EmbeddingCalls()

	editTD(g, ns, "weather", func(td *v1alpha1.ToolDefinition) {
		td.Spec.Description = "Get the current weather and a three-day forecast for a city."
	})
	tc := waitVersion(g, ns, "tools", 2)

	// Exactly that tool: one chat call for it, one embeddings request
	// with its three queries.
	chat := p.ChatCalls()
	g.Expect(chat["get_weather"]).To(Equal(chatBefore["get_weather"] + 1))
	g.Expect(chat["create_issue"]).To(Equal(chatBefore["create_issue"]))
	g.Expect(chat["send_email"]).To(Equal(chatBefore["send_email"]))
	reqs := p.EmbeddingRequests()
	g.Expect(reqs).To(HaveLen(embBefore + 1))
	g.Expect(reqs[len(reqs)-1].Input).To(HaveLen(3))

	after := storedMetadata(g, rc, k)
	vecAfter := rc.HGetAll(ctx, k.Embeddings()).Val()
	g.Expect(after["get_weather"].SpecHash).NotTo(Equal(before["get_weather"].SpecHash))
	for _, other := range []string{"create_issue", "send_email"} {
		g.Expect(after[other]).To(Equal(before[other]), "metadata of %s rewritten", other)
		g.Expect(vecAfter[other]).To(Equal(vecBefore[other]), "vector of %s rewritten", other)
	}
	doc := storedDoc(g, rc, k)
	w, _ := doc.ToolByName("get_weather")
	g.Expect(w.Description).To(Equal("Get the current weather and a three-day forecast for a city."))
	g.Expect(tc.Status.Version).To(BeEquivalentTo(2))

	g.Eventually(func(g Gomega) {
		td := getTD(g, ns, "weather")
		g.Expect(records.Of(td, "tools").CatalogVersion).To(BeEquivalentTo(2))
		g.Expect(records.Of(td, "tools").SpecHash).To(Equal(td.Status.SpecHash))
		expectCondition(g, td, v1alpha1.ConditionEmbedded, metav1.ConditionTrue, v1alpha1.ReasonEmbedded)
		g.Expect(records.Of(getTD(g, ns, "issue"), "tools").CatalogVersion).To(BeEquivalentTo(1))
	}).Should(Succeed())

	// A change the model does not read (a label) makes no version and no
	// provider call. The refresh token proves a pass ran after it.
	issue := getTD(g, ns, "issue")
	issue.Labels["team"] = "platform"
	g.Expect(k8sClient.Update(ctx, issue)).To(Succeed())
	chatBefore = p.ChatCalls()
	embBefore, _ = p.EmbeddingCalls()
	dump := dumpCatalog(rc, k)
	tc = requestRefresh(g, ns, "tools", "after-label", "", "")
	g.Expect(tc.Status.Version).To(BeEquivalentTo(2))
	g.Expect(p.ChatCalls()).To(Equal(chatBefore))
	embAfter, _ := p.EmbeddingCalls()
	g.Expect(embAfter).To(Equal(embBefore))
	g.Expect(dumpCatalog(rc, k)).To(Equal(dump))
	expectCondition(g, tc, v1alpha1.ConditionPublished, metav1.ConditionTrue, v1alpha1.ReasonUpToDate)
}

func TestCatalogDeletionRemovesItsKeys(t *testing.T) {
	c := newCatalogCase(t)
	g, ctx, ns, _, rc, k := c.g, c.ctx, c.ns, c.p, c.rc, c.k
	other := catalogKeys(ns, "other")
	g.Expect(rc.Set(ctx, other.Catalog(), "keep me", 0).Err()).To(Succeed())
	g.Expect(rc.Keys(ctx, k.Prefix+"*").Val()).NotTo(BeEmpty())
	g.Expect(getTC(g, ns, "tools").Finalizers).To(ContainElement(v1alpha1.FinalizerCleanup))

	g.Expect(k8sClient.Delete(ctx, getTC(g, ns, "tools"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "tools"}, &v1alpha1.ToolCatalog{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}).Should(Succeed())
	g.Expect(rc.Keys(ctx, k.Prefix+"*").Val()).To(BeEmpty())
	g.Expect(rc.Get(ctx, other.Catalog()).Val()).To(Equal("keep me"))
	g.Eventually(func(g Gomega) {
		td := getTD(g, ns, "weather")
		g.Expect(td.Status.Catalogs).To(BeEmpty())
		expectCondition(g, td, v1alpha1.ConditionEmbedded, metav1.ConditionFalse, v1alpha1.ReasonNotSelected)
	}).Should(Succeed())
}

// keyedCatalog is a catalog "tools" of a provider that accepts only the
// API key sk-good, which both providers read from the Secret openai.
func keyedCatalog(t *testing.T, ns string) (*provider, *v1alpha1.ToolCatalog) {
	p := newWireProvider(t)
	p.APIKeys = []string{"sk-good"}
	tc := testCatalog(ns, "tools", p)
	tc.Spec.Embedding.APIKeySecretRef = &v1alpha1.SecretKeySelector{Name: "openai", Key: "apiKey"}
	tc.Spec.QueryGeneration.APIKeySecretRef = &v1alpha1.SecretKeySelector{Name: "openai", Key: "apiKey"}
	return p, tc
}

func TestCatalogWaitsForItsSecret(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	p, tc := keyedCatalog(t, ns)
	createAll(g, tc, testTool(ns, "weather", "get_weather", "Get the weather.", "tools"))

	g.Eventually(func(g Gomega) {
		tc := getTC(g, ns, "tools")
		c := expectCondition(g, tc, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSecretNotFound)
		g.Expect(c.Message).To(ContainSubstring("Secret " + ns + "/openai"))
		g.Expect(c.Message).To(ContainSubstring("spec.embedding.apiKeySecretRef"))
		g.Expect(hasEvent(eventsFor(g, ns, "tools"), "Warning", v1alpha1.ReasonSecretNotFound)).NotTo(BeNil())
	}).Should(Succeed())
	g.Expect(p.ChatRequests()).To(BeEmpty())

	// Creating the Secret is enough: the watch on Secrets starts a pass.
	// (What a pass without its Secret does is the pass's own test,
	// TestAMissingSecretStopsThePass in internal/catalog.)
	createAll(g, secret(ns, "openai", map[string]string{"apiKey": "sk-good"}))
	waitVersion(g, ns, "tools", 1)
}

// A tool that stops matching a catalog's selector loses the catalog's
// record, written by its own reconciler. (What the pass publishes then is
// the pass's own test, TestDeletedAndUnlabelledToolsAreDropped in
// internal/catalog.)
func TestUnlabelledToolLosesTheCatalogsRecord(t *testing.T) {
	c := newCatalogCase(t)
	g, ns := c.g, c.ns
	g.Eventually(func(g Gomega) {
		g.Expect(records.Of(getTD(g, ns, "issue"), "tools")).NotTo(BeNil())
	}).Should(Succeed())
	editTD(g, ns, "issue", func(td *v1alpha1.ToolDefinition) {
		delete(td.Labels, catalogLabel)
	})
	g.Eventually(func(g Gomega) {
		td := getTD(g, ns, "issue")
		g.Expect(records.Of(td, "tools")).To(BeNil())
		expectCondition(g, td, v1alpha1.ConditionEmbedded, metav1.ConditionFalse, v1alpha1.ReasonNotSelected)
	}).Should(Succeed())
}
