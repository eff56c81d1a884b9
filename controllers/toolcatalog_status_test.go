package controllers

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/controllers/toolcatalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalogconfig"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/internal/kube/cached"
	"github.com/toolcatalog/tool-catalog-operator/internal/records"
)

// A pass whose write loses to another writer must not use up a refresh
// request: the retry still does what was asked.
func TestWriteConflictDoesNotUseUpARefreshRequest(t *testing.T) {
	g := gomegaFor(t)
	ctx := context.Background()
	ns := newNamespace(t)
	rc := redisClient(t)
	k := catalogKeys(ns, "tools")
	p := newProvider(t, ns)
	p.Vary() // a forced refresh always publishes
	var armed atomic.Bool
	var once sync.Once
	p.Hold = func() {
		if armed.Load() {
			// Another writer publishes while this pass generates.
			once.Do(func() { g.Expect(rc.Incr(ctx, k.Version()).Err()).To(Succeed()) })
		}
	}
	threeTools(t, g, ns, p)
	g.Expect(p.ChatCalls()).To(Equal(map[string]int{"get_weather": 1, "create_issue": 1, "send_email": 1}))

	armed.Store(true)
	tc := requestRefresh(g, ns, "tools", "conflicted", "force", "")
	// The first forced pass generated, then failed to write; the request
	// was still pending, so the retry forced every tool again.
	g.Expect(p.ChatCalls()).To(Equal(map[string]int{"get_weather": 3, "create_issue": 3, "send_email": 3}))
	g.Expect(storedDoc(g, rc, k).Version).To(BeEquivalentTo(3))
	g.Expect(tc.Status.Version).To(BeEquivalentTo(3))
	expectCondition(g, tc, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSucceeded)
}

// directCatalog is a catalog the suite's manager leaves alone, reconciled
// by the test with a reconciler whose real client fails on command.
type directCatalog struct {
	g        *WithT
	tc       *v1alpha1.ToolCatalog
	r        *toolcatalog.Reconciler
	failList atomic.Bool
	failSub  atomic.Bool
}

var errInjected = errors.New("etcdserver: request timed out")

// reconcileUntil reconciles until the status shows version (the pacer
// may hold a version for a moment).
func (d *directCatalog) reconcileUntil(version int64) {
	d.g.Eventually(func() int64 {
		_, err := d.reconcile()
		d.g.Expect(err).NotTo(HaveOccurred())
		return d.get().Status.Version
	}).Should(BeEquivalentTo(version))
}

func newDirectCatalog(t *testing.T, g *WithT, tc *v1alpha1.ToolCatalog) *directCatalog {
	t.Helper()
	d := &directCatalog{g: g, tc: tc}
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: testScheme})
	g.Expect(err).NotTo(HaveOccurred())
	c := interceptor.NewClient(wc, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*v1alpha1.ToolDefinitionList); ok && d.failList.Load() {
				return errInjected
			}
			return c.List(ctx, list, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if _, ok := obj.(*v1alpha1.ToolCatalog); ok && d.failSub.Load() {
				return errInjected
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: kubernetes.NewForConfigOrDie(cfg).EventsV1()})
	g.Expect(broadcaster.StartRecordingToSinkWithContext(t.Context())).To(Succeed())
	fast := embedding.DefaultRetryPolicy()
	fast.MaxRetries = 0
	writer := records.NewWriter(records.NewLedger(), &cached.Objects{Reader: c}, c)
	d.r = catalogReconciler(c, wc, broadcaster.NewRecorder(testScheme, "direct-test"), nil, &fast, suiteProviders, writer, nil)
	if tc.Labels == nil {
		tc.Labels = map[string]string{}
	}
	tc.Labels[directLabel] = "true"
	createAll(g, tc)
	t.Cleanup(func() {
		// Let the finalizer go: nothing reconciles this catalog but us.
		_ = k8sClient.Delete(context.Background(), tc)
		_, _ = d.reconcile()
	})
	return d
}

func (d *directCatalog) reconcile() (ctrl.Result, error) {
	return d.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(d.tc)})
}

func (d *directCatalog) get() *v1alpha1.ToolCatalog { return getTC(d.g, d.tc.Namespace, d.tc.Name) }

// A pass that fails before it has a document (listing the ToolDefinitions
// fails) must not leave Ready=True from an earlier pass.
func TestPassFailingBeforeTheDocumentIsNotReady(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	p := newProvider(t, ns)
	createAll(g, testTool(ns, "weather", "get_weather", "Get the current weather for a city.", "direct"))
	d := newDirectCatalog(t, g, testCatalog(ns, "direct", p))

	res, err := d.reconcile()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(Equal(catalogconfig.DefaultResync))
	tc := d.get()
	expectCondition(g, tc, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSucceeded)
	g.Expect(tc.Status.Version).To(BeEquivalentTo(1))

	d.failList.Store(true)
	_, err = d.reconcile()
	g.Expect(err).To(MatchError(ContainSubstring("listing ToolDefinitions")))
	tc = d.get()
	ready := expectCondition(g, tc, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonAPIError)
	g.Expect(ready.Message).To(ContainSubstring("listing ToolDefinitions: " + errInjected.Error()))
	g.Expect(tc.Status.Version).To(BeEquivalentTo(1), "what was published stays recorded")

	d.failList.Store(false)
	_, err = d.reconcile()
	g.Expect(err).NotTo(HaveOccurred())
	expectCondition(g, d.get(), v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSucceeded)
}

// A configuration only the user can fix waits for the resync (or for the
// fix to trigger a pass) even when its status cannot be written: no hot
// retry loop against the API server.
func TestConfigErrorWithFailingStatusWriteWaitsForResync(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	tc := testCatalog(ns, "direct", newProvider(t, ns))
	tc.Spec.Embedding.APIKeySecretRef = &v1alpha1.SecretKeySelector{Name: "missing", Key: "apiKey"}
	d := newDirectCatalog(t, g, tc)

	res, err := d.reconcile()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(Equal(catalogconfig.DefaultResync))
	expectCondition(g, d.get(), v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSecretNotFound)

	// Now the status write fails too: still no error for the queue to
	// retry at once.
	tc = d.get()
	tc.Spec.Embedding.APIKeySecretRef.Name = "still-missing"
	g.Expect(k8sClient.Update(context.Background(), tc)).To(Succeed())
	d.failSub.Store(true)
	res, err = d.reconcile()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(Equal(catalogconfig.DefaultResync))
	g.Expect(conditionOf(d.get(), v1alpha1.ConditionReady).Message).NotTo(ContainSubstring("still-missing"), "the status write was refused")
}

// Field managers are limited to 128 bytes: two catalogs whose long names
// share a prefix must not own each other's records.
func TestLongCatalogNamesKeepTheirOwnRecords(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	p := newProvider(t, ns)
	long := strings.Repeat("catalog-with-a-very-long-name-", 4)
	names := []string{long + "one", long + "two"}
	createAll(g, testTool(ns, "weather", "get_weather", "Get the current weather for a city.", "shared"),
		testTool(ns, "email", "send_email", "Send an email to a recipient.", "shared"))
	for _, name := range names {
		tc := testCatalog(ns, name, p)
		tc.Spec.Selector.MatchLabels = map[string]string{catalogLabel: "shared"}
		createAll(g, tc)
	}
	expectBothRecords := func() {
		g.Eventually(func(g Gomega) {
			for _, td := range []string{"weather", "email"} {
				obj := getTD(g, ns, td)
				for _, name := range names {
					rec := records.Of(obj, name)
					g.Expect(rec).NotTo(BeNil(), "%s has no record of %s", td, name)
					g.Expect(rec.CatalogVersion).To(BeEquivalentTo(1))
				}
				expectCondition(g, obj, v1alpha1.ConditionEmbedded, metav1.ConditionTrue, v1alpha1.ReasonEmbedded)
			}
		}).Should(Succeed())
	}
	for _, name := range names {
		waitVersion(g, ns, name, 1)
	}
	expectBothRecords()
	// Another pass of each catalog writes its records again.
	for _, name := range names {
		requestRefresh(g, ns, name, "again", "", "")
	}
	expectBothRecords()
}

// A custom key prefix must hold the catalog's own {namespace/name} as its
// first hash tag: a catalog pointed at another's prefix is refused and
// writes nothing there; with its own tag it publishes. Deleting a catalog
// whose keys hold another catalog's head leaves them in place.
func TestKeyPrefixMustBeTheCatalogsOwn(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	p := newProvider(t, ns)
	rc := redisClient(t)
	prefix := "tc:{" + ns + "/first}"
	createAll(g, testTool(ns, "weather", "get_weather", "Get the current weather for a city.", "first"),
		testTool(ns, "email", "send_email", "Send an email to a recipient.", "second"))
	first := testCatalog(ns, "first", p)
	first.Spec.Redis.KeyPrefix = prefix
	createAll(g, first)
	waitVersion(g, ns, "first", 1)
	k := catalogKeys(ns, "first")
	k.Prefix = prefix
	// The grading of version 1 writes its quality after the version:
	// what the first catalog writes is all there before the second comes.
	g.Eventually(func() map[string]string { return dumpCatalog(rc, k) }).Should(HaveKey(prefix + ":quality"))
	before := dumpCatalog(rc, k)

	second := testCatalog(ns, "second", p)
	second.Spec.Redis.KeyPrefix = prefix
	createAll(g, second)
	g.Eventually(func(g Gomega) {
		tc := getTC(g, ns, "second")
		ready := expectCondition(g, tc, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonInvalidConfiguration)
		g.Expect(ready.Message).To(ContainSubstring("must hold the catalog's own hash tag {" + ns + "/second}"))
	}).Should(Succeed())
	g.Expect(dumpCatalog(rc, k)).To(Equal(before), "the refused catalog wrote to Redis")

	// Deleting it removes nothing: it never published there.
	g.Expect(k8sClient.Delete(context.Background(), second)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(second), &v1alpha1.ToolCatalog{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}).Should(Succeed())
	g.Expect(dumpCatalog(rc, k)).To(Equal(before), "the refused catalog's deletion touched Redis")

	// With its own tag it publishes.
	third := testCatalog(ns, "second", p)
	third.Spec.Redis.KeyPrefix = "tc:{" + ns + "/second}:v2"
	createAll(g, third)
	tc := waitVersion(g, ns, "second", 1)
	g.Expect(tc.Status.Counts.Tools).To(BeEquivalentTo(1))

	// A head another catalog wrote under first's keys: first's deletion
	// leaves them.
	g.Expect(rc.Set(context.Background(), k.Head(), `{"contract":2,"version":9,"catalog":"`+ns+`/first","catalog_uid":"someone-else"}`, 0).Err()).To(Succeed())
	g.Expect(k8sClient.Delete(context.Background(), first)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(hasEvent(eventsFor(g, ns, "first"), "Warning", v1alpha1.ReasonForeignKeys)).NotTo(BeNil())
	}).Should(Succeed())
	g.Expect(rc.Exists(context.Background(), k.Head(), k.Tools()).Val()).To(BeEquivalentTo(2))
}

// Provider clients (and their HTTP connections) live across passes; a
// change of the provider settings replaces them.
func TestProviderClientsAreReusedAcrossPasses(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	p := newProvider(t, ns)
	threeTools(t, g, ns, p)
	id := ns + "/tools"
	g.Expect(suiteProviders.clientsBuilt(id)).To(Equal(1))

	editTD(g, ns, "weather", func(td *v1alpha1.ToolDefinition) {
		td.Spec.Description = "Get the current weather and tomorrow's forecast for a city."
	})
	waitVersion(g, ns, "tools", 2)
	g.Expect(suiteProviders.clientsBuilt(id)).To(Equal(1), "a second pass built new clients")

	editTC(g, ns, "tools", func(tc *v1alpha1.ToolCatalog) { tc.Spec.Embedding.BatchSize = 2 })
	g.Eventually(func(g Gomega) {
		tc := getTC(g, ns, "tools")
		g.Expect(tc.Status.ObservedGeneration).To(Equal(tc.Generation))
	}).Should(Succeed())
	g.Expect(suiteProviders.clientsBuilt(id)).To(Equal(2), "new settings, new clients")
}
