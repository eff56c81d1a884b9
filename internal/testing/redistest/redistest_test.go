package redistest

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestServerMultiExecRoundTripAndStop(t *testing.T) {
	s, err := Start("")
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	ctx := context.Background()
	c := s.Client()
	defer c.Close()

	var incr *redis.IntCmd
	var get *redis.StringCmd
	cmds, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "k", "v", 0)
		incr = p.Incr(ctx, "n")
		get = p.Get(ctx, "k")
		return nil
	})
	if err != nil {
		t.Fatalf("MULTI/EXEC: %v", err)
	}
	// One result per queued command.
	if len(cmds) != 3 {
		t.Fatalf("got %d command results, want 3", len(cmds))
	}
	if incr.Val() != 1 || get.Val() != "v" {
		t.Fatalf("INCR = %d, GET = %q; want 1, \"v\"", incr.Val(), get.Val())
	}
	info, err := c.Info(ctx, "server").Result()
	if err != nil || len(info) == 0 {
		t.Fatalf("INFO server: %v", err)
	}

	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if !s.Exited() {
		t.Fatal("process still running after Stop")
	}
	if conn, err := net.DialTimeout("tcp", s.Addr, time.Second); err == nil {
		conn.Close()
		t.Fatalf("something still listens on %s after Stop", s.Addr)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestNewStopsAtCleanup(t *testing.T) {
	var s *Server
	t.Run("inner", func(t *testing.T) {
		s = New(t)
		if err := s.Client().Ping(context.Background()).Err(); err != nil {
			t.Fatalf("PING: %v", err)
		}
	})
	if !s.Exited() {
		t.Fatal("server still running after the test that started it ended")
	}
}

func TestStartWithoutBinaryExplainsInstall(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Start("")
	if err == nil || err.Error() != InstallHint {
		t.Fatalf("Start without redis-server = %v, want %q", err, InstallHint)
	}
}

func TestRestartComesBackEmptyOnTheSameAddress(t *testing.T) {
	s := New(t)
	ctx := context.Background()
	c := s.Client()
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err == nil {
		t.Fatal("Restart of a running server succeeded")
	}
	addr := s.Addr
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if s.Addr != addr || s.Exited() {
		t.Fatalf("restarted on %s (exited %v), want %s", s.Addr, s.Exited(), addr)
	}
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("after restart: exists = %d, %v; want an empty server", n, err)
	}
}

func TestNewClusterServesAClusterClient(t *testing.T) {
	s := NewCluster(t)
	ctx := context.Background()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{s.Addr}})
	defer c.Close()
	// Keys sharing a hash tag can be written in one transaction ...
	if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "{cat}:a", "1", 0)
		p.Set(ctx, "{cat}:b", "2", 0)
		return nil
	}); err != nil {
		t.Fatalf("MULTI on one slot: %v", err)
	}
	// ... keys in different slots cannot: this is a real cluster.
	err := c.Do(ctx, "MSET", "a", "1", "b", "2").Err()
	if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("MSET across slots = %v, want a CROSSSLOT error", err)
	}
}
