package controllers

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/controllers/toolsource"
	"github.com/toolcatalog/tool-catalog-operator/internal/records"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/mcptest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/testenv"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

func toolSource(ns, name, url string) *v1alpha1.ToolSource {
	return &v1alpha1.ToolSource{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.ToolSourceSpec{
			MCP:    v1alpha1.MCPServerSpec{URL: url},
			Labels: map[string]string{catalogLabel: "imported"},
		},
	}
}

// sourceTools lists the ToolDefinitions a source owns, by tool name.
func sourceTools(g Gomega, ns, source string) map[string]*v1alpha1.ToolDefinition {
	list := &v1alpha1.ToolDefinitionList{}
	g.Expect(k8sClient.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelToolSource: source})).To(Succeed())
	out := map[string]*v1alpha1.ToolDefinition{}
	for i := range list.Items {
		out[list.Items[i].Spec.Name] = &list.Items[i]
	}
	return out
}

func getTS(g Gomega, ns, name string) *v1alpha1.ToolSource {
	ts := &v1alpha1.ToolSource{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, ts)).To(Succeed())
	return ts
}

// A source imports every page of its server's tools as owned
// ToolDefinitions a catalog publishes, follows list_changed at once, drops
// tools that go, reports malformed ones, and takes its tools with it.
func TestToolSourceImportsAndFollowsAnMCPServer(t *testing.T) {
	g := gomegaFor(t)
	ctx := context.Background()
	ns := newNamespace(t)
	srv := mcptest.New(t, mcptest.Options{Name: "docs", Version: "2.1.0", PageSize: 2})
	srv.Tool("search", "Search the documentation by keywords.", nil, &mcp.ToolAnnotations{Title: "Search docs", ReadOnlyHint: true})
	for i := range 3 {
		srv.Tool(fmt.Sprintf("page_%d", i), fmt.Sprintf("Read page %d of the manual.", i), nil, nil)
	}
	srv.Tool("bad name", "A tool whose name no model can call.", nil, nil)
	srv.Tool("bad_schema", "A tool whose schema is not a JSON Schema.", map[string]any{"type": "object", "properties": 12}, nil)

	ts := toolSource(ns, "docs", srv.URL)
	ts.Spec.ToolNamePrefix = "docs_"
	ts.Spec.SyncInterval = &metav1.Duration{Duration: time.Hour} // only list_changed brings changes quickly
	tc := builtinCatalog(ns, "imported")
	createAll(g, ts, tc)

	g.Eventually(func(g Gomega) {
		ts := getTS(g, ns, "docs")
		expectCondition(g, ts, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSynced)
		g.Expect(ts.Status.ToolCount).To(Equal(int32(4)))
		g.Expect(ts.Status.Server).To(Equal(&v1alpha1.MCPServerInfo{Name: "docs", Version: "2.1.0", ProtocolVersion: ts.Status.Server.ProtocolVersion}))
		g.Expect(ts.Status.SkippedTools).To(HaveLen(2))
		g.Expect(ts.Status.SkippedTools[0].Tool).To(Equal("bad name"))
		g.Expect(ts.Status.SkippedTools[0].Reason).To(ContainSubstring("not a valid tool name"))
		g.Expect(ts.Status.SkippedTools[1].Tool).To(Equal("bad_schema"))
		g.Expect(ts.Status.SkippedTools[1].Reason).To(ContainSubstring("input schema is rejected"))
	}).Should(Succeed())
	tools := sourceTools(g, ns, "docs")
	g.Expect(tools).To(HaveLen(4))
	search := tools["docs_search"]
	g.Expect(search).NotTo(BeNil())
	g.Expect(metav1.IsControlledBy(search, getTS(g, ns, "docs"))).To(BeTrue())
	g.Expect(search.Labels[catalogLabel]).To(Equal("imported"))
	g.Expect(search.Spec.Source).To(Equal(&v1alpha1.ToolSourceReference{ToolSource: "docs", MCPURL: srv.URL, Tool: "search"}))
	g.Expect(search.Spec.Annotations.Title).To(Equal("Search docs"))
	// Events are sent on their own, after the status.
	g.Eventually(func(g Gomega) {
		g.Expect(hasEvent(eventsFor(g, ns, "docs"), corev1.EventTypeWarning, v1alpha1.ReasonToolsSkipped)).NotTo(BeNil())
	}).Should(Succeed())

	// The catalog publishes them, annotations and source included.
	rc := redisClient(t)
	g.Eventually(func(g Gomega) {
		tools := publishedTools(g, rc, catalogKeys(ns, "imported"))
		g.Expect(tools).To(HaveLen(4))
		g.Expect(tools["docs_search"].Source.MCPURL).To(Equal(srv.URL))
		g.Expect(*tools["docs_search"].Annotations.ReadOnlyHint).To(BeTrue())
	}).Should(Succeed())
	before := getTC(g, ns, "imported").Status.Version

	// A tool added upstream arrives through list_changed, long before the
	// hour of syncInterval.
	start := time.Now()
	srv.Tool("changelog", "Show the changes of each release.", nil, nil)
	g.Eventually(func(g Gomega) {
		g.Expect(sourceTools(g, ns, "docs")).To(HaveKey("docs_changelog"))
	}).WithTimeout(10 * time.Second).Should(Succeed())
	t.Logf("list_changed → ToolDefinition in %s", time.Since(start).Round(time.Millisecond))
	g.Eventually(func(g Gomega) {
		g.Expect(publishedTools(g, rc, catalogKeys(ns, "imported"))).To(HaveKey("docs_changelog"))
	}).Should(Succeed())
	t.Logf("list_changed → catalog version %d (from %d) with the new tool in %s", getTC(g, ns, "imported").Status.Version, before, time.Since(start).Round(time.Millisecond))

	// An upstream description change re-embeds exactly that tool, in a
	// new version.
	// Versions as Redis holds them: the status follows a moment later.
	from := storedDoc(g, rc, catalogKeys(ns, "imported")).Version
	srv.Tool("page_1", "Read page one of the operator's manual.", nil, nil)
	var to int64
	g.Eventually(func(g Gomega) {
		doc := storedDoc(g, rc, catalogKeys(ns, "imported"))
		var desc string
		for _, tool := range doc.Tools {
			if tool.Name == "docs_page_1" {
				desc = tool.Description
			}
		}
		g.Expect(desc).To(Equal("Read page one of the operator's manual."))
		to = doc.Version
	}).Should(Succeed())
	changes, err := contract.ReadChanges(ctx, rc, catalogKeys(ns, "imported"), from, to)
	g.Expect(err).NotTo(HaveOccurred())
	var updated []string
	for _, c := range changes {
		updated = append(updated, c.Updated...)
	}
	g.Expect(updated).To(Equal([]string{"docs_page_1"}))

	// A sync that finds the list unchanged writes no ToolDefinition: the
	// source's last write to each (its field manager's entry, which a
	// no-op apply leaves as it was) stays the same. Status keeps moving
	// meanwhile (a grading of the version goes on, records and conditions
	// follow it), so the resourceVersion says nothing of the source.
	written := map[string]string{}
	g.Eventually(func(g Gomega) {
		q := getTC(g, ns, "imported").Status.Quality
		g.Expect(q).NotTo(BeNil())
		g.Expect(q.Version).To(Equal(to))
		confusable := records.ConfusableTools(q)
		for name, td := range sourceTools(g, ns, "docs") {
			rec := records.Of(td, "imported")
			g.Expect(rec).NotTo(BeNil())
			g.Expect(rec.SpecHash).To(Equal(td.Status.SpecHash), "%s", name)
			g.Expect(rec.ConfusableWith).To(Equal(confusable[td.Spec.Name]), "%s", name)
			// The ToolDefinition controller has derived its conditions
			// from the record.
			c := conditionOf(td, v1alpha1.ConditionEmbedded)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Message).To(ContainSubstring(fmt.Sprintf("(version %d)", rec.CatalogVersion)), "%s", name)
			g.Expect(conditionOf(td, v1alpha1.ConditionConfusable) != nil).To(Equal(rec.ConfusableWith != nil), "%s", name)
			written[name] = sourceWrite(td)
		}
		rec := records.Of(sourceTools(g, ns, "docs")["docs_page_1"], "imported")
		g.Expect(rec).NotTo(BeNil())
		g.Expect(rec.CatalogVersion).To(Equal(to))
	}).Should(Succeed())
	// A new generation (another interval) is synced and observed.
	nudge := getTS(g, ns, "docs")
	patch := client.MergeFrom(nudge.DeepCopy())
	nudge.Spec.SyncInterval = &metav1.Duration{Duration: 2 * time.Hour}
	g.Expect(k8sClient.Patch(ctx, nudge, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		ts := getTS(g, ns, "docs")
		g.Expect(ts.Status.ObservedGeneration).To(Equal(ts.Generation))
		g.Expect(ts.Generation).To(BeNumerically(">", nudge.Generation-1))
		expectCondition(g, ts, v1alpha1.ConditionSynced, metav1.ConditionTrue, v1alpha1.ReasonSynced)
	}).Should(Succeed())
	for name, td := range sourceTools(g, ns, "docs") {
		g.Expect(sourceWrite(td)).To(Equal(written[name]), "%s was written by a sync that changed nothing", name)
	}

	// A tool removed upstream goes.
	srv.RemoveTools("page_0")
	g.Eventually(func(g Gomega) {
		g.Expect(sourceTools(g, ns, "docs")).NotTo(HaveKey("docs_page_0"))
	}).WithTimeout(10 * time.Second).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(publishedTools(g, rc, catalogKeys(ns, "imported"))).NotTo(HaveKey("docs_page_0"))
	}).Should(Succeed())

	// Deleting the source deletes its ToolDefinitions; the catalog drops them.
	g.Expect(k8sClient.Delete(ctx, getTS(g, ns, "docs"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(sourceTools(g, ns, "docs")).To(BeEmpty())
		err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "docs"}, &v1alpha1.ToolSource{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(publishedTools(g, rc, catalogKeys(ns, "imported"))).To(BeEmpty())
	}).Should(Succeed())
}

// A server that goes down leaves the imported tools and the catalog as
// they are; the condition names the URL.
func TestToolSourceServerDownKeepsWhatWasImported(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	srv := mcptest.New(t, mcptest.Options{})
	srv.Tool("ping", "Answer pong.", nil, nil)
	ts := toolSource(ns, "flaky", srv.URL)
	ts.Spec.SyncInterval = &metav1.Duration{Duration: time.Second}
	createAll(g, ts, builtinCatalog(ns, "imported"))
	rc := redisClient(t)
	var before *contract.Document
	g.Eventually(func(g Gomega) {
		g.Expect(sourceTools(g, ns, "flaky")).To(HaveKey("ping"))
		before = storedDoc(g, rc, catalogKeys(ns, "imported"))
		g.Expect(before.Tools).To(HaveLen(1))
	}).Should(Succeed())
	srv.Close()
	g.Eventually(func(g Gomega) {
		c := expectCondition(g, getTS(g, ns, "flaky"), v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonServerUnreachable)
		g.Expect(c.Message).To(ContainSubstring(srv.URL))
	}).WithTimeout(20 * time.Second).Should(Succeed())
	g.Expect(sourceTools(g, ns, "flaky")).To(HaveKey("ping"))
	after := storedDoc(g, rc, catalogKeys(ns, "imported"))
	g.Expect(after.Version).To(Equal(before.Version))
	g.Expect(after.Tools).To(Equal(before.Tools))
}

// The bearer token comes from a Secret, reaches the server and appears
// nowhere in status or events.
func TestToolSourceBearerTokenFromASecret(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	const token = "tok-8c1d2e7f"
	srv := mcptest.New(t, mcptest.Options{Token: token})
	srv.Tool("ping", "Answer pong.", nil, nil)
	ts := toolSource(ns, "private", srv.URL)
	ts.Spec.MCP.BearerTokenSecretRef = &v1alpha1.SecretKeySelector{Name: "mcp-token", Key: "token"}
	createAll(g, ts)
	// Without the Secret: SecretNotFound, naming it.
	g.Eventually(func(g Gomega) {
		c := expectCondition(g, getTS(g, ns, "private"), v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSecretNotFound)
		g.Expect(c.Message).To(ContainSubstring("mcp-token"))
	}).Should(Succeed())
	createAll(g, secret(ns, "mcp-token", map[string]string{"token": token}))
	editTS := getTS(g, ns, "private")
	patch := client.MergeFrom(editTS.DeepCopy())
	editTS.Spec.SyncInterval = &metav1.Duration{Duration: time.Second}
	g.Expect(k8sClient.Patch(context.Background(), editTS, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(sourceTools(g, ns, "private")).To(HaveKey("ping"))
	}).WithTimeout(20 * time.Second).Should(Succeed())
	seen := false
	for _, h := range srv.Headers() {
		seen = seen || h.Get("Authorization") == "Bearer "+token
	}
	g.Expect(seen).To(BeTrue())
	ts = getTS(g, ns, "private")
	raw := fmt.Sprintf("%+v", ts.Status)
	for _, e := range eventsFor(g, ns, "private") {
		raw += e.Note
	}
	g.Expect(strings.Contains(raw, token)).To(BeFalse(), "the token appears in status or events")
	// The manager logged its work on this source, at every level, and
	// never the token.
	logs := managerLogs.String()
	g.Expect(logs).To(ContainSubstring(`"namespace":"` + ns + `"`))
	g.Expect(strings.Contains(logs, token)).To(BeFalse(), "the token appears in the manager's logs")
}

// Two sources offering the same tool name: the first keeps it, the second
// reports the conflict.
func TestToolSourceNameConflictKeepsTheFirst(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	a := mcptest.New(t, mcptest.Options{Name: "a"})
	a.Tool("search", "Search the wiki.", nil, nil)
	b := mcptest.New(t, mcptest.Options{Name: "b"})
	b.Tool("search", "Search the tickets.", nil, nil)
	b.Tool("assign", "Assign a ticket.", nil, nil)
	createAll(g, toolSource(ns, "first", a.URL))
	g.Eventually(func(g Gomega) {
		g.Expect(sourceTools(g, ns, "first")).To(HaveKey("search"))
	}).Should(Succeed())
	createAll(g, toolSource(ns, "second", b.URL))
	g.Eventually(func(g Gomega) {
		ts := getTS(g, ns, "second")
		g.Expect(ts.Status.SkippedTools).To(HaveLen(1))
		g.Expect(ts.Status.SkippedTools[0].Reason).To(ContainSubstring("already ToolDefinition search's"))
		g.Expect(sourceTools(g, ns, "second")).To(HaveKey("assign"))
	}).Should(Succeed())
	g.Expect(sourceTools(g, ns, "first")["search"].Spec.Description).To(Equal("Search the wiki."))
}

// A token the server refuses is AuthFailed; the rotated Secret is used at
// once (the Secret is watched), long before the sync interval.
func TestToolSourceAuthFailureAndTokenRotation(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	srv := mcptest.New(t, mcptest.Options{Token: "right-token"})
	srv.Tool("ping", "Answer pong.", nil, nil)
	ts := toolSource(ns, "rotated", srv.URL)
	ts.Spec.MCP.BearerTokenSecretRef = &v1alpha1.SecretKeySelector{Name: "mcp-token", Key: "token"}
	ts.Spec.SyncInterval = &metav1.Duration{Duration: time.Hour}
	createAll(g, secret(ns, "mcp-token", map[string]string{"token": "wrong-token"}), ts)
	g.Eventually(func(g Gomega) {
		c := expectCondition(g, getTS(g, ns, "rotated"), v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonAuthFailed)
		g.Expect(c.Message).To(ContainSubstring(srv.URL))
		g.Expect(c.Message).NotTo(ContainSubstring("wrong-token"))
	}).Should(Succeed())
	g.Expect(sourceTools(g, ns, "rotated")).To(BeEmpty())

	s := &corev1.Secret{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "mcp-token"}, s)).To(Succeed())
	s.Data["token"] = []byte("right-token")
	g.Expect(k8sClient.Update(context.Background(), s)).To(Succeed())
	g.Eventually(func(g Gomega) {
		expectCondition(g, getTS(g, ns, "rotated"), v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSynced)
		g.Expect(sourceTools(g, ns, "rotated")).To(HaveKey("ping"))
	}).Should(Succeed())
}

// Tools listed but not applied (here a ResourceQuota admits no more
// ToolDefinitions) are a failed sync the source reports: Ready and Synced
// False with ApplyFailed and a Warning event, what was imported kept.
// Once the quota is lifted, a retry imports the new tool.
func TestToolSourceApplyFailureIsReported(t *testing.T) {
	g := gomegaFor(t)
	ctx := context.Background()
	ns := newNamespace(t)
	srv := mcptest.New(t, mcptest.Options{})
	srv.Tool("ping", "Answer pong.", nil, nil)
	createAll(g, toolSource(ns, "quota", srv.URL))
	g.Eventually(func(g Gomega) {
		expectCondition(g, getTS(g, ns, "quota"), v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSynced)
		g.Expect(sourceTools(g, ns, "quota")).To(HaveKey("ping"))
	}).Should(Succeed())

	// A cluster's quota controller computes the status; here the test does.
	counted := corev1.ResourceName("count/tooldefinitions.toolcatalog.dev")
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-more-tools"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{counted: resource.MustParse("1")}}}
	g.Expect(k8sClient.Create(ctx, quota)).To(Succeed())
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{counted: resource.MustParse("1")}}
	g.Expect(k8sClient.Status().Update(ctx, quota)).To(Succeed())

	srv.Tool("echo", "Echo the arguments.", nil, nil)
	g.Eventually(func(g Gomega) {
		ts := getTS(g, ns, "quota")
		c := expectCondition(g, ts, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonApplyFailed)
		g.Expect(c.Message).To(ContainSubstring("exceeded quota"))
		g.Expect(c.Message).To(ContainSubstring("the ToolDefinitions already imported are kept"))
		expectCondition(g, ts, v1alpha1.ConditionSynced, metav1.ConditionFalse, v1alpha1.ReasonApplyFailed)
		g.Expect(hasEvent(eventsFor(g, ns, "quota"), corev1.EventTypeWarning, v1alpha1.ReasonApplyFailed)).NotTo(BeNil())
	}).Should(Succeed())
	g.Expect(sourceTools(g, ns, "quota")).To(HaveKey("ping"))

	g.Expect(k8sClient.Delete(ctx, quota)).To(Succeed())
	g.Eventually(func(g Gomega) {
		expectCondition(g, getTS(g, ns, "quota"), v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSynced)
		g.Expect(sourceTools(g, ns, "quota")).To(HaveKey("echo"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// sourceWrite is the generation of a ToolDefinition and when and what its
// ToolSource last wrote to it.
func sourceWrite(td *v1alpha1.ToolDefinition) string {
	for _, m := range td.ManagedFields {
		if m.Manager == toolsource.FieldOwner {
			return fmt.Sprintf("generation %d, %s at %s: %s", td.Generation, m.Operation, m.Time, m.FieldsV1)
		}
	}
	return fmt.Sprintf("generation %d, never written by its source", td.Generation)
}

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
