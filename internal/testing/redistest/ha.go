package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Failover timing of the HA sets: a node unreachable for this long is
// failed over, so a test sees a promotion within a few seconds.
const (
	nodeTimeout     = 1000 * time.Millisecond
	failoverTimeout = 30 * time.Second
)

// Sentinels is a Sentinel set on loopback: a primary, a replica and three
// sentinels that fail the primary over to the replica when it dies.
type Sentinels struct {
	// MasterName is the name the sentinels monitor the primary as.
	MasterName string
	// Sentinels are the sentinel processes; Nodes the primary and the
	// replica, the primary first when the set starts.
	Sentinels []*Server
	Nodes     []*Server
}

// NewSentinels starts a Sentinel set for the test and stops it when the
// test ends.
func NewSentinels(t testing.TB) *Sentinels {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal(InstallHint)
	}
	dir := t.TempDir()
	set := &Sentinels{MasterName: "toolcatalog"}
	t.Cleanup(func() {
		for _, s := range slices.Concat(set.Sentinels, set.Nodes) {
			_ = s.Stop()
		}
	})
	primary, err := startNode(bin, dir)
	if err != nil {
		t.Fatalf("starting the primary: %v", err)
	}
	set.Nodes = append(set.Nodes, primary)
	host, port, _ := net.SplitHostPort(primary.Addr)
	replica, err := startNode(bin, dir, "--replicaof", host, port)
	if err != nil {
		t.Fatalf("starting the replica: %v", err)
	}
	set.Nodes = append(set.Nodes, replica)
	if err := waitFor(func(ctx context.Context) error { return replicaInSync(ctx, replica.Addr) }); err != nil {
		t.Fatalf("the replica did not sync: %v", err)
	}
	for i := range 3 {
		s, err := startSentinel(bin, dir, i, set.MasterName, primary.Addr)
		if err != nil {
			t.Fatalf("starting sentinel %d: %v", i, err)
		}
		set.Sentinels = append(set.Sentinels, s)
	}
	// Ready when every sentinel knows the replica and the other two.
	if err := waitFor(func(ctx context.Context) error {
		for _, s := range set.Sentinels {
			c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr})
			replicas, err := c.Replicas(ctx, set.MasterName).Result()
			sentinels, err2 := c.Sentinels(ctx, set.MasterName).Result()
			_ = c.Close()
			if err = errors.Join(err, err2); err != nil {
				return err
			}
			if len(replicas) < 1 || len(sentinels) < 2 {
				return fmt.Errorf("sentinel %s knows %d replicas and %d other sentinels", s.Addr, len(replicas), len(sentinels))
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("the sentinels did not find each other: %v", err)
	}
	return set
}

// Addrs are the sentinels' addresses.
func (s *Sentinels) Addrs() []string {
	var out []string
	for _, n := range s.Sentinels {
		out = append(out, n.Addr)
	}
	return out
}

// Primary is the node the sentinels name as primary now.
func (s *Sentinels) Primary(ctx context.Context) (*Server, error) {
	var lastErr error
	for _, sn := range s.Sentinels {
		if sn.Exited() {
			continue
		}
		c := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr})
		addr, err := c.GetMasterAddrByName(ctx, s.MasterName).Result()
		_ = c.Close()
		if err != nil {
			lastErr = err
			continue
		}
		at := net.JoinHostPort(addr[0], addr[1])
		for _, n := range s.Nodes {
			if n.Addr == at {
				return n, nil
			}
		}
		return nil, fmt.Errorf("the sentinels name %s, no node of the set", at)
	}
	return nil, fmt.Errorf("no sentinel answered: %v", lastErr)
}

// KillPrimary kills the primary with SIGKILL, once its replica has
// everything it acknowledged (a failover that loses writes is a test of
// its own), and waits until the sentinels have promoted the replica and
// it accepts writes; it returns the killed node and when the promotion
// was seen.
func (s *Sentinels) KillPrimary(t testing.TB) (*Server, time.Time) {
	t.Helper()
	ctx := context.Background()
	old, err := s.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := replicated(ctx, old.Addr, "redistest:replicated"); err != nil {
		t.Fatal(err)
	}
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	var promoted time.Time
	if err := waitFor(func(ctx context.Context) error {
		now, err := s.Primary(ctx)
		if err != nil {
			return err
		}
		if now == old {
			return fmt.Errorf("the sentinels still name %s", old.Addr)
		}
		if err := writable(ctx, now.Addr); err != nil {
			return err
		}
		promoted = time.Now()
		return nil
	}); err != nil {
		t.Fatalf("no failover after killing %s: %v", old.Addr, err)
	}
	return old, promoted
}

// HACluster is a Redis Cluster on loopback of three primaries, each with
// a replica that takes its slots over when it dies.
type HACluster struct {
	// Nodes are the six nodes: the primaries first when it starts.
	Nodes []*Server
}

// NewHACluster starts a Redis Cluster of three primaries and three
// replicas for the test and stops it when the test ends.
func NewHACluster(t testing.TB) *HACluster {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal(InstallHint)
	}
	dir := t.TempDir()
	c := &HACluster{}
	t.Cleanup(func() {
		for _, n := range c.Nodes {
			_ = n.Stop()
		}
	})
	for range 6 {
		n, err := startNode(bin, dir, "--cluster-enabled", "yes", "--cluster-node-timeout", strconv.Itoa(int(nodeTimeout.Milliseconds())),
			"--cluster-replica-validity-factor", "0", "--cluster-config-file", "nodes-"+strconv.Itoa(len(c.Nodes))+"-"+strconv.FormatInt(time.Now().UnixNano(), 36)+".conf")
		if err != nil {
			t.Fatalf("starting a cluster node: %v", err)
		}
		c.Nodes = append(c.Nodes, n)
	}
	if err := c.form(); err != nil {
		t.Fatalf("forming the cluster: %v", err)
	}
	return c
}

// form gives each primary a third of the slots, introduces every node to
// the first, makes nodes 3-5 replicas of 0-2 and waits until the cluster
// is ok and every replica is in sync.
func (c *HACluster) form() error {
	ctx := context.Background()
	clients := make([]*redis.Client, len(c.Nodes))
	for i, n := range c.Nodes {
		clients[i] = n.Client()
		defer func() { _ = clients[i].Close() }()
	}
	ranges := [][2]int{{0, 5460}, {5461, 10922}, {10923, 16383}}
	ids := make([]string, 3)
	for i, r := range ranges {
		if err := clients[i].Do(ctx, "CLUSTER", "ADDSLOTSRANGE", r[0], r[1]).Err(); err != nil {
			return fmt.Errorf("assigning slots to %s: %w", c.Nodes[i].Addr, err)
		}
		id, err := clients[i].Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			return err
		}
		ids[i] = id
	}
	host, port, _ := net.SplitHostPort(c.Nodes[0].Addr)
	for _, cl := range clients[1:] {
		if err := cl.ClusterMeet(ctx, host, port).Err(); err != nil {
			return fmt.Errorf("introducing a node: %w", err)
		}
	}
	// A replica can follow its primary only once it knows it.
	for i := 3; i < 6; i++ {
		if err := waitFor(func(ctx context.Context) error {
			return clients[i].Do(ctx, "CLUSTER", "REPLICATE", ids[i-3]).Err()
		}); err != nil {
			return fmt.Errorf("making %s a replica: %w", c.Nodes[i].Addr, err)
		}
	}
	return waitFor(func(ctx context.Context) error {
		for i, cl := range clients {
			info, err := cl.ClusterInfo(ctx).Result()
			if err != nil {
				return err
			}
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:6") {
				return fmt.Errorf("node %s: %s", c.Nodes[i].Addr, info)
			}
		}
		for i := 3; i < 6; i++ {
			if err := replicaInSync(ctx, c.Nodes[i].Addr); err != nil {
				return err
			}
		}
		return nil
	})
}

// Addrs are the nodes' addresses.
func (c *HACluster) Addrs() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.Addr)
	}
	return out
}

// KillOwner kills, with SIGKILL, the primary that owns key's slot, once
// its replica has everything it acknowledged (a failover that loses
// writes is a test of its own), and waits until the replica owns the slot
// and the cluster is ok again; it returns the killed node and when the
// promotion was seen.
func (c *HACluster) KillOwner(t testing.TB, key string) (*Server, time.Time) {
	t.Helper()
	ctx := context.Background()
	owner, err := c.owner(ctx, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := replicated(ctx, owner.Addr, key); err != nil {
		t.Fatal(err)
	}
	if err := owner.Kill(); err != nil {
		t.Fatal(err)
	}
	var promoted time.Time
	if err := waitFor(func(ctx context.Context) error {
		now, err := c.owner(ctx, key, owner)
		if err != nil {
			return err
		}
		if now == owner {
			return fmt.Errorf("%s still owns the slot", owner.Addr)
		}
		if err := writable(ctx, now.Addr); err != nil {
			return err
		}
		promoted = time.Now()
		return nil
	}); err != nil {
		t.Fatalf("no failover after killing %s: %v", owner.Addr, err)
	}
	return owner, promoted
}

// owner is the node that owns key's slot, as a live node other than
// skip says, once the cluster is ok.
func (c *HACluster) owner(ctx context.Context, key string, skip *Server) (*Server, error) {
	for _, n := range c.Nodes {
		if n == skip || n.Exited() {
			continue
		}
		cl := n.Client()
		slot, err1 := cl.ClusterKeySlot(ctx, key).Result()
		info, err2 := cl.ClusterInfo(ctx).Result()
		shards, err3 := cl.ClusterShards(ctx).Result()
		_ = cl.Close()
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, err
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return nil, fmt.Errorf("cluster state of %s is not ok", n.Addr)
		}
		for _, sh := range shards {
			if !slices.ContainsFunc(sh.Slots, func(r redis.SlotRange) bool { return r.Start <= slot && slot <= r.End }) {
				continue
			}
			for _, node := range sh.Nodes {
				if node.Role != "master" || node.Health != "online" {
					continue
				}
				for _, m := range c.Nodes {
					if m.Addr == net.JoinHostPort(node.IP, strconv.FormatInt(node.Port, 10)) {
						return m, nil
					}
				}
			}
		}
		return nil, fmt.Errorf("no node of the set owns slot %d", slot)
	}
	return nil, errors.New("no live node")
}

// startNode starts a redis-server on a free port with args.
func startNode(bin, dir string, args ...string) (*Server, error) {
	var lastErr error
	for range startAttempts {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s, err := startOnPort(bin, dir, port, false, false, args...)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// startSentinel starts sentinel i, monitoring the primary at addr as name.
func startSentinel(bin, dir string, i int, name, primary string) (*Server, error) {
	host, port, _ := net.SplitHostPort(primary)
	var lastErr error
	for range startAttempts {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		conf := filepath.Join(dir, fmt.Sprintf("sentinel-%d.conf", i))
		body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n"+
			"sentinel monitor %s %s %s 2\nsentinel down-after-milliseconds %s %d\nsentinel failover-timeout %s 5000\n",
			p, dir, filepath.Join(dir, fmt.Sprintf("sentinel-%d.log", i)), name, host, port, name, nodeTimeout.Milliseconds(), name)
		if writeErr := os.WriteFile(conf, []byte(body), 0o600); writeErr != nil {
			return nil, writeErr
		}
		s, err := launch(bin, dir, p, false, conf, "--sentinel")
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// replicaInSync says whether the replica at addr is connected to its
// primary and has what it has.
func replicaInSync(ctx context.Context, addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer func() { _ = c.Close() }()
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "master_link_status:up") || strings.Contains(info, "master_sync_in_progress:1") {
		return fmt.Errorf("replica %s is not in sync", addr)
	}
	return nil
}

// replicated waits until a replica of the primary at addr has every
// write it acknowledged: a write of its own, in key's slot, then WAIT on
// the same connection (the replication stream keeps the primary's order).
func replicated(ctx context.Context, addr, key string) error {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer func() { _ = c.Close() }()
	conn := c.Conn()
	defer func() { _ = conn.Close() }()
	marker := key + ":redistest"
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i:], '}'); j > 1 {
			marker = key[i:i+j+1] + ":redistest"
		}
	}
	if err := conn.Set(ctx, marker, "1", time.Minute).Err(); err != nil {
		return fmt.Errorf("writing before the kill: %w", err)
	}
	n, err := conn.Wait(ctx, 1, 10*time.Second).Result()
	if err != nil || n < 1 {
		return fmt.Errorf("no replica of %s acknowledged the writes before the kill (%d): %v", addr, n, err)
	}
	return nil
}

// writable says whether the node at addr is a primary.
func writable(ctx context.Context, addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer func() { _ = c.Close() }()
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "role:master") {
		return fmt.Errorf("%s is not a primary yet", addr)
	}
	return nil
}

// waitFor calls check until it succeeds or failoverTimeout passes.
func waitFor(check func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), failoverTimeout)
	defer cancel()
	for {
		one, cancelOne := context.WithTimeout(ctx, 2*time.Second)
		err := check(one)
		cancelOne()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}
