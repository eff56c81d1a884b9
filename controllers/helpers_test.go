package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/controllers/toolcatalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalogconfig"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/internal/grading"
	"github.com/toolcatalog/tool-catalog-operator/internal/kube/cached"
	"github.com/toolcatalog/tool-catalog-operator/internal/kube/crkube"
	"github.com/toolcatalog/tool-catalog-operator/internal/published"
	"github.com/toolcatalog/tool-catalog-operator/internal/records"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/providertest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/redistest"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// rawJSON wraps a JSON document for spec.parameters.
func rawJSON(doc string) *apiextensionsv1.JSON {
	if !json.Valid([]byte(doc)) {
		panic("invalid JSON in test: " + doc)
	}
	return &apiextensionsv1.JSON{Raw: []byte(doc)}
}

// conditionOf returns the condition of the given type, or nil.
func conditionOf(obj interface{ GetConditions() *[]metav1.Condition }, condType string) *metav1.Condition {
	return meta.FindStatusCondition(*obj.GetConditions(), condType)
}

// expectCondition asserts a condition's status and reason.
func expectCondition(g Gomega, obj interface{ GetConditions() *[]metav1.Condition }, condType string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	c := conditionOf(obj, condType)
	g.Expect(c).NotTo(BeNil(), "condition %s missing", condType)
	g.Expect(c.Status).To(Equal(status), "condition %s status (message %q)", condType, c.Message)
	g.Expect(c.Reason).To(Equal(reason), "condition %s reason (message %q)", condType, c.Message)
	return c
}

// eventsFor lists the events regarding the named object in a namespace.
func eventsFor(g Gomega, namespace, name string) []eventsv1.Event {
	list := &eventsv1.EventList{}
	g.Expect(k8sClient.List(context.Background(), list, client.InNamespace(namespace))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// hasEvent reports whether events contain one of the type and reason.
func hasEvent(events []eventsv1.Event, eventType, reason string) *eventsv1.Event {
	for i := range events {
		if events[i].Type == eventType && events[i].Reason == reason {
			return &events[i]
		}
	}
	return nil
}

// getTD fetches a ToolDefinition into a fresh object.
func getTD(g Gomega, namespace, name string) *v1alpha1.ToolDefinition {
	td := &v1alpha1.ToolDefinition{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, td)).To(Succeed())
	return td
}

func gomegaFor(t *testing.T) *WithT {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(eventuallyTimeout)
	g.SetDefaultEventuallyPollingInterval(pollInterval)
	return g
}

const (
	testEmbeddingModel = providertest.EmbeddingModel
	testChatModel      = providertest.ChatModel
	testDims           = providertest.Dims
	catalogLabel       = "toolcatalog.dev/catalog"
)

// provider is what a test's catalog generates queries and embeds with
// (providertest.Provider): its generator is injected into the reconciler
// for the test's namespace.
type provider = providertest.Provider

// newProvider injects a counting, failing query generator for the
// namespace's catalogs.
func newProvider(t *testing.T, ns string) *provider {
	p := providertest.New(t)
	suiteProviders.inject(t, ns, p)
	return p
}

// newWireProvider is a provider whose chat requests go over HTTP to the
// in-process server, for tests of what reaches the server (API keys).
func newWireProvider(t *testing.T) *provider { return providertest.NewWire(t) }

// injectedProviders is the suite reconciler's ProviderFactory: the real
// cache, with the query generator a test injected for its namespace. It
// counts how often a catalog's clients were (re)built.
type injectedProviders struct {
	catalogconfig.ProviderCache
	mu         sync.Mutex
	generators map[string]embedding.QueryGenerator // namespace → generator
	last       map[string]embedding.Embedder       // catalog → embedder last handed out
	builds     map[string]int                      // catalog → clients built
}

func (f *injectedProviders) inject(t *testing.T, ns string, g embedding.QueryGenerator) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.generators[ns] = g
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.generators, ns)
	})
}

func (f *injectedProviders) Providers(catalog string, s catalogconfig.ProviderSettings) (catalogconfig.Providers, error) {
	p, err := f.ProviderCache.Providers(catalog, s)
	if err != nil {
		return p, err
	}
	ns, _, _ := strings.Cut(catalog, "/")
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last[catalog] != p.Embedder {
		f.last[catalog] = p.Embedder
		f.builds[catalog]++
	}
	if g := f.generators[ns]; g != nil {
		p.Generator = g
	}
	return p, nil
}

func (f *injectedProviders) clientsBuilt(catalog string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.builds[catalog]
}

// testCatalog is a catalog of the openai providers of p on the suite's
// Redis, with queriesPerTool 3.
func testCatalog(ns, name string, p *provider) *v1alpha1.ToolCatalog {
	return &v1alpha1.ToolCatalog{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.ToolCatalogSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{catalogLabel: name}},
			Redis:    v1alpha1.RedisSpec{Addresses: []string{redisServer.Addr}},
			Embedding: v1alpha1.EmbeddingSpec{
				Provider: v1alpha1.ProviderOpenAI, Model: testEmbeddingModel, BaseURL: p.BaseURL(), BatchSize: 64,
			},
			QueryGeneration: v1alpha1.QueryGenerationSpec{
				Provider: v1alpha1.ProviderOpenAI, Models: []string{testChatModel}, BaseURL: p.BaseURL(),
				QueriesPerTool: 3, Concurrency: 3,
			},
			Publish: v1alpha1.PublishSpec{Channel: "toolcatalog:test:" + ns, RetainVersions: 3},
		},
	}
}

// builtinCatalog is a catalog on the suite's Redis that embeds with the
// builtin model and writes builtin queries, selecting the label
// catalogLabel=name; it is not created yet.
func builtinCatalog(ns, name string) *v1alpha1.ToolCatalog {
	return &v1alpha1.ToolCatalog{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.ToolCatalogSpec{
			Selector:        metav1.LabelSelector{MatchLabels: map[string]string{catalogLabel: name}},
			Redis:           v1alpha1.RedisSpec{Addresses: []string{redisServer.Addr}},
			Embedding:       v1alpha1.EmbeddingSpec{Provider: v1alpha1.ProviderBuiltin},
			QueryGeneration: v1alpha1.QueryGenerationSpec{Provider: v1alpha1.ProviderBuiltin},
		},
	}
}

func testTool(ns, name, toolName, description, catalog string) *v1alpha1.ToolDefinition {
	return &v1alpha1.ToolDefinition{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{catalogLabel: catalog}},
		Spec: v1alpha1.ToolDefinitionSpec{
			Name:        toolName,
			Description: description,
			Parameters:  rawJSON(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`),
		},
	}
}

// editTD changes a ToolDefinition with a merge patch, which does not
// conflict with the status writes controllers make meanwhile.
func editTD(g Gomega, ns, name string, edit func(*v1alpha1.ToolDefinition)) {
	td := getTD(g, ns, name)
	patch := client.MergeFrom(td.DeepCopy())
	edit(td)
	g.Expect(k8sClient.Patch(context.Background(), td, patch)).To(Succeed())
}

// editTC changes a catalog's spec with a merge patch: the grading writes
// the status meanwhile, so an update of a copy read earlier would conflict.
func editTC(g Gomega, ns, name string, edit func(*v1alpha1.ToolCatalog)) {
	tc := getTC(g, ns, name)
	patch := client.MergeFrom(tc.DeepCopy())
	edit(tc)
	g.Expect(k8sClient.Patch(context.Background(), tc, patch)).To(Succeed())
}

func getTC(g Gomega, ns, name string) *v1alpha1.ToolCatalog {
	tc := &v1alpha1.ToolCatalog{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, tc)).To(Succeed())
	return tc
}

// waitVersion waits until the catalog reports the version as current and
// Ready.
func waitVersion(g *WithT, ns, name string, version int64) *v1alpha1.ToolCatalog {
	var tc *v1alpha1.ToolCatalog
	g.Eventually(func(g Gomega) {
		tc = getTC(g, ns, name)
		g.Expect(tc.Status.Version).To(Equal(version))
		g.Expect(tc.Status.ObservedGeneration).To(Equal(tc.Generation))
		expectCondition(g, tc, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSucceeded)
	}).Should(Succeed())
	return tc
}

// requestRefresh sets the refresh annotations and waits until the pass
// that handled them is recorded in status.
func requestRefresh(g *WithT, ns, name, token, mode, tools string) *v1alpha1.ToolCatalog {
	tc := getTC(g, ns, name)
	patch := client.MergeFrom(tc.DeepCopy())
	if tc.Annotations == nil {
		tc.Annotations = map[string]string{}
	}
	tc.Annotations[v1alpha1.AnnotationRefreshRequestedAt] = token
	tc.Annotations[v1alpha1.AnnotationRefreshMode] = mode
	tc.Annotations[v1alpha1.AnnotationRefreshTools] = tools
	g.Expect(k8sClient.Patch(context.Background(), tc, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		tc = getTC(g, ns, name)
		g.Expect(tc.Status.LastHandledRefreshAt).To(Equal(token))
	}).Should(Succeed())
	return tc
}

func catalogKeys(ns, name string) contract.Keys {
	return contract.Keys{Prefix: contract.DefaultPrefix(ns, name)}
}

func redisClient(t *testing.T) *redis.Client {
	c := redisServer.Client()
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// storedDoc reads and parses P:catalog.
func storedDoc(g Gomega, c *redis.Client, k contract.Keys) *contract.Document {
	snap, err := contract.Read(context.Background(), c, k)
	g.Expect(err).NotTo(HaveOccurred())
	d, err := snap.Document()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d).NotTo(BeNil(), "no catalog published under %s", k.Prefix)
	return d
}

func storedMetadata(g Gomega, c *redis.Client, k contract.Keys) map[string]*contract.Metadata {
	out := map[string]*contract.Metadata{}
	for name, raw := range c.HGetAll(context.Background(), k.Metadata()).Val() {
		m, err := contract.ParseMetadata(raw)
		g.Expect(err).NotTo(HaveOccurred(), "metadata of %s", name)
		out[name] = m
	}
	return out
}

// dumpCatalog returns every key of a catalog with its DUMP serialisation,
// to compare Redis byte for byte.
func dumpCatalog(c *redis.Client, k contract.Keys) map[string]string {
	out := map[string]string{}
	for _, key := range c.Keys(context.Background(), k.Prefix+"*").Val() {
		out[key] = c.Dump(context.Background(), key).Val()
	}
	return out
}

// catalogCase is the usual set-up of a catalog test: a namespace, a
// provider, a Redis client and the catalog "tools" with three tools at
// version 1.
type catalogCase struct {
	g   *WithT
	ctx context.Context
	ns  string
	p   *provider
	rc  *redis.Client
	k   contract.Keys
}

func newCatalogCase(t *testing.T) *catalogCase {
	c := &catalogCase{g: gomegaFor(t), ctx: context.Background(), ns: newNamespace(t), rc: redisClient(t)}
	c.p = newProvider(t, c.ns)
	c.k = catalogKeys(c.ns, "tools")
	threeTools(t, c.g, c.ns, c.p)
	return c
}

// ownRedisCatalog is the catalog "tools" of p on a redis-server of its own
// (to stop, kill or restart), resynced every 2 s; it is not created yet.
func ownRedisCatalog(t *testing.T, ns string, p *provider, own *redistest.Server) (*v1alpha1.ToolCatalog, *redis.Client, contract.Keys) {
	rc := own.Client()
	t.Cleanup(func() { _ = rc.Close() })
	tc := testCatalog(ns, "tools", p)
	tc.Spec.Redis.Addresses = []string{own.Addr}
	tc.Spec.Publish.ResyncInterval = &metav1.Duration{Duration: 2 * time.Second}
	return tc, rc, catalogKeys(ns, "tools")
}

// manyTools creates n ToolDefinitions for the catalog tc (their names and
// descriptions numbered), then tc, and waits until every tool is embedded.
func manyTools(g *WithT, ns string, n int, description string, tc *v1alpha1.ToolCatalog) {
	for i := range n {
		createAll(g, testTool(ns, fmt.Sprintf("tool-%04d", i), fmt.Sprintf("tool_%04d", i), fmt.Sprintf(description, i), tc.Name))
	}
	createAll(g, tc)
	g.Eventually(func(g Gomega) {
		getTCErr := getTC(g, ns, tc.Name)
		g.Expect(getTCErr.Status.Counts).NotTo(BeNil())
		g.Expect(getTCErr.Status.Counts.Embedded).To(BeEquivalentTo(n))
		expectCondition(g, getTCErr, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSucceeded)
	}).WithTimeout(90 * time.Second).Should(Succeed())
}

// secret is a Secret that opted in to being used by catalogs and sources.
func secret(ns, name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{v1alpha1.LabelSecret: v1alpha1.LabelSecretValue}},
		Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// createAll creates the objects in order. A catalog waits until the
// ToolDefinition controller has seen every ToolDefinition of its namespace:
// the manager's shared cache then holds them too, so the catalog's first
// pass selects them all (as it would once its watch caught up, but in one
// version instead of two).
func createAll(g *WithT, objs ...client.Object) {
	for _, o := range objs {
		if tc, ok := o.(*v1alpha1.ToolCatalog); ok {
			g.Eventually(func(g Gomega) {
				list := &v1alpha1.ToolDefinitionList{}
				g.Expect(k8sClient.List(context.Background(), list, client.InNamespace(tc.Namespace))).To(Succeed())
				for _, td := range list.Items {
					g.Expect(td.Status.SpecHash).NotTo(BeEmpty(), "ToolDefinition %s not seen yet", td.Name)
				}
			}).WithTimeout(90 * time.Second).Should(Succeed())
		}
		g.Expect(k8sClient.Create(context.Background(), o)).To(Succeed())
	}
}

// catalogReconciler wires a ToolCatalog reconciler as the manager does
// (internal/manager.Setup): c reads and writes, apiReader reads Secrets,
// informers (nil: none) is the cache the pass reads ToolDefinitions from.
func catalogReconciler(c client.Client, apiReader client.Reader, rec events.EventRecorder, informers cache.Informers, retry *embedding.RetryPolicy, providers catalogconfig.ProviderFactory, writer *records.Writer, now func() time.Time) *toolcatalog.Reconciler {
	resolver := &catalogconfig.Resolver{Reader: crkube.Getter(apiReader), RetryPolicy: retry}
	states := &published.States{Pool: redisPool, Now: now}
	grades := grading.New(c, rec, now, writer.Graded)
	objects := &cached.Objects{Reader: c, Informers: informers}
	return &toolcatalog.Reconciler{
		Client: c, Recorder: rec, Now: now,
		Pass:      &catalog.Pass{Configs: resolver, Providers: providers, States: states, Objects: objects, Now: now},
		Published: states, Resolver: resolver, Providers: providers, Grades: grades, Records: writer,
	}
}
