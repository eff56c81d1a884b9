package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/redistest"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
)

// wholeVersion checks that what Redis holds is one complete version: the
// document, the version key, every tool's vector and metadata, all written
// by the same pass (a forced refresh stamps one time on all of them).
func wholeVersion(g Gomega, ctx context.Context, rc redis.UniversalClient, k contract.Keys, tools int) (int64, time.Time) {
	// One MULTI/EXEC reads all of it, as consumers do.
	snap, err := contract.Read(ctx, rc, k)
	g.Expect(err).NotTo(HaveOccurred())
	doc, err := snap.Document()
	g.Expect(err).NotTo(HaveOccurred())
	cat, err := toolcatalog.New(doc, snap.Vectors)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cat.Version()).To(Equal(snap.Version), "the document is not the one P:version names")
	g.Expect(cat.Document.Tools).To(HaveLen(tools))
	g.Expect(cat.Vectors).To(HaveLen(tools), "every tool has a sound vector")
	g.Expect(snap.Metadata).To(HaveLen(tools))
	metadata := func(name string) *contract.Metadata {
		m, err := contract.ParseMetadata(snap.Metadata[name])
		g.Expect(err).NotTo(HaveOccurred(), "metadata of %s", name)
		return m
	}
	stamp := metadata(cat.Document.Tools[0].Name).EmbeddedAt
	for _, tool := range cat.Document.Tools {
		m := metadata(tool.Name)
		g.Expect(m.SpecHash).To(Equal(tool.SpecHash), "metadata of %s belongs to another spec", tool.Name)
		g.Expect(m.EmbeddedAt.Equal(stamp)).To(BeTrue(), "%s was embedded by another pass than %s", tool.Name, cat.Document.Tools[0].Name)
	}
	return cat.Version(), stamp
}

// Redis killed with SIGKILL while a version of 1,000 tools is being
// published, at different moments: after the restart, Redis holds the old
// complete version or the new complete one, never a mix, and the operator
// publishes the refresh again on its own.
func TestRedisKilledDuringPublishLeavesWholeVersions(t *testing.T) {
	const tools = 1000
	g := gomegaFor(t)
	ctx := context.Background()
	ns := newNamespace(t)
	p := newProvider(t, ns)
	p.Vary() // every forced refresh writes new queries and vectors for all tools
	own := redistest.NewDurable(t)
	tc, rc, k := ownRedisCatalog(t, ns, p, own)
	// Gone when the test ends: its short resync would keep the shared
	// manager busy with its tools for the rest of the suite.
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), tc) })
	manyTools(g, ns, tools, "Tool number %d.", tc)
	// A first forced refresh stamps every tool with one pass's time.
	base := getTC(g, ns, "tools")
	patch := client.MergeFrom(base.DeepCopy())
	base.Annotations = map[string]string{v1alpha1.AnnotationRefreshRequestedAt: "baseline", v1alpha1.AnnotationRefreshMode: "force"}
	g.Expect(k8sClient.Patch(ctx, base, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getTC(g, ns, "tools").Status.LastHandledRefreshAt).To(Equal("baseline"))
		wholeVersion(g, ctx, rc, k, tools)
	}).WithTimeout(60 * time.Second).Should(Succeed())

	old, newer := 0, 0
	for round, delay := range []time.Duration{0, 30 * time.Millisecond, 90 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
		before, beforeStamp := wholeVersion(g, ctx, rc, k, tools)
		token := fmt.Sprintf("crash-%d", round)
		cur := getTC(g, ns, "tools")
		patch := client.MergeFrom(cur.DeepCopy())
		cur.Annotations = map[string]string{v1alpha1.AnnotationRefreshRequestedAt: token, v1alpha1.AnnotationRefreshMode: "force"}
		g.Expect(k8sClient.Patch(ctx, cur, patch)).To(Succeed())
		time.Sleep(delay) // the moment of the crash, not an assertion wait
		g.Expect(own.Kill()).To(Succeed())
		g.Expect(own.Restart()).To(Succeed())

		after, stamp := wholeVersion(g, ctx, rc, k, tools)
		switch {
		case after == before && stamp.Equal(beforeStamp):
			old++
		case after > before && stamp.After(beforeStamp):
			newer++
		default:
			t.Fatalf("round %d: version %d (stamp %s) after the crash, %d (%s) before", round, after, stamp, before, beforeStamp)
		}
		t.Logf("round %d: killed %v after the request: version %d before, %d after the restart", round, delay, before, after)

		// The operator carries the request through on its own.
		g.Eventually(func(g Gomega) {
			tc := getTC(g, ns, "tools")
			g.Expect(tc.Status.LastHandledRefreshAt).To(Equal(token))
			expectCondition(g, tc, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSucceeded)
			v, s := wholeVersion(g, ctx, rc, k, tools)
			g.Expect(v).To(BeNumerically(">", before))
			g.Expect(s.After(beforeStamp)).To(BeTrue())
		}).WithTimeout(60 * time.Second).Should(Succeed())
	}
	t.Logf("Redis killed 5 times during publishes of %d tools: %d restarts found the old whole version, %d the new one, 0 mixed", tools, old, newer)
}
