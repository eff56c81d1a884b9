package controllers

import (
	"context"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/metrics"
	"github.com/toolcatalog/tool-catalog-operator/internal/published/store"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/redistest"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// publishedDescription is the description a catalog's published version
// gives tool, and that version; "" while it cannot be read.
func publishedDescription(rc redis.UniversalClient, k contract.Keys, tool string) (string, int64) {
	snap, err := contract.Read(context.Background(), rc, k)
	if err != nil {
		return "", 0
	}
	d, err := snap.Document()
	if err != nil || d == nil {
		return "", 0
	}
	for _, t := range d.Tools {
		if t.Name == tool {
			return t.Description, d.Version
		}
	}
	return "", d.Version
}

// An edit made while the catalog's Redis primary is failing over (the
// Cluster node that holds the catalog's slot, or the Sentinel set's
// primary) is published seconds after the promotion: the manager's
// client reloads the slot map as soon as the dead node fails to answer,
// and a catalog whose Redis fails is tried again within seconds, not
// after a backoff grown during the outage. (The 30 s bound is a floor,
// against the minute the old Cluster client took to reload and the
// queue's backoff; the figure is logged.)
func TestFailoverDuringAnEdit(t *testing.T) {
	for _, mode := range []v1alpha1.RedisMode{v1alpha1.RedisModeCluster, v1alpha1.RedisModeSentinel} {
		t.Run(string(mode), func(t *testing.T) {
			g := gomegaFor(t)
			ns := newNamespace(t)
			p := newProvider(t, ns)
			k := catalogKeys(ns, "tools")
			tc := testCatalog(ns, "tools", p)
			var (
				kill  func() time.Time
				nodes []*redistest.Server
			)
			if mode == v1alpha1.RedisModeCluster {
				cluster := redistest.NewHACluster(t)
				tc.Spec.Redis = v1alpha1.RedisSpec{Mode: mode, Addresses: cluster.Addrs()}
				kill, nodes = func() time.Time { _, at := cluster.KillOwner(t, k.Head()); return at }, cluster.Nodes
			} else {
				set := redistest.NewSentinels(t)
				tc.Spec.Redis = v1alpha1.RedisSpec{Mode: mode, MasterName: set.MasterName, Addresses: set.Addrs()}
				kill, nodes = func() time.Time { _, at := set.KillPrimary(t); return at }, set.Nodes
			}
			rc := contract.NewClient(contract.ClientOptions{Addresses: tc.Spec.Redis.Addresses, Mode: string(mode), MasterName: tc.Spec.Redis.MasterName})
			t.Cleanup(func() { _ = rc.Close() })
			tc.Spec.Publish.ResyncInterval = &metav1.Duration{Duration: time.Hour}
			t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), tc) })
			manyTools(g, ns, 3, "Tool number %d.", tc)
			g.Eventually(func(g Gomega) {
				d, _ := publishedDescription(rc, k, "tool_0001")
				g.Expect(d).To(Equal("Tool number 1."))
			}).Should(Succeed())

			killed := time.Now()
			promotedAt := make(chan time.Time, 1)
			go func() { promotedAt <- kill() }()
			g.Eventually(func() bool { return slices.ContainsFunc(nodes, (*redistest.Server).Exited) }).Should(BeTrue())
			editTD(g, ns, "tool-0001", func(td *v1alpha1.ToolDefinition) { td.Spec.Description = "Tool number 1, edited during a failover." })
			promoted := <-promotedAt
			g.Eventually(func(g Gomega) {
				d, _ := publishedDescription(rc, k, "tool_0001")
				g.Expect(d).To(Equal("Tool number 1, edited during a failover."))
			}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
			t.Logf("%s: promoted %s after the kill; the edit made during the failover was published %s after the promotion", mode,
				promoted.Sub(killed).Round(time.Millisecond), time.Since(promoted).Round(time.Millisecond))
			g.Eventually(func(g Gomega) {
				expectCondition(g, getTC(g, ns, "tools"), v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSucceeded)
			}).Should(Succeed())
		})
	}
}

// A Redis restarted empty, or flushed, is found within seconds (the
// resync is an hour away here) and the catalog published again as a
// newer version, with a Warning event that says what was lost; the
// status says Published=False with reason PublishedDataLost meanwhile.
func TestLostPublishedDataIsPublishedAgain(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	// Over the wire, as a real provider: the query store keeps its
	// answers.
	p := newWireProvider(t)
	own := redistest.New(t)
	tc, rc, k := ownRedisCatalog(t, ns, p, own)
	tc.Spec.Publish.ResyncInterval = &metav1.Duration{Duration: time.Hour}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), tc) })
	manyTools(g, ns, 3, "Tool number %d.", tc)

	for round, forget := range []struct {
		how string
		do  func()
	}{
		{"restarted empty", func() {
			g.Expect(own.Kill()).To(Succeed())
			g.Expect(own.Restart()).To(Succeed())
		}},
		{"flushed", func() { g.Expect(rc.FlushAll(context.Background()).Err()).To(Succeed()) }},
		// The catalog's keys evicted, the namespace's query store kept.
		{"without the catalog's keys", func() { g.Expect(store.Delete(context.Background(), rc, k)).To(Succeed()) }},
	} {
		var before int64
		g.Eventually(func(g Gomega) {
			d, v := publishedDescription(rc, k, "tool_0001")
			g.Expect(d).To(Equal("Tool number 1."))
			before = v
		}).Should(Succeed())
		embeds, generated := len(p.EmbeddingRequests()), len(p.ChatRequests())
		forget.do()
		at := time.Now()
		g.Eventually(func(g Gomega) {
			d, v := publishedDescription(rc, k, "tool_0001")
			g.Expect(d).To(Equal("Tool number 1."))
			g.Expect(v).To(BeNumerically(">", before))
		}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
		t.Logf("Redis %s: version %d published again as %d, %s later; %d embeddings requests and %d query generations to the provider since",
			forget.how, before, storedDoc(g, rc, k).Version, time.Since(at).Round(time.Millisecond), len(p.EmbeddingRequests())-embeds, len(p.ChatRequests())-generated)
		if forget.how == "without the catalog's keys" {
			// What the query store holds is not paid for again.
			g.Expect(len(p.EmbeddingRequests()) - embeds).To(BeZero())
			g.Expect(len(p.ChatRequests()) - generated).To(BeZero())
		}
		// Events of one reason make a series that keeps its first note.
		g.Eventually(func(g Gomega) {
			ev := hasEvent(eventsFor(g, ns, "tools"), corev1.EventTypeWarning, v1alpha1.ReasonPublishedDataLost)
			g.Expect(ev).NotTo(BeNil())
			g.Expect(ev.Note).To(MatchRegexp(`^Redis lost published version \d+ \(it holds no version: restarted empty, flushed, evicted, or failed over to a replica that had not received it\); published the current state again as version \d+`))
			g.Expect(testutil.ToFloat64(metrics.PublishedDataLost.WithLabelValues(ns + "/tools"))).To(BeEquivalentTo(round + 1))
			cur := getTC(g, ns, "tools")
			g.Expect(cur.Status.Version).To(BeNumerically(">", before))
			expectCondition(g, cur, v1alpha1.ConditionPublished, metav1.ConditionTrue, v1alpha1.ReasonVersionPublished)
		}).Should(Succeed())
	}
}
