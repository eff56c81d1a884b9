package gateway

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/mcptest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/redistest"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// publishedIn waits until the catalog's version in rc holds n tools.
func publishedIn(t *testing.T, rc redis.UniversalClient, ns, name string, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("catalog %s/%s published with %d tools", ns, name, n), func() bool {
		snap, err := contract.Read(context.Background(), rc, contract.Keys{Prefix: contract.DefaultPrefix(ns, name)})
		if err != nil {
			return false
		}
		d, err := snap.Document()
		return err == nil && d != nil && len(d.Tools) == n
	})
}

// A 2025-11-25 session keeps being answered while the catalog's Redis
// fails over: its replica answers the sessions it has seen from what it
// saw while no primary answers, so not one request of a client busy
// throughout the failover fails: listings, searches and calls proxied
// upstream; the catalog, already loaded, keeps answering too.
func TestSessionsRideThroughAFailover(t *testing.T) {
	for _, mode := range []v1alpha1.RedisMode{v1alpha1.RedisModeSentinel, v1alpha1.RedisModeCluster} {
		t.Run(string(mode), func(t *testing.T) {
			ns := newNamespace(t)
			srv := mcptest.New(t, mcptest.Options{Name: "echo"})
			srv.Tool("echo", "Echo the arguments.", nil, nil)
			tc := testCatalog(ns, "ha", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOn})
			var kill func() time.Time
			switch mode {
			case v1alpha1.RedisModeSentinel:
				set := redistest.NewSentinels(t)
				tc.Spec.Redis = v1alpha1.RedisSpec{Mode: mode, MasterName: set.MasterName, Addresses: set.Addrs()}
				kill = func() time.Time { _, at := set.KillPrimary(t); return at }
			default:
				cluster := redistest.NewHACluster(t)
				tc.Spec.Redis = v1alpha1.RedisSpec{Mode: mode, Addresses: cluster.Addrs()}
				kill = func() time.Time {
					_, at := cluster.KillOwner(t, contract.Keys{Prefix: contract.DefaultPrefix(ns, "ha")}.Head())
					return at
				}
			}
			rc := contract.NewClient(contract.ClientOptions{Addresses: tc.Spec.Redis.Addresses, Mode: string(mode), MasterName: tc.Spec.Redis.MasterName})
			t.Cleanup(func() { _ = rc.Close() })
			create(t, tc)
			create(t, append(standardTools(ns, "ha"), testTool(ns, "ha", "echo", "Echo the arguments back.", upstream(srv.URL, "echo")))...)
			publishedIn(t, rc, ns, "ha", 6)
			_, base := ownGateway(t, Limits{})
			cs := connectSession(t, base, ns, "ha", aliceToken)

			var (
				requests atomic.Int64
				mu       sync.Mutex
				failures []string
				slowest  time.Duration
			)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					requests.Add(1)
					began := time.Now()
					// A listing, a search and a call proxied upstream.
					var err error
					switch requests.Load() % 3 {
					case 0:
						_, err = cs.ListTools(context.Background(), nil)
					case 1:
						err = callFailure(cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "tool_search", Arguments: map[string]any{"query": "weather in Oslo"}}))
					default:
						err = callFailure(cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "tool_call", Arguments: map[string]any{"name": "echo", "arguments": map[string]any{}}}))
					}
					mu.Lock()
					slowest = max(slowest, time.Since(began))
					if err != nil {
						failures = append(failures, err.Error())
					}
					mu.Unlock()
					time.Sleep(20 * time.Millisecond)
				}
			})
			killed := time.Now()
			promoted := kill()
			// Until the session has been answered through Redis again.
			before := requests.Load()
			waitFor(t, "requests after the promotion", func() bool { return requests.Load() > before+20 })
			close(stop)
			wg.Wait()
			t.Logf("%s: %d session requests across the failover (promoted %s after the kill), %d failed, the slowest took %s", mode, requests.Load(), promoted.Sub(killed).Round(time.Millisecond), len(failures), slowest.Round(time.Millisecond))
			if len(failures) > 0 {
				t.Fatalf("%d of %d requests failed during the failover, the first: %s", len(failures), requests.Load(), failures[0])
			}
		})
	}
}

// callFailure is a call's error, or its result's when it is one.
func callFailure(res *mcp.CallToolResult, err error) error {
	if err != nil {
		return err
	}
	if res.IsError {
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return fmt.Errorf("tool error: %s", b.String())
	}
	return nil
}

// After Redis restarts empty, a session it no longer knows is answered
// 404, as the transport specifies for an unknown session, so the client
// opens a new one.
func TestASessionRedisForgotIsNotFound(t *testing.T) {
	ns := newNamespace(t)
	own := redistest.New(t)
	tc := testCatalog(ns, "forgetful", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOff})
	tc.Spec.Redis = v1alpha1.RedisSpec{Addresses: []string{own.Addr}}
	rc := contract.NewClient(contract.ClientOptions{Addresses: []string{own.Addr}})
	t.Cleanup(func() { _ = rc.Close() })
	create(t, tc)
	create(t, standardTools(ns, "forgetful")...)
	publishedIn(t, rc, ns, "forgetful", 5)
	_, base := ownGateway(t, Limits{})
	cs := connectSession(t, base, ns, "forgetful", aliceToken)
	if code, body := postSession(t, base, ns, "forgetful", cs.ID(), `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`); code != http.StatusOK {
		t.Fatalf("the session before the restart: %d %s", code, body)
	}
	if err := own.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := own.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the session to be unknown", func() bool {
		code, _ := postSession(t, base, ns, "forgetful", cs.ID(), `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`)
		return code == http.StatusNotFound
	})
}

// While Redis does not answer, the replica that has seen a session
// answers it from what it saw; a replica that has not waits briefly and
// then tells the client to retry (503, Retry-After), as every replica did
// for every session before.
func TestAKnownSessionIsAnsweredWhileRedisIsDown(t *testing.T) {
	ns := newNamespace(t)
	own := redistest.New(t)
	tc := testCatalog(ns, "down", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOff})
	tc.Spec.Redis = v1alpha1.RedisSpec{Addresses: []string{own.Addr}}
	rc := contract.NewClient(contract.ClientOptions{Addresses: []string{own.Addr}})
	t.Cleanup(func() { _ = rc.Close() })
	create(t, tc)
	create(t, standardTools(ns, "down")...)
	publishedIn(t, rc, ns, "down", 5)
	_, seen := ownGateway(t, Limits{})
	_, other := ownGateway(t, Limits{})
	cs := connectSession(t, seen, ns, "down", aliceToken)
	// The other replica has the catalog loaded, not the session.
	if _, err := connectWith(t, other, ns, "down", aliceToken, "", nil, "").ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	const list = `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`
	if err := own.Kill(); err != nil {
		t.Fatal(err)
	}
	if code, body := postSession(t, seen, ns, "down", cs.ID(), list); code != http.StatusOK || !strings.Contains(body, "get_weather") {
		t.Errorf("the replica that saw the session, Redis down: %d %s", code, body)
	}
	if code, body := postSession(t, other, ns, "down", cs.ID(), list); code != http.StatusServiceUnavailable {
		t.Errorf("the replica that did not, Redis down: %d %s, want 503", code, body)
	}
}
