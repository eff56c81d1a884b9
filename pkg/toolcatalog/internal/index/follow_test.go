package index

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolcatalog/tool-catalog-operator/internal/published/versions"

	"github.com/redis/go-redis/v9"

	"github.com/toolcatalog/tool-catalog-operator/internal/testing/redistest"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// server is the package's redis-server, started by the first test that
// needs one.
var server = redistest.NewShared()

func TestMain(m *testing.M) { os.Exit(server.Main(m)) }

// publish writes a version of the fixture catalog whose get_weather
// description carries the version, as the operator would.
func publish(t *testing.T, c redis.UniversalClient, k contract.Keys, channel string, version int64, notify bool) *contract.Document {
	t.Helper()
	return publishAs(t, c, k, channel, "uid-1", version, notify)
}

// publishAs publishes a version of the catalog object with that UID.
func publishAs(t *testing.T, c redis.UniversalClient, k contract.Keys, channel, uid string, version int64, notify bool) *contract.Document {
	t.Helper()
	return publishWith(t, c, k, channel, uid, version, notify, contract.SearchDefaults{Method: "hybrid", TopK: 3})
}

// publishWith publishes a version with these search settings.
func publishWith(t *testing.T, c redis.UniversalClient, k contract.Keys, channel, uid string, version int64, notify bool, search contract.SearchDefaults) *contract.Document {
	t.Helper()
	return publishCatalog(t, c, k, channel, "ns/follow", uid, version, notify, search)
}

// publishCatalog publishes a version of the catalog of that name.
func publishCatalog(t *testing.T, c redis.UniversalClient, k contract.Keys, channel, catalog, uid string, version int64, notify bool, search contract.SearchDefaults) *contract.Document {
	t.Helper()
	ctx := context.Background()
	cat := buildFixture(t, fixture, search)
	doc := *cat.Document
	doc.Tools = append([]contract.Tool(nil), doc.Tools...)
	doc.Tools[0].Description = fmt.Sprintf("Weather, version %d.", version)
	for i := range doc.Tools {
		doc.Tools[i].SpecHash = fmt.Sprintf("%s-%d", doc.Tools[i].Name, len(doc.Tools[i].Description))
	}
	doc.Catalog = catalog
	doc.CatalogUID = uid
	if err := doc.Seal(); err != nil {
		t.Fatal(err)
	}
	doc.Version = version
	snap, err := contract.Read(ctx, c, k)
	if err != nil {
		t.Fatal(err)
	}
	prev, err := snap.Document()
	if err != nil {
		t.Fatal(err)
	}
	vectors, meta := map[string][]byte{}, map[string][]byte{}
	for _, tool := range doc.Tools {
		v := cat.Vectors[tool.Name]
		vectors[tool.Name] = contract.EncodeVector(v)
		m, _ := (&contract.Metadata{SpecHash: tool.SpecHash, Description: tool.Description, Model: doc.Embedding.Model, Dimensions: len(v), SyntheticQueries: []string{"q"}}).Marshal()
		meta[tool.Name] = m
	}
	if err := versions.Write(ctx, c, k, versions.Update{ExpectVersion: version - 1, Document: &doc, Previous: prev, Rewrite: prev == nil, Vectors: vectors, Metadata: meta, Retain: 5}); err != nil {
		t.Fatalf("writing version %d: %v", version, err)
	}
	if notify {
		notice, _ := json.Marshal(contract.NoticeOf(&doc))
		if err := versions.Notify(ctx, c, channel, notice); err != nil {
			t.Fatal(err)
		}
	}
	return &doc
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestLoad(t *testing.T) {
	c := server.Get(t).Client()
	defer c.Close()
	k := Keys("ns", t.Name())
	if _, err := Load(context.Background(), c, k); !errors.Is(err, ErrNotPublished) {
		t.Fatalf("Load of an absent catalog: %v, want ErrNotPublished", err)
	}
	doc := publish(t, c, k, "unused", 1, false)
	cat, err := Load(context.Background(), c, k)
	if err != nil {
		t.Fatal(err)
	}
	if cat.Version() != 1 || cat.SchemaHash() != doc.SchemaHash || len(cat.Vectors) != len(fixture) {
		t.Fatalf("loaded version %d, %d vectors", cat.Version(), len(cat.Vectors))
	}
	if got := firstRanked(search(t, cat, "will it rain tomorrow", Options{Method: Semantic, Embedder: lexicalEmbedder()})); got != "get_weather" {
		t.Fatalf("search on the loaded catalog: top %s", got)
	}
}

// The metadata, which no search reads, is read by name from the version
// served, and what does not parse is left out.
func TestReadMetadata(t *testing.T) {
	ctx := context.Background()
	c := server.Get(t).Client()
	defer c.Close()
	k := Keys("ns", t.Name())
	doc := publish(t, c, k, "unused", 1, false)
	names := make([]string, len(doc.Tools))
	for i, tool := range doc.Tools {
		names[i] = tool.Name
	}
	read := func() map[string]*contract.Metadata {
		t.Helper()
		m, err := ReadMetadata(ctx, c, k, append(names, "ghost_tool")...)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	got := read()
	for _, tool := range doc.Tools {
		if m := got[tool.Name]; m == nil || m.SpecHash != tool.SpecHash || len(m.SyntheticQueries) == 0 {
			t.Fatalf("metadata of %s: %+v, want spec hash %s and its queries", tool.Name, m, tool.SpecHash)
		}
	}
	if len(got) != len(doc.Tools) {
		t.Fatalf("%d metadata read for %d tools", len(got), len(doc.Tools))
	}

	// Metadata that does not parse is left out.
	if err := c.HSet(ctx, k.Metadata(), "get_weather", "{not json").Err(); err != nil {
		t.Fatal(err)
	}
	if m, ok := read()["get_weather"]; ok {
		t.Errorf("unparsable metadata read as %+v", m)
	}

	// While the catalog is pinned (the operator's copy of the version
	// under P:pinned), the pinned copy's metadata is read.
	pinned, _ := (&contract.Metadata{SpecHash: "pinned", Description: "as pinned", Model: "m"}).Marshal()
	if err := c.HSet(ctx, k.Pinned().Metadata(), "get_weather", pinned).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, k.Pinned().Version(), "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if m := read()["get_weather"]; m == nil || m.SpecHash != "pinned" {
		t.Errorf("metadata of the pinned version read as %+v, want the pinned copy's", m)
	}
}

// Load reads the vectors after the document, in parts: a version
// published meanwhile is noticed, and the catalog read again, so a
// document is never served with another version's vectors. One published
// during every read fails the load, saying so.
func TestLoadRereadsAVersionPublishedMeanwhile(t *testing.T) {
	ctx := context.Background()
	k := Keys("ns", t.Name())
	writer := server.Client(t)
	publish(t, writer, k, "", 1, false)
	c := server.Client(t)
	reads := &redistest.BeforeEach{Name: "hmget", Run: func(n int) {
		if n == 1 {
			publish(t, writer, k, "", 2, false)
		}
	}}
	c.AddHook(reads)
	cat, err := Load(ctx, c, k)
	if err != nil {
		t.Fatal(err)
	}
	if reads.N < 2 || cat.Version() != 2 || cat.Document.Tools[0].Description != "Weather, version 2." {
		t.Fatalf("after %d vector reads: version %d, %q", reads.N, cat.Version(), cat.Document.Tools[0].Description)
	}

	always := &redistest.BeforeEach{Name: "hmget"}
	always.Run = func(n int) { publish(t, writer, k, "", 2+int64(n), false) }
	c2 := server.Client(t)
	c2.AddHook(always)
	if _, err := Load(ctx, c2, k); err == nil || !strings.Contains(err.Error(), "published during each of 3 reads") {
		t.Fatalf("a catalog published to during every read: %v", err)
	}
}

// followCase publishes version 1 of a catalog named after the test and
// follows it with a periodic recheck too slow to matter, so only notices and
// reconnects can bring newer versions.
type followCase struct {
	ctx     context.Context
	c       *redis.Client
	k       contract.Keys
	channel string
}

func newFollowCase(t *testing.T) *followCase {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	fc := &followCase{ctx: ctx, c: server.Client(t), k: Keys("ns", t.Name()), channel: "updates:" + t.Name()}
	publish(t, fc.c, fc.k, fc.channel, 1, false)
	return fc
}

func (fc *followCase) follow(t *testing.T, onUpdate func(*Catalog)) *Follower {
	t.Helper()
	f, err := Follow(fc.ctx, fc.c, fc.k, FollowOptions{Channel: fc.channel, RecheckInterval: time.Hour, OnUpdate: onUpdate})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestFollowReloadsNewerVersionsOnly(t *testing.T) {
	fc := newFollowCase(t)
	ctx, c, k, channel := fc.ctx, fc.c, fc.k, fc.channel
	var updates atomic.Int64
	f := fc.follow(t, func(*Catalog) { updates.Add(1) })
	if f.Current().Version() != 1 {
		t.Fatalf("initial version %d", f.Current().Version())
	}

	v2 := publish(t, c, k, channel, 2, true)
	eventually(t, "version 2", func() bool { return f.Current().Version() == 2 })
	if f.Current().SchemaHash() != v2.SchemaHash {
		t.Fatal("schema hash of version 2 not loaded")
	}

	// An old notice and a duplicate change nothing.
	before := f.Reloads()
	for _, n := range []contract.Notice{{Catalog: "ns/follow", Version: 1}, {Catalog: "ns/follow", Version: 2}, {Catalog: "ns/other", Version: 99}} {
		raw, _ := json.Marshal(n)
		if err := c.Publish(ctx, channel, raw).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Publish(ctx, channel, "not json").Err(); err != nil {
		t.Fatal(err)
	}
	// A marker version proves the notices above were processed first.
	publish(t, c, k, channel, 3, true)
	eventually(t, "version 3", func() bool { return f.Current().Version() == 3 })
	if got := f.Reloads() - before; got != 1 {
		t.Fatalf("%d reloads for stale, duplicate, foreign and malformed notices plus version 3, want 1", got)
	}
	if updates.Load() != 3 {
		t.Fatalf("OnUpdate called %d times, want 3 (v1, v2, v3)", updates.Load())
	}
}

func TestFollowRechecksAfterReconnect(t *testing.T) {
	fc := newFollowCase(t)
	ctx, c, k, channel := fc.ctx, fc.c, fc.k, fc.channel
	f := fc.follow(t, nil)

	// Drop the subscriber's connection, and publish version 2 while it is
	// gone, with no notice anybody could receive.
	if err := c.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	publish(t, c, k, channel, 2, false)
	eventually(t, "version 2 after the reconnect", func() bool { return f.Current().Version() == 2 })
}

func TestFollowerCheckDetectsStaleCatalog(t *testing.T) {
	fc := newFollowCase(t)
	ctx, c, k := fc.ctx, fc.c, fc.k
	f := fc.follow(t, nil)
	if reloaded, err := f.Check(ctx); err != nil || reloaded {
		t.Fatalf("Check with nothing new: %v, %v", reloaded, err)
	}
	publish(t, c, k, "none", 2, false)
	if reloaded, err := f.Check(ctx); err != nil || !reloaded || f.Current().Version() != 2 {
		t.Fatalf("Check after version 2: %v, %v, version %d", reloaded, err, f.Current().Version())
	}
}

// A catalog deleted and created again starts over at version 1: followers
// must take it, by notice or by the periodic check, although its version
// is lower than theirs.
func TestFollowTakesARecreatedCatalog(t *testing.T) {
	for _, notify := range []bool{true, false} {
		t.Run(fmt.Sprintf("notice=%v", notify), func(t *testing.T) {
			fc := newFollowCase(t)
			ctx, c, k, channel := fc.ctx, fc.c, fc.k, fc.channel
			f := fc.follow(t, nil)
			publish(t, c, k, channel, 2, true)
			publish(t, c, k, channel, 3, true)
			eventually(t, "version 3", func() bool { return f.Current().Version() == 3 })

			if err := versions.Delete(ctx, c, k); err != nil {
				t.Fatal(err)
			}
			recreated := publishAs(t, c, k, channel, "uid-2", 1, notify)
			if !notify {
				if reloaded, err := f.Check(ctx); err != nil || !reloaded {
					t.Fatalf("Check after the catalog was recreated: %v, %v", reloaded, err)
				}
			}
			eventually(t, "the recreated catalog", func() bool { return f.Current().Document.CatalogUID == "uid-2" })
			if f.Current().Version() != 1 || f.Current().SchemaHash() != recreated.SchemaHash {
				t.Fatalf("holding version %d %s, want the recreated version 1", f.Current().Version(), f.Current().SchemaHash())
			}
		})
	}
}

// An agent may start before the operator first publishes its catalog.
func TestFollowWaitsForTheFirstPublish(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := server.Get(t).Client()
	defer c.Close()
	k := Keys("ns", t.Name())
	channel := "updates:" + t.Name()
	if _, err := Follow(ctx, c, k, FollowOptions{Channel: channel}); !errors.Is(err, ErrNotPublished) {
		t.Fatalf("Follow of an unpublished catalog without WaitForPublish: %v", err)
	}
	f, err := Follow(ctx, c, k, FollowOptions{Channel: channel, RecheckInterval: time.Hour, WaitForPublish: true})
	if err != nil {
		t.Fatal(err)
	}
	if f.Current() != nil {
		t.Fatal("a catalog is current before it was published")
	}
	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	defer stop()
	if _, waitErr := f.Wait(short); !errors.Is(waitErr, context.DeadlineExceeded) {
		t.Fatalf("Wait before the first publish: %v", waitErr)
	}
	publish(t, c, k, channel, 1, true)
	got, err := f.Wait(ctx)
	if err != nil || got.Version() != 1 {
		t.Fatalf("Wait: %v, %v", got, err)
	}
	publish(t, c, k, channel, 2, true)
	eventually(t, "version 2", func() bool { return f.Current().Version() == 2 })
}

func TestLoadAndFollowOnRedisCluster(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cluster := redistest.NewCluster(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{cluster.Addr}})
	defer c.Close()
	k := Keys("team-a", "tools")
	// The operator's MULTI/EXEC over a catalog's keys works on a cluster
	// because they share the hash tag.
	publish(t, c, k, "updates", 1, false)
	f, err := Follow(ctx, c, k, FollowOptions{Channel: "updates", RecheckInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	publish(t, c, k, "updates", 2, true)
	eventually(t, "version 2 on the cluster", func() bool { return f.Current().Version() == 2 })
	// A prefix without a hash tag spreads keys over slots, and the
	// transaction is refused rather than half-applied.
	bad := contract.Keys{Prefix: "notag"}
	err = versions.Write(ctx, c, bad, versions.Update{Document: &contract.Document{Version: 1}, Rewrite: true, Retain: 1, Vectors: map[string][]byte{"a": {0, 0, 0, 0}}})
	if err == nil {
		t.Fatal("a cross-slot catalog write succeeded on a cluster")
	}
	if n, _ := c.Exists(ctx, bad.Catalog(), bad.Version()).Result(); n != 0 {
		t.Fatalf("a refused write left %d keys", n)
	}
}

func TestUsageCounts(t *testing.T) {
	ctx := context.Background()
	c := server.Get(t).Client()
	defer c.Close()
	k := Keys("ns", t.Name())
	cat := buildFixture(t, fixture, contract.SearchDefaults{})
	for _, principal := range []string{"user:ana", "user:bo", "user:cy"} {
		for _, tool := range []string{"get_weather", "send_email", "send_email", "run_sql", "send_email", "run_sql", "not_in_the_catalog", "not_in_the_catalog", "not_in_the_catalog"} {
			if err := RecordUsage(ctx, c, k, cat, principal, tool); err != nil {
				t.Fatal(err)
			}
		}
	}
	cat.Document.Search.AlwaysIncludeTopNUsed = 3
	top, err := MostUsed(ctx, c, k, cat)
	if err != nil || !slices.Equal(top, []string{"send_email", "run_sql", "get_weather"}) {
		t.Fatalf("MostUsed = %v, %v; want [send_email run_sql get_weather], and no tool the catalog does not hold", top, err)
	}
}

// A consumer told its catalog is stale reloads only when it really is, and
// can read a retained version's document.
func TestLoadIfChangedAndLoadVersion(t *testing.T) {
	ctx := context.Background()
	c := server.Get(t).Client()
	defer c.Close()
	k := Keys("ns", t.Name())
	if _, _, err := LoadIfChanged(ctx, c, k, "any"); !errors.Is(err, ErrNotPublished) {
		t.Fatalf("unpublished: %v", err)
	}
	v1 := publish(t, c, k, "none", 1, false)
	v2 := publish(t, c, k, "none", 2, false)

	cat, changed, err := LoadIfChanged(ctx, c, k, v2.SchemaHash)
	if err != nil || changed || cat != nil {
		t.Fatalf("holding the current hash: %v, %v, %v", cat, changed, err)
	}
	cat, changed, err = LoadIfChanged(ctx, c, k, v1.SchemaHash)
	if err != nil || !changed || cat.Version() != 2 || len(cat.Vectors) != len(fixture) {
		t.Fatalf("holding an older hash: %v, %v", changed, err)
	}

	old, err := LoadVersion(ctx, c, k, 1)
	if err != nil || old.Version != 1 || old.SchemaHash != v1.SchemaHash {
		t.Fatalf("version 1: %+v, %v", old, err)
	}
	if _, err := LoadVersion(ctx, c, k, 7); !errors.Is(err, ErrVersionNotRetained) || !strings.Contains(err.Error(), "version 7") {
		t.Fatalf("version 7: %v", err)
	}
}

// A follower that expects a catalog refuses a version another catalog
// published under its keys (the head names another catalog, or another
// UID) and keeps serving the last good one; the next genuine version is
// loaded. Without an expectation the same foreign version would be loaded,
// which proves the notice reached it.
func TestFollowRefusesAForeignCatalog(t *testing.T) {
	fc := newFollowCase(t)
	var refused atomic.Int64
	f, err := Follow(fc.ctx, fc.c, fc.k, FollowOptions{Channel: fc.channel, RecheckInterval: time.Hour,
		Catalog: "ns/follow", CatalogUID: "uid-1",
		OnError: func(err error) {
			if errors.Is(err, ErrForeignCatalog) {
				refused.Add(1)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	open := fc.follow(t, nil)
	publishAs(t, fc.c, fc.k, fc.channel, "uid-evil", 2, true)
	eventually(t, "the follower to refuse version 2", func() bool { return refused.Load() == 1 })
	eventually(t, "the unchecked follower to load version 2", func() bool { return open.Current().Version() == 2 })
	if cur := f.Current(); cur.Version() != 1 || cur.Document.CatalogUID != "uid-1" {
		t.Fatalf("serving version %d of %s after a foreign version", cur.Version(), cur.Document.CatalogUID)
	}
	publishAs(t, fc.c, fc.k, fc.channel, "uid-1", 3, true)
	eventually(t, "the follower to load the genuine version 3", func() bool { return f.Current().Version() == 3 })

	// Started on a foreign version, it waits for its own.
	ctx := fc.ctx
	other := Keys("ns", t.Name()+"-other")
	publishAs(t, fc.c, other, fc.channel, "uid-evil", 1, false)
	if _, followErr := Follow(ctx, fc.c, other, FollowOptions{Channel: fc.channel, CatalogUID: "uid-1"}); !errors.Is(followErr, ErrForeignCatalog) {
		t.Fatalf("following a foreign catalog: %v", followErr)
	}
	w, err := Follow(ctx, fc.c, other, FollowOptions{Channel: fc.channel, CatalogUID: "uid-1", WaitForPublish: true})
	if err != nil || w.Current() != nil {
		t.Fatalf("waiting follower: %v, current %v", err, w.Current())
	}
}

// A follower of a catalog that includes its most used tools reads them
// with each version and again as uses move, leaving out tools the
// catalog does not hold; a version that asks for none has none.
func TestFollowerReadsTheMostUsedTools(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := server.Get(t).Client()
	defer c.Close()
	k := Keys("ns", t.Name())
	ch := "chan-" + t.Name()
	use := func(tool string, principals int) {
		t.Helper()
		for i := range principals {
			if _, err := contract.RecordUse(ctx, c, k, fmt.Sprintf("user:%d", i), tool, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	use("not_in_the_catalog", 9)
	use("run_sql", 5)
	use("send_email", 3)
	use("get_weather", 1)
	publishWith(t, c, k, ch, "uid-1", 1, false, contract.SearchDefaults{Method: "hybrid", TopK: 3, AlwaysIncludeTopNUsed: 2})
	changed := make(chan *Catalog, 8)
	f, err := Follow(ctx, c, k, FollowOptions{Channel: ch, UsageInterval: 20 * time.Millisecond, OnMostUsed: func(c *Catalog) { changed <- c }})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.MostUsed(); !slices.Equal(got, []string{"run_sql", "send_email"}) {
		t.Fatalf("popular at load %v, want [run_sql send_email]", got)
	}
	use("get_weather", 8)
	select {
	case cat := <-changed:
		if got := f.MostUsed(); cat == nil || !slices.Equal(got, []string{"get_weather", "run_sql"}) {
			t.Fatalf("popular after get_weather's uses %v", got)
		}
	case <-ctx.Done():
		t.Fatal("OnMostUsed was not called after the uses moved")
	}
	publishWith(t, c, k, ch, "uid-1", 2, false, contract.SearchDefaults{Method: "hybrid", TopK: 3})
	if _, err := f.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.MostUsed(); got != nil || f.Current().Version() != 2 {
		t.Fatalf("a version that includes no used tools: popular %v (version %d)", got, f.Current().Version())
	}
}

// A pinned catalog is served at its pinned version: a follower moves to
// it when the pin is announced, stays there while newer versions are
// published, and moves to the newest when the pin is cleared; a periodic
// check finds a pin set at the current version and cleared again.
func TestFollowServesThePinnedVersion(t *testing.T) {
	fc := newFollowCase(t)
	ctx, c, k, channel := fc.ctx, fc.c, fc.k, fc.channel
	var mu sync.Mutex
	var seen []string
	f := fc.follow(t, func(cat *Catalog) {
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%d%s", cat.Version(), map[bool]string{true: "p"}[cat.Pinned]))
		mu.Unlock()
	})
	v1, err := LoadVersion(ctx, c, k, 1)
	if err != nil {
		t.Fatal(err)
	}
	v2 := publish(t, c, k, channel, 2, true)
	eventually(t, "version 2", func() bool { return f.Current().Version() == 2 })
	announce := func(d *contract.Document, pinned int64) {
		t.Helper()
		n := contract.NoticeOf(d)
		n.Pinned = pinned
		raw, _ := json.Marshal(n)
		if err := versions.Notify(ctx, c, channel, raw); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := versions.Pin(ctx, c, k, v2, 1, ""); err != nil {
		t.Fatal(err)
	}
	announce(v2, 1)
	eventually(t, "the pinned version 1", func() bool { return f.Current().Version() == 1 && f.Current().Pinned })
	if cur := f.Current(); cur.SchemaHash() != v1.SchemaHash || len(cur.Vectors) != len(fixture) {
		t.Fatalf("pinned at 1: schema %s (want %s), %d vectors", cur.SchemaHash(), v1.SchemaHash, len(cur.Vectors))
	}
	if got := firstRanked(search(t, f.Current(), "will it rain tomorrow", Options{Method: Semantic, Embedder: lexicalEmbedder()})); got != "get_weather" {
		t.Fatalf("search on the pinned version: top %s", got)
	}

	// Version 3 is published and announced, and not served; moving the
	// pin to 2 afterwards proves its notice was handled first.
	v3 := publish(t, c, k, channel, 3, true)
	if _, err := versions.Pin(ctx, c, k, v3, 2, ""); err != nil {
		t.Fatal(err)
	}
	announce(v3, 2)
	eventually(t, "the pinned version 2", func() bool { return f.Current().Version() == 2 })
	if _, err := versions.Unpin(ctx, c, k); err != nil {
		t.Fatal(err)
	}
	announce(v3, 0)
	eventually(t, "version 3 once unpinned", func() bool { return f.Current().Version() == 3 && !f.Current().Pinned })

	// Pinned at the current version and unpinned, with no notice: the
	// periodic check follows both.
	if _, err := versions.Pin(ctx, c, k, v3, 3, ""); err != nil {
		t.Fatal(err)
	}
	if reloaded, err := f.Check(ctx); err != nil || !reloaded || !f.Current().Pinned {
		t.Fatalf("check after pinning at the current version: reloaded %v, %v, pinned %v", reloaded, err, f.Current().Pinned)
	}
	if reloaded, err := f.Check(ctx); err != nil || reloaded {
		t.Fatalf("second check: reloaded %v, %v", reloaded, err)
	}
	if _, err := versions.Unpin(ctx, c, k); err != nil {
		t.Fatal(err)
	}
	if reloaded, err := f.Check(ctx); err != nil || !reloaded || f.Current().Pinned {
		t.Fatalf("check after unpinning: reloaded %v, %v, pinned %v", reloaded, err, f.Current().Pinned)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(seen, " "); got != "1 2 1p 2p 3 3p 3" {
		t.Fatalf("versions served: %s, want 1 2 1p 2p 3 3p 3", got)
	}
}

// Followers of catalogs on one channel share one subscription: each is
// handed its catalog's notices, all of them recheck after a reconnect,
// and the subscription ends with the last follower.
func TestFollowersShareNotices(t *testing.T) {
	c := server.Client(t)
	channel := "updates:" + t.Name()
	var errs atomic.Int64
	notices := NewNotices(c, func(error) { errs.Add(1) })
	numsub := func() int64 {
		n, err := c.PubSubNumSub(t.Context(), channel).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n[channel]
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	search := contract.SearchDefaults{Method: "hybrid", TopK: 3}
	names := []string{"ns/a", "ns/b", "ns/c"}
	keys := map[string]contract.Keys{}
	followers := map[string]*Follower{}
	for _, name := range names {
		keys[name] = Keys("ns", t.Name()+"-"+name[3:])
		publishCatalog(t, c, keys[name], channel, name, "uid-1", 1, false, search)
		f, err := Follow(ctx, c, keys[name], FollowOptions{Channel: channel, Catalog: name, CatalogUID: "uid-1", RecheckInterval: time.Hour, Notices: notices})
		if err != nil {
			t.Fatal(err)
		}
		followers[name] = f
	}
	if got := numsub(); got != 1 {
		t.Fatalf("%d subscriptions to %s for %d followers, want 1", got, channel, len(names))
	}

	// Each version reaches its own follower.
	publishCatalog(t, c, keys["ns/b"], channel, "ns/b", "uid-1", 2, true, search)
	eventually(t, "ns/b at version 2", func() bool { return followers["ns/b"].Current().Version() == 2 })
	if err := c.Publish(t.Context(), channel, "not json").Err(); err != nil {
		t.Fatal(err)
	}
	publishCatalog(t, c, keys["ns/a"], channel, "ns/a", "uid-1", 2, true, search)
	eventually(t, "ns/a at version 2", func() bool { return followers["ns/a"].Current().Version() == 2 })
	if followers["ns/c"].Current().Version() != 1 || followers["ns/b"].Reloads() != 2 {
		t.Fatalf("ns/c at version %d, ns/b reloaded %d times: another catalog's notice moved them", followers["ns/c"].Current().Version(), followers["ns/b"].Reloads())
	}
	if errs.Load() != 1 {
		t.Fatalf("%d errors reported, want 1 (the malformed notice)", errs.Load())
	}

	// Versions published while the shared connection is gone, with no
	// notice anyone could receive, are found when it comes back.
	if err := c.Do(t.Context(), "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		publishCatalog(t, c, keys[name], channel, name, "uid-1", followers[name].Current().Version()+1, false, search)
	}
	eventually(t, "every follower to recheck after the reconnect", func() bool {
		return followers["ns/a"].Current().Version() == 3 && followers["ns/b"].Current().Version() == 3 && followers["ns/c"].Current().Version() == 2
	})

	cancel()
	eventually(t, "the subscription to end with the last follower", func() bool { return notices.subscribed() == 0 && numsub() == 0 })
}

// A follower that stops reading (a slow OnUpdate, a flood of notices for
// its catalog) does not hold up the shared subscription: the other
// catalogs' notices still reach their followers, and the slow one catches
// up when it reads again.
func TestSharedNoticesDoNotWaitForASlowFollower(t *testing.T) {
	c := server.Client(t)
	channel := "updates:" + t.Name()
	notices := NewNotices(c, nil)
	search := contract.SearchDefaults{Method: "hybrid", TopK: 3}
	slowKeys, fastKeys := Keys("ns", t.Name()+"-slow"), Keys("ns", t.Name()+"-fast")
	publishCatalog(t, c, slowKeys, channel, "ns/slow", "uid-1", 1, false, search)
	publishCatalog(t, c, fastKeys, channel, "ns/fast", "uid-1", 1, false, search)
	block, blocked := make(chan struct{}), make(chan struct{})
	var once sync.Once
	follow := func(keys contract.Keys, name string, onUpdate func(*Catalog)) *Follower {
		f, err := Follow(t.Context(), c, keys, FollowOptions{Channel: channel, Catalog: name, CatalogUID: "uid-1", RecheckInterval: time.Hour, Notices: notices, OnUpdate: onUpdate})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	slow := follow(slowKeys, "ns/slow", func(cat *Catalog) {
		if cat.Version() >= 2 {
			once.Do(func() { close(blocked) })
			<-block
		}
	})
	fast := follow(fastKeys, "ns/fast", nil)

	publishCatalog(t, c, slowKeys, channel, "ns/slow", "uid-1", 2, true, search)
	<-blocked
	for i := range 4 * noticeBacklog {
		raw, _ := json.Marshal(contract.Notice{Catalog: "ns/slow", CatalogUID: "uid-1", Version: int64(100 + i)})
		if err := c.Publish(t.Context(), channel, raw).Err(); err != nil {
			t.Fatal(err)
		}
	}
	publishCatalog(t, c, fastKeys, channel, "ns/fast", "uid-1", 2, true, search)
	eventually(t, "ns/fast at version 2 while ns/slow's follower is stuck", func() bool { return fast.Current().Version() == 2 })

	publishCatalog(t, c, slowKeys, channel, "ns/slow", "uid-1", 3, false, search)
	close(block)
	eventually(t, "ns/slow to catch up", func() bool { return slow.Current().Version() == 3 })
}

// While Redis is down, a follower keeps serving what it loaded and its
// subscription's failures are reported ever less often (the retries
// double), not ten times a second; once Redis is back, it follows again.
func TestFollowerRidesThroughARedisOutage(t *testing.T) {
	own := redistest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := contract.NewClient(contract.ClientOptions{Addresses: []string{own.Addr}})
	t.Cleanup(func() { _ = c.Close() })
	k, channel := Keys("ns", "outage"), "updates:outage"
	publish(t, c, k, channel, 1, false)
	var mu sync.Mutex
	var errs []time.Time
	f, err := Follow(ctx, c, k, FollowOptions{Channel: channel, RecheckInterval: time.Hour, OnError: func(error) {
		mu.Lock()
		errs = append(errs, time.Now())
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := own.Kill(); err != nil {
		t.Fatal(err)
	}
	reported := func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(errs)
	}
	eventually(t, "five failures reported", func() bool { return len(reported()) >= 5 })
	got := reported()
	// Spaced 100 ms, 200 ms, 400 ms, ...: the fifth comes at least 700 ms
	// after the second (at 100 ms each, 300 ms).
	if gap := got[4].Sub(got[1]); gap < 700*time.Millisecond {
		t.Errorf("failures 2 to 5 reported within %s: the retries are not spaced", gap)
	}
	if f.Current().Version() != 1 {
		t.Errorf("serving version %d during the outage, want 1", f.Current().Version())
	}
	if err := own.Restart(); err != nil {
		t.Fatal(err)
	}
	// Restarted empty: a version published now, with no notice, is found
	// when the subscription comes back.
	publish(t, c, k, channel, 1, false)
	publish(t, c, k, channel, 2, false)
	eventually(t, "version 2 after the outage", func() bool { return f.Current().Version() == 2 })
}
