package controllers

import (
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/grading"
	"github.com/toolcatalog/tool-catalog-operator/internal/records"
)

func TestCatalogBulkApplyMakesFewVersionsAndCalls(t *testing.T) {
	const tools = 300
	g := gomegaFor(t)
	ns := newNamespace(t)
	p := newProvider(t, ns)
	rc := redisClient(t)
	k := catalogKeys(ns, "bulk")

	objs := make([]client.Object, 0, tools)
	for i := range tools {
		objs = append(objs, testTool(ns, fmt.Sprintf("tool-%03d", i), fmt.Sprintf("tool_%03d", i),
			fmt.Sprintf("Tool number %d does one specific thing number %d.", i, i), "bulk"))
	}
	start := time.Now()
	createAll(g, testCatalog(ns, "bulk", p))
	// Apply them at once, as kubectl apply -f of a directory or a GitOps
	// sync would.
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < tools; i += 8 {
				g.Expect(k8sClient.Create(t.Context(), objs[i])).To(Succeed())
			}
		}()
	}
	wg.Wait()

	g.Eventually(func(g Gomega) {
		tc := getTC(g, ns, "bulk")
		g.Expect(tc.Status.Counts).NotTo(BeNil())
		g.Expect(tc.Status.Counts.Tools).To(BeEquivalentTo(tools))
		g.Expect(tc.Status.Counts.Embedded).To(BeEquivalentTo(tools))
		g.Expect(storedDoc(g, rc, k).Tools).To(HaveLen(tools))
	}, 3*time.Minute).Should(Succeed())
	elapsed := time.Since(start)

	versions := getTC(g, ns, "bulk").Status.Version
	chat := 0
	for _, n := range p.ChatCalls() {
		chat += n
	}
	embReqs, texts := p.EmbeddingCalls()
	t.Logf("%d tools applied at once: published in %v as %d versions; %d chat requests, %d embeddings requests carrying %d texts",
		tools, elapsed.Round(time.Millisecond), versions, chat, embReqs, texts)

	// Each tool's queries are generated once, and embedded once, in
	// batches of 64 texts. Grading a version may embed again the queries
	// of sampled tools whose vectors it no longer keeps: it keeps those of
	// the last sample only (at most grading.MaxTools tools), and which tools
	// a version samples depends on how the passes split the work.
	g.Expect(chat).To(Equal(tools))
	g.Expect(p.EmbeddedTexts()).To(Equal(3 * tools))
	g.Expect(texts - 3*tools).To(BeNumerically("<=", 3*grading.MaxTools*int(versions-1)))
	g.Expect(embReqs).To(BeNumerically("<=", (3*tools)/64+2*int(versions)))
	g.Expect(versions).To(BeNumerically("<=", 10))
	g.Expect(rc.HLen(t.Context(), k.Embeddings()).Val()).To(BeEquivalentTo(tools))

	// Every ToolDefinition gets its record and is Ready.
	g.Eventually(func(g Gomega) {
		list := &v1alpha1.ToolDefinitionList{}
		g.Expect(k8sClient.List(t.Context(), list, client.InNamespace(ns))).To(Succeed())
		ready := 0
		for i := range list.Items {
			if rec := records.Of(&list.Items[i], "bulk"); rec != nil && rec.CatalogVersion > 0 &&
				meta.IsStatusConditionTrue(list.Items[i].Status.Conditions, v1alpha1.ConditionReady) {
				ready++
			}
		}
		g.Expect(ready).To(Equal(tools))
	}, time.Minute).Should(Succeed())
}
