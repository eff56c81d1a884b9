package controllers

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
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

// An edit made while the Redis Cluster node that holds the catalog's
// slot is failing over is published seconds after the promotion: the
// manager's client reloads the slot map as soon as the dead node fails
// to answer, and a catalog whose Redis fails is tried again within
// seconds, not after a backoff grown during the outage. (The 30 s bound
// is a floor, against the minute the old client took to reload and the
// queue's backoff; the figure is logged.)
func TestClusterFailoverDuringAnEdit(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	p := newProvider(t, ns)
	cluster := redistest.NewHACluster(t)
	rc := contract.NewClient(contract.ClientOptions{Addresses: cluster.Addrs(), Mode: "cluster"})
	t.Cleanup(func() { _ = rc.Close() })
	k := catalogKeys(ns, "tools")

	tc := testCatalog(ns, "tools", p)
	tc.Spec.Redis = v1alpha1.RedisSpec{Mode: v1alpha1.RedisModeCluster, Addresses: cluster.Addrs()}
	tc.Spec.Publish.ResyncInterval = &metav1.Duration{Duration: time.Hour}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), tc) })
	manyTools(g, ns, 3, "Tool number %d.", tc)
	g.Eventually(func(g Gomega) {
		d, _ := publishedDescription(rc, k, "tool_0001")
		g.Expect(d).To(Equal("Tool number 1."))
	}).Should(Succeed())

	_, promoted := cluster.KillOwner(t, k.Head())
	editTD(g, ns, "tool-0001", func(td *v1alpha1.ToolDefinition) { td.Spec.Description = "Tool number 1, edited during a failover." })
	g.Eventually(func(g Gomega) {
		d, _ := publishedDescription(rc, k, "tool_0001")
		g.Expect(d).To(Equal("Tool number 1, edited during a failover."))
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	t.Logf("the edit made during the failover was published %s after the promotion", time.Since(promoted).Round(time.Millisecond))
	g.Eventually(func(g Gomega) {
		expectCondition(g, getTC(g, ns, "tools"), v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSucceeded)
	}).Should(Succeed())
}
