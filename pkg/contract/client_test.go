package contract_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolcatalog/tool-catalog-operator/internal/testing/redistest"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// untilWritten writes key every 100 ms until a write succeeds, and says
// how long after promoted it did; it fails t after limit.
func untilWritten(t *testing.T, c redis.UniversalClient, key string, promoted time.Time, limit time.Duration) time.Duration {
	t.Helper()
	ctx := context.Background()
	var err error
	for time.Since(promoted) < limit {
		if err = c.Set(ctx, key, "after", 0).Err(); err == nil {
			return time.Since(promoted)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no write reached the promoted replica %s after the promotion: %v", limit, err)
	return 0
}

// A Cluster client follows a failover as soon as the dead node fails to
// answer: its writes reach the promoted replica within seconds, where a
// client that reloads its slot map every minute keeps dialling the dead
// node. (The 20 s bound is a floor, a third of go-redis's default
// reload; the benchmark of the failover harness reports the figure.)
func TestClusterClientFollowsAFailover(t *testing.T) {
	cluster := redistest.NewHACluster(t)
	c := contract.NewClient(contract.ClientOptions{Addresses: cluster.Addrs(), Mode: "cluster"})
	defer c.Close()
	ctx := context.Background()
	const key = "{tc:sales/crm}:head"
	if err := c.Set(ctx, key, "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, promoted := cluster.KillOwner(t, key)
	took := untilWritten(t, c, key, promoted, 20*time.Second)
	t.Logf("first write %s after the promotion", took.Round(time.Millisecond))
}

// A Sentinel client follows the sentinels' promotion.
func TestSentinelClientFollowsAFailover(t *testing.T) {
	set := redistest.NewSentinels(t)
	c := contract.NewClient(contract.ClientOptions{Addresses: set.Addrs(), Mode: "sentinel", MasterName: set.MasterName})
	defer c.Close()
	const key = "{tc:sales/crm}:head"
	if err := c.Set(context.Background(), key, "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, promoted := set.KillPrimary(t)
	took := untilWritten(t, c, key, promoted, 20*time.Second)
	t.Logf("first write %s after the promotion", took.Round(time.Millisecond))
}

func TestTopologyError(t *testing.T) {
	for err, want := range map[error]bool{
		nil: false, redis.Nil: false, context.Canceled: false, errors.New("WRONGTYPE"): false,
		context.DeadlineExceeded: true, errors.New("CLUSTERDOWN The cluster is down"): true, errors.New("READONLY You can't write against a read only replica."): true,
	} {
		if got := contract.TopologyError(err); got != want {
			t.Errorf("TopologyError(%v) = %v, want %v", err, got, want)
		}
	}
}
