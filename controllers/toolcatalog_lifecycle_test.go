package controllers

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/records"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/redistest"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
)

func TestCatalogDropsDeletedAndUnlabelledTools(t *testing.T) {
	c := newCatalogCase(t)
	g, ctx, ns, _, rc, k := c.g, c.ctx, c.ns, c.p, c.rc, c.k

	g.Expect(k8sClient.Delete(ctx, getTD(g, ns, "email"))).To(Succeed())
	editTD(g, ns, "issue", func(td *v1alpha1.ToolDefinition) {
		delete(td.Labels, catalogLabel)
	})

	g.Eventually(func(g Gomega) {
		tc := getTC(g, ns, "tools")
		g.Expect(tc.Status.Counts.Tools).To(BeEquivalentTo(1))
		g.Expect(storedDoc(g, rc, k).Tools).To(HaveLen(1))
	}).Should(Succeed())
	doc := storedDoc(g, rc, k)
	g.Expect(doc.Tools[0].Name).To(Equal("get_weather"))
	g.Expect(sortedKeys(rc.HGetAll(ctx, k.Embeddings()).Val())).To(Equal([]string{"get_weather"}))
	g.Expect(sortedKeys(rc.HGetAll(ctx, k.Metadata()).Val())).To(Equal([]string{"get_weather"}))
	// The unlabelled tool no longer carries this catalog's record.
	g.Eventually(func(g Gomega) {
		td := getTD(g, ns, "issue")
		g.Expect(records.Of(td, "tools")).To(BeNil())
		expectCondition(g, td, v1alpha1.ConditionEmbedded, metav1.ConditionFalse, v1alpha1.ReasonNotSelected)
	}).Should(Succeed())
}

func TestCatalogReportsConflictsAndRejectedTools(t *testing.T) {
	c := newCatalogCase(t)
	g, ctx, ns, _, rc, k := c.g, c.ctx, c.ns, c.p, c.rc, c.k
	published, _ := storedDoc(g, rc, k).ToolByName("send_email")

	// A second ToolDefinition takes the name send_email: neither wins,
	// and the published entry stays as it was.
	dup := testTool(ns, "email-v2", "send_email", "Send an email, the new way.", "tools")
	bad := testTool(ns, "broken", "broken_tool", "A tool with a broken schema.", "tools")
	bad.Spec.Parameters = rawJSON(`{"type":"object","required":"x"}`)
	createAll(g, dup, bad)

	var tc *v1alpha1.ToolCatalog
	g.Eventually(func(g Gomega) {
		tc = getTC(g, ns, "tools")
		g.Expect(tc.Status.FailingTools).To(HaveLen(3))
	}).Should(Succeed())
	reasons := map[string]string{}
	for _, f := range tc.Status.FailingTools {
		reasons[f.ToolDefinition] = f.Reason
	}
	g.Expect(reasons).To(Equal(map[string]string{"email": v1alpha1.ReasonNameConflict, "email-v2": v1alpha1.ReasonNameConflict, "broken": v1alpha1.ReasonInvalidSpec}))
	g.Expect(tc.Status.Counts.Rejected).To(BeEquivalentTo(3))
	g.Expect(tc.Status.Counts.Tools).To(BeEquivalentTo(2))
	cond := expectCondition(g, tc, v1alpha1.ConditionEmbeddingsSynced, metav1.ConditionFalse, v1alpha1.ReasonNameConflict)
	g.Expect(cond.Message).To(ContainSubstring("send_email"))
	still, ok := storedDoc(g, rc, k).ToolByName("send_email")
	g.Expect(ok).To(BeTrue())
	g.Expect(still).To(Equal(published))
	_, ok = storedDoc(g, rc, k).ToolByName("broken_tool")
	g.Expect(ok).To(BeFalse())
	g.Eventually(func(g Gomega) {
		rec := records.Of(getTD(g, ns, "email-v2"), "tools")
		g.Expect(rec).NotTo(BeNil())
		g.Expect(rec.Reason).To(Equal(v1alpha1.ReasonNameConflict))
		g.Expect(rec.Message).To(ContainSubstring("email, email-v2"))
	}).Should(Succeed())

	// Resolving the conflict publishes the survivor.
	g.Expect(k8sClient.Delete(ctx, getTD(g, ns, "email"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		got, _ := storedDoc(g, rc, k).ToolByName("send_email")
		g.Expect(got.Description).To(Equal("Send an email, the new way."))
	}).Should(Succeed())
}

func TestCatalogSurvivesRedisOutageAndFlush(t *testing.T) {
	g := gomegaFor(t)
	ctx := context.Background()
	ns := newNamespace(t)
	p := newProvider(t, ns)
	own := redistest.New(t)
	tc, rc, k := ownRedisCatalog(t, ns, p, own)
	createAll(g, testTool(ns, "weather", "get_weather", "Get the weather.", "tools"), tc)
	waitVersion(g, ns, "tools", 1)

	// Redis goes away: the condition says so.
	g.Expect(own.Stop()).To(Succeed())
	editTD(g, ns, "weather", func(td *v1alpha1.ToolDefinition) {
		td.Spec.Description = "Get the weather and the forecast."
	})
	g.Eventually(func(g Gomega) {
		getTCErr := getTC(g, ns, "tools")
		c := expectCondition(g, getTCErr, v1alpha1.ConditionPublished, metav1.ConditionFalse, v1alpha1.ReasonRedisUnavailable)
		g.Expect(c.Message).To(ContainSubstring(own.Addr))
		expectCondition(g, getTCErr, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonRedisUnavailable)
	}).Should(Succeed())

	// It comes back empty (no persistence): the catalog is published again
	// with a newer version than consumers have seen.
	g.Expect(own.Restart()).To(Succeed())
	tc = waitVersion(g, ns, "tools", 2)
	expectCondition(g, tc, v1alpha1.ConditionPublished, metav1.ConditionTrue, v1alpha1.ReasonVersionPublished)
	doc := storedDoc(g, rc, k)
	g.Expect(doc.Version).To(BeEquivalentTo(2))
	g.Expect(doc.Tools[0].Description).To(Equal("Get the weather and the forecast."))
	g.Expect(rc.HLen(ctx, k.Embeddings()).Val()).To(BeEquivalentTo(1))

	// FLUSHALL: the periodic resync republishes.
	g.Expect(rc.FlushAll(ctx).Err()).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(rc.Get(ctx, k.Version()).Val()).To(Equal("3"))
		g.Expect(storedDoc(g, rc, k).Tools).To(HaveLen(1))
		g.Expect(rc.HLen(ctx, k.Metadata()).Val()).To(BeEquivalentTo(1))
	}).Should(Succeed())
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
	createAll(g, secret(ns, "openai", map[string]string{"apiKey": "sk-good"}))
	waitVersion(g, ns, "tools", 1)
}

// A document that cannot be read is never published over: what it held
// could not be rebuilt. Once the key is removed, the catalog is rebuilt
// from the ToolDefinitions and the stored embeddings.
func TestCatalogDoesNotPublishOverAnUnreadableDocument(t *testing.T) {
	c := newCatalogCase(t)
	g, ctx, ns, rc, k := c.g, c.ctx, c.ns, c.rc, c.k
	g.Expect(rc.Set(ctx, k.Head(), "garbage{", 0).Err()).To(Succeed())

	editTD(g, ns, "weather", func(td *v1alpha1.ToolDefinition) {
		td.Spec.Description = "Get the weather and the forecast."
	})
	g.Eventually(func(g Gomega) {
		tc := getTC(g, ns, "tools")
		cond := expectCondition(g, tc, v1alpha1.ConditionPublished, metav1.ConditionFalse, v1alpha1.ReasonPublishBlocked)
		g.Expect(cond.Message).To(ContainSubstring(k.Head() + " is unreadable"))
		expectCondition(g, tc, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonPublishBlocked)
	}).Should(Succeed())
	g.Expect(rc.Get(ctx, k.Head()).Val()).To(Equal("garbage{"))
	g.Expect(rc.Get(ctx, k.Version()).Val()).To(Equal("1"))
	g.Expect(rc.HLen(ctx, k.Embeddings()).Val()).To(BeEquivalentTo(3))

	g.Expect(rc.Del(ctx, k.Head()).Err()).To(Succeed())
	requestRefresh(g, ns, "tools", "after-cleanup", "", "")
	waitVersion(g, ns, "tools", 2)
	doc := storedDoc(g, rc, k)
	g.Expect(doc.Tools).To(HaveLen(3))
	weather, _ := doc.ToolByName("get_weather")
	g.Expect(weather.Description).To(Equal("Get the weather and the forecast."))
}

// Absent permissions and "*" let everyone use a tool; an empty list lets
// nobody. The API, the published document and consumers all keep the
// difference.
func TestPermissionsDistinguishEveryoneFromNobody(t *testing.T) {
	g := gomegaFor(t)
	ctx := context.Background()
	ns := newNamespace(t)
	p := newProvider(t, ns)
	rc := redisClient(t)
	tools := map[string]*v1alpha1.ToolPermissions{
		"absent":     nil,
		"unset_list": {},
		"star":       {AllowedPrincipals: []string{"*"}},
		"nobody":     {AllowedPrincipals: []string{}},
		"ops_only":   {AllowedPrincipals: []string{"group:ops"}},
	}
	for name, perms := range tools {
		td := testTool(ns, strings.ReplaceAll(name, "_", "-"), name, "Tool "+name+".", "tools")
		td.Spec.Permissions = perms
		createAll(g, td)
	}
	createAll(g, testCatalog(ns, "tools", p))
	waitVersion(g, ns, "tools", 1)

	stored := getTD(g, ns, "nobody")
	g.Expect(stored.Spec.Permissions.AllowedPrincipals).NotTo(BeNil())
	g.Expect(stored.Spec.Permissions.AllowedPrincipals).To(BeEmpty())

	cat, err := toolcatalog.Load(ctx, rc, catalogKeys(ns, "tools"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cat.Document.Permissions).To(Equal(map[string][]string{"star": {"*"}, "nobody": {}, "ops_only": {"group:ops"}}))
	entries := rc.HGetAll(ctx, catalogKeys(ns, "tools").Tools()).Val()
	g.Expect(entries["nobody"]).To(ContainSubstring(`"allowed_principals":[]`))
	g.Expect(entries["absent"]).NotTo(ContainSubstring(`allowed_principals`))
	for tool, want := range map[string]bool{"absent": true, "unset_list": true, "star": true, "nobody": false, "ops_only": false} {
		g.Expect(cat.IsAllowed(tool, "user:alice")).To(Equal(want), "user:alice on %s", tool)
	}
	g.Expect(cat.IsAllowed("ops_only", "group:ops")).To(BeTrue())
	g.Expect(cat.IsAllowed("nobody", "group:ops")).To(BeFalse())
}
