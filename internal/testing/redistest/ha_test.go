package redistest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Sentinel set fails over when its primary dies, and a failover client
// writes to the promoted replica.
func TestSentinelsFailOver(t *testing.T) {
	set := NewSentinels(t)
	ctx := context.Background()
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: set.MasterName, SentinelAddrs: set.Addrs()})
	defer c.Close()
	if err := c.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	killed, promoted := set.KillPrimary(t)
	t.Logf("killed %s; promoted at %s", killed.Addr, promoted.Format(time.StampMilli))
	now, err := set.Primary(ctx)
	if err != nil || now == killed {
		t.Fatalf("primary after the failover: %v %v", now, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.Set(ctx, "k", "after", 0).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatal("no write reached the promoted replica")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A Redis Cluster fails a dead primary's slots over to its replica.
func TestHAClusterFailsOver(t *testing.T) {
	cl := NewHACluster(t)
	ctx := context.Background()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	defer c.Close()
	if err := c.Set(ctx, "{p}k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	killed, promoted := cl.KillOwner(t, "{p}k")
	t.Logf("killed %s; promoted at %s", killed.Addr, promoted.Format(time.StampMilli))
	owner, err := cl.owner(ctx, "{p}k", killed)
	if err != nil || owner == killed {
		t.Fatalf("owner after the failover: %v %v", owner, err)
	}
	// It holds what the killed primary acknowledged, and takes writes.
	oc := owner.Client()
	defer oc.Close()
	if got, err := oc.Get(ctx, "{p}k").Result(); err != nil || got != "before" {
		t.Fatalf("the promoted replica has %q, %v", got, err)
	}
	if err := oc.Set(ctx, "{p}k", "after", 0).Err(); err != nil {
		t.Fatalf("the promoted replica refuses a write: %v", err)
	}
}
