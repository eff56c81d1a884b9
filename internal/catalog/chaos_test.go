package catalog_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/openaitest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/providertest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/redistest"
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

// Under a provider that fails 30 % of requests in every way, the passes
// of a catalog of 200 tools converge: every tool published with its new
// description, never a wrong-length or non-finite vector in any version
// a pass leaves in Redis, no tool lost on the way, and requests within
// the retry budget.
func TestPassesConvergeUnderProviderChaos(t *testing.T) {
	const tools, ns = 200, "chaos"
	srv := redistest.New(t)
	p := providertest.NewWire(t)
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
			openaitest.WriteEmbeddings(w, req, providertest.Dims/2, nil)
		case "infinite":
			openaitest.WriteEmbeddingsWith(w, req, func(string) []float64 { v := make([]float64, providertest.Dims); v[0] = 1e39; return v }, nil)
		default:
			if !ch.fault(w, r, kind) {
				embed(w, r, n, req)
			}
		}
	}
	tc := providerCatalog(ns, srv, p)
	tc.Spec.Embedding.Dimensions = providertest.Dims
	tc.Spec.Embedding.BatchSize = 16
	tc.Spec.Embedding.Timeout = &metav1.Duration{Duration: 300 * time.Millisecond}
	tc.Spec.QueryGeneration.Concurrency = 8
	h := newHarness(t, srv, tc, nil, numbered(ns, tools, "Tool number %d, first edition.")...)
	h.converge(10, nil)
	firstVectors := h.rc.HGetAll(h.ctx, h.keys.Embeddings()).Val()
	if len(firstVectors) != tools {
		t.Fatalf("%d vectors published, want %d", len(firstVectors), tools)
	}

	// Chaos on; every description changes.
	ch.mu.Lock()
	ch.on = true
	ch.mu.Unlock()
	chatBefore, embedBefore := len(p.ChatRequests()), len(p.EmbeddingRequests())
	for i := range tools {
		h.edit(fmt.Sprintf("tool-%04d", i), func(td *v1alpha1.ToolDefinition) {
			td.Spec.Description = fmt.Sprintf("Tool number %d, second edition.", i)
		})
	}
	// Faults a retry does not mend (a wrong length) fail the tool for
	// this pass; the next one plans it again, as the resync does.
	var passes int
	for second := 0; second < tools; passes++ {
		if passes == 30 {
			t.Fatalf("not converged in %d passes: %d of %d tools at the second edition; faults %v", passes, second, tools, ch.faults)
		}
		res := h.run()
		if res.Err != nil {
			t.Fatalf("pass %d: %v", passes, res.Err)
		}
		second = h.soundVersion(tools)
	}
	for name, raw := range h.rc.HGetAll(h.ctx, h.keys.Embeddings()).Val() {
		if raw == firstVectors[name] {
			t.Errorf("%s was not re-embedded", name)
		}
	}

	// The retry budget: each tool needs one successful generation and each
	// embeddings batch one successful request; with 30 % failures and up
	// to maxRetries retries per call, three times the fault-free count is
	// a generous ceiling that a retry storm would break.
	chatUsed, embedUsed := len(p.ChatRequests())-chatBefore, len(p.EmbeddingRequests())-embedBefore
	ch.mu.Lock()
	t.Logf("chaos trial: %d tools, %d passes, %d chat requests, %d embeddings requests, faults injected %v", tools, passes, chatUsed, embedUsed, ch.faults)
	ch.mu.Unlock()
	if chatUsed > 3*tools || embedUsed > 3*(tools*3/16+tools) {
		t.Errorf("%d chat and %d embeddings requests: over the retry budget", chatUsed, embedUsed)
	}
}

// soundVersion checks the version in Redis after a pass: every tool in
// it with a vector of the catalog's length, every number finite; it
// returns how many tools it holds at the second edition.
func (h *harness) soundVersion(tools int) int {
	h.t.Helper()
	doc := h.document()
	vectors := h.rc.HGetAll(h.ctx, h.keys.Embeddings()).Val()
	if len(doc.Tools) != tools || len(vectors) != tools {
		h.t.Fatalf("version %d holds %d tools and %d vectors, want %d", doc.Version, len(doc.Tools), len(vectors), tools)
	}
	for name, raw := range vectors {
		vec, err := contract.DecodeVector([]byte(raw))
		if err != nil || len(vec) != providertest.Dims {
			h.t.Fatalf("version %d: the vector of %s: %v, length %d", doc.Version, name, err, len(vec))
		}
		for _, x := range vec {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				h.t.Fatalf("version %d: the vector of %s is not finite", doc.Version, name)
			}
		}
	}
	second := 0
	for _, tool := range doc.Tools {
		if strings.Contains(tool.Description, "second edition") {
			second++
		}
	}
	return second
}
