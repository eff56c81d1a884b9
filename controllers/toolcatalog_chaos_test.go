package controllers

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/openaitest"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// chaos makes a share of a provider's requests fail in the ways real
// providers do, deterministically (seeded), and counts them.
type chaos struct {
	mu       sync.Mutex
	rng      *rand.Rand
	share    float64
	on       bool
	faults   map[string]int
	requests map[string]int
}

func (c *chaos) pick(endpoint string, kinds []string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests[endpoint]++
	if !c.on || c.rng.Float64() >= c.share {
		return ""
	}
	kind := kinds[c.rng.IntN(len(kinds))]
	c.faults[endpoint+" "+kind]++
	return kind
}

// fault answers a request the broken way; false means answer normally.
func (c *chaos) fault(w http.ResponseWriter, r *http.Request, kind string) bool {
	switch kind {
	case "429 Retry-After":
		w.Header().Set("retry-after-ms", "20")
		openaitest.WriteError(w, http.StatusTooManyRequests, "rate_limit_error", "rate_limit_exceeded", "slow down")
	case "429":
		openaitest.WriteError(w, http.StatusTooManyRequests, "rate_limit_error", "rate_limit_exceeded", "slow down")
	case "500":
		openaitest.WriteError(w, http.StatusInternalServerError, "server_error", "", "internal error")
	case "timeout":
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	case "malformed JSON":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"list","data":[{"embedding":[0.1,`))
	case "NaN":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[NaN,1]}]}`))
	default:
		return false
	}
	return true
}

// Under a provider that fails 30 % of requests in every way, a catalog of
// 200 tools converges: every tool published with its new description,
// never a wrong-length or non-finite vector in Redis, no tool lost on the
// way, and requests within the retry budget.
func TestCatalogConvergesUnderProviderChaos(t *testing.T) {
	const tools = 200
	g := gomegaFor(t)
	ctx := context.Background()
	ns := newNamespace(t)
	rc := redisClient(t)
	k := catalogKeys(ns, "tools")
	p := newWireProvider(t)
	ch := &chaos{rng: rand.New(rand.NewPCG(1, 2)), share: 0.3, faults: map[string]int{}, requests: map[string]int{}}
	chat, embed := p.OnChat, p.OnEmbeddings
	p.OnChat = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.ChatRequest) {
		kind := ch.pick("chat", []string{"429 Retry-After", "429", "500", "malformed JSON"})
		if kind == "malformed JSON" {
			openaitest.WriteChat(w, req.Model, `{"queries": ["only one"`)
			return
		}
		if !ch.fault(w, r, kind) {
			chat(w, r, n, req)
		}
	}
	p.OnEmbeddings = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.EmbeddingsRequest) {
		kind := ch.pick("embeddings", []string{"429 Retry-After", "429", "500", "timeout", "malformed JSON", "NaN", "wrong length", "infinite"})
		switch kind {
		case "wrong length":
			openaitest.WriteEmbeddings(w, req, testDims/2, nil)
		case "infinite":
			openaitest.WriteEmbeddingsWith(w, req, func(string) []float64 { v := make([]float64, testDims); v[0] = 1e39; return v }, nil)
		default:
			if !ch.fault(w, r, kind) {
				embed(w, r, n, req)
			}
		}
	}

	tc := testCatalog(ns, "tools", p)
	tc.Spec.Embedding.Dimensions = testDims
	tc.Spec.Embedding.BatchSize = 16
	tc.Spec.Embedding.Timeout = &metav1.Duration{Duration: 300 * time.Millisecond}
	tc.Spec.QueryGeneration.Concurrency = 8
	// Some faults are not transient to the client (a wrong length): the
	// resync retries them.
	tc.Spec.Publish.ResyncInterval = &metav1.Duration{Duration: 2 * time.Second}
	// Gone when the test ends: its short resync would keep the shared
	// manager busy with its tools for the rest of the suite.
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), tc) })
	manyTools(g, ns, tools, "Tool number %d, first edition.", tc)
	firstVectors := rc.HGetAll(ctx, k.Embeddings()).Val()
	g.Expect(firstVectors).To(HaveLen(tools))

	// Chaos on; every description changes.
	ch.mu.Lock()
	ch.on = true
	ch.mu.Unlock()
	chatBefore, embedBefore := len(p.ChatRequests()), len(p.EmbeddingRequests())
	for i := range tools {
		editTD(g, ns, fmt.Sprintf("tool-%04d", i), func(td *v1alpha1.ToolDefinition) {
			td.Spec.Description = fmt.Sprintf("Tool number %d, second edition.", i)
		})
	}

	// While it converges, every version in Redis is whole and sound.
	versionsSeen := map[string]bool{}
	deadline := time.Now().Add(120 * time.Second)
	for {
		v := rc.Get(ctx, k.Version()).Val()
		doc := storedDoc(g, rc, k)
		vectors := rc.HGetAll(ctx, k.Embeddings()).Val()
		versionsSeen[v] = true
		g.Expect(doc.Tools).To(HaveLen(tools), "version %s lost tools", v)
		g.Expect(vectors).To(HaveLen(tools), "version %s lost vectors", v)
		for name, raw := range vectors {
			vec, err := contract.DecodeVector([]byte(raw))
			g.Expect(err).NotTo(HaveOccurred(), "vector of %s", name)
			g.Expect(vec).To(HaveLen(testDims), "vector of %s", name)
		}
		second := 0
		for _, tool := range doc.Tools {
			if strings.Contains(tool.Description, "second edition") {
				second++
			}
		}
		if second == tools {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not converged within 120s: %d of %d tools at the second edition; faults %v", second, tools, ch.faults)
		}
		time.Sleep(50 * time.Millisecond)
	}
	g.Eventually(func(g Gomega) {
		tc := getTC(g, ns, "tools")
		expectCondition(g, tc, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSucceeded)
	}).Should(Succeed())
	for name, raw := range rc.HGetAll(ctx, k.Embeddings()).Val() {
		vec, _ := contract.DecodeVector([]byte(raw))
		for _, x := range vec {
			g.Expect(math.IsNaN(float64(x)) || math.IsInf(float64(x), 0)).To(BeFalse(), "vector of %s", name)
		}
		g.Expect(raw).NotTo(Equal(firstVectors[name]), "%s was not re-embedded", name)
	}

	// The retry budget: each tool needs one successful generation and each
	// embeddings batch one successful request; with 30 % failures and up
	// to maxRetries retries per call, three times the fault-free count is
	// a generous ceiling that a retry storm would break.
	chatUsed, embedUsed := len(p.ChatRequests())-chatBefore, len(p.EmbeddingRequests())-embedBefore
	ch.mu.Lock()
	t.Logf("chaos trial: %d tools, %d versions seen while converging, %d chat requests, %d embeddings requests, faults injected %v",
		tools, len(versionsSeen), chatUsed, embedUsed, ch.faults)
	ch.mu.Unlock()
	g.Expect(chatUsed).To(BeNumerically("<=", 3*tools))
	g.Expect(embedUsed).To(BeNumerically("<=", 3*(tools*3/16+tools)))
}
