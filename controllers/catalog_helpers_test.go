package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/openaitest"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

const (
	testEmbeddingModel = "text-embedding-3-small"
	testChatModel      = "gpt-4o-mini"
	testDims           = 16
	catalogLabel       = "toolcatalog.dev/catalog"
)

// provider is an OpenAI-compatible server that writes deterministic
// queries for any tool, can be told to fail for some tools, and counts
// requests per tool.
type provider struct {
	*openaitest.Server
	mu      sync.Mutex
	failing map[string]int // tool name → HTTP status to answer
}

var (
	toolNameLine    = regexp.MustCompile(`(?m)^Tool name: (\S+)$`)
	countLine       = regexp.MustCompile(`Write (\d+) distinct user requests`)
	descriptionLine = regexp.MustCompile(`(?m)^Description: (.*)$`)
)

func newProvider(t *testing.T) *provider {
	p := &provider{Server: openaitest.New(t), failing: map[string]int{}}
	p.OnChat = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.ChatRequest) {
		user := req.Messages[len(req.Messages)-1].Content
		tool := toolNameLine.FindStringSubmatch(user)[1]
		count, _ := strconv.Atoi(countLine.FindStringSubmatch(user)[1])
		p.mu.Lock()
		status := p.failing[tool]
		if all, ok := p.failing["*"]; ok {
			status = all
		}
		p.mu.Unlock()
		if status != 0 {
			openaitest.WriteError(w, status, "server_error", "", fmt.Sprintf("cannot serve %s", tool))
			return
		}
		// Like a real model's, the queries depend on the description.
		desc := descriptionLine.FindStringSubmatch(user)[1]
		qs := make([]string, count)
		for i := range qs {
			qs[i] = fmt.Sprintf("%s request number %d about %s", tool, i+1, shortHash(desc))
		}
		openaitest.WriteChat(w, req.Model, openaitest.QueriesJSON(qs...))
	}
	p.OnEmbeddings = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.EmbeddingsRequest) {
		openaitest.WriteEmbeddings(w, req, testDims, nil)
	}
	return p
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:3])
}

// fail makes chat requests for a tool ("*" for all) answer status; 0 heals.
func (p *provider) fail(tool string, status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if status == 0 {
		delete(p.failing, tool)
		return
	}
	p.failing[tool] = status
}

// chatCalls counts chat requests per tool.
func (p *provider) chatCalls() map[string]int {
	out := map[string]int{}
	for _, req := range p.ChatRequests() {
		if m := toolNameLine.FindStringSubmatch(req.Messages[len(req.Messages)-1].Content); m != nil {
			out[m[1]]++
		}
	}
	return out
}

func (p *provider) embeddingCalls() (requests, texts int) {
	for _, r := range p.EmbeddingRequests() {
		requests++
		texts += len(r.Input)
	}
	return requests, texts
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
	raw, err := c.Get(context.Background(), k.Catalog()).Bytes()
	g.Expect(err).NotTo(HaveOccurred())
	d, err := contract.ParseDocument(raw)
	g.Expect(err).NotTo(HaveOccurred())
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
	c := &catalogCase{g: gomegaFor(t), ctx: context.Background(), ns: newNamespace(t), p: newProvider(t), rc: redisClient(t)}
	c.k = catalogKeys(c.ns, "tools")
	threeTools(t, c.g, c.ns, c.p)
	return c
}

func secret(ns, name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func createAll(g *WithT, objs ...client.Object) {
	for _, o := range objs {
		g.Expect(k8sClient.Create(context.Background(), o)).To(Succeed())
	}
}
