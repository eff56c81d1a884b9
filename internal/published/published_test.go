package published_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/redis/go-redis/v9"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalogconfig"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/internal/published"
	"github.com/toolcatalog/tool-catalog-operator/internal/redisconn"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/redistest"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// fixture is one catalog's published state on a real redis-server, with a
// clock the test moves.
type fixture struct {
	t     *testing.T
	srv   *redistest.Server
	cs    *published.States
	cfg   *catalogconfig.Config
	clock time.Time
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, srv: redistest.New(t), clock: time.Unix(1700000000, 0)}
	f.cs = &published.States{Pool: redisconn.NewPool(), Now: func() time.Time { return f.clock }, KeepMinTools: 1}
	f.cfg = &catalogconfig.Config{
		Keys:  contract.Keys{Prefix: "toolcatalog:ns:c"},
		Redis: redisconn.Options{Addresses: []string{f.srv.Addr}}, Channel: "toolcatalog:ns:c:events",
		Retain: 3, Resync: time.Hour, QueriesPerTool: 2,
	}
	t.Cleanup(func() { f.cs.Forget("ns/c") })
	return f
}

func (f *fixture) open() *published.State { return f.cs.Open("ns/c", "uid-1", f.cfg) }

// build runs the pipeline's pure and provider steps over tools named
// names, on top of stored, with the builtin offline providers.
func (f *fixture) build(st *published.State, stored catalog.Stored, names ...string) catalog.Build {
	f.t.Helper()
	sel := f.selection(st, names...)
	emb := embedding.LexicalEmbedder{}
	plans := catalog.Plan(catalog.PlanInput{Tools: sel.Tools, Stored: stored.Tools, Model: emb.Model(), QueriesPerTool: 2})
	refreshed := catalog.Refresh(context.Background(), catalog.Providers{Generator: embedding.TemplateQueryGenerator{}, Embedder: emb, Concurrency: 1}, plans, f.clock, catalog.Budget{Clock: f.cs.Now})
	b, err := catalog.BuildDocument(catalog.BuildInput{Catalog: "ns/c", CatalogUID: "uid-1", DocumentKey: f.cfg.Keys.Head(), Provider: "builtin", Model: emb.Model(),
		Plans: plans, Refreshed: refreshed, Stored: stored, Now: f.clock})
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// selection selects tools named names.
func (f *fixture) selection(st *published.State, names ...string) catalog.Selection {
	f.t.Helper()
	var tds []*v1alpha1.ToolDefinition
	for _, n := range names {
		tds = append(tds, &v1alpha1.ToolDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: n},
			Spec: v1alpha1.ToolDefinitionSpec{Name: n, Description: "does " + n,
				Parameters: &apiextensionsv1.JSON{Raw: []byte(`{"type":"object"}`)}},
		})
	}
	sel, err := st.Selector().Select(tds, nil, catalog.Made{At: f.clock})
	if err != nil {
		f.t.Fatal(err)
	}
	return sel
}

func (f *fixture) read(st *published.State, fresh bool) catalog.Stored {
	f.t.Helper()
	return f.readAs(st, catalog.Reading{Fresh: fresh})
}

func (f *fixture) readAs(st *published.State, how catalog.Reading) catalog.Stored {
	f.t.Helper()
	stored, err := st.Read(context.Background(), how, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	return stored
}

// corrupt overwrites a tool's stored vector behind the operator's back;
// the stamp (sizes, version, head) stays the same.
func (f *fixture) corrupt(tool string) {
	f.t.Helper()
	if err := f.srv.Client().HSet(context.Background(), f.cfg.Keys.Embeddings(), tool, "garbage").Err(); err != nil {
		f.t.Fatal(err)
	}
}

func TestPublishKeepsWhatItWroteUntilTheStampOrTheClockSaysOtherwise(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	st := f.open()
	empty := f.read(st, false)
	if empty.Version != 0 || empty.Doc != nil {
		t.Fatalf("a new catalog reads version %d, doc %v", empty.Version, empty.Doc)
	}
	v, err := st.Publish(ctx, empty, f.build(st, empty, "alpha", "beta"), 0)
	if err != nil || v != 1 {
		t.Fatalf("publish = %d, %v; want version 1", v, err)
	}
	if kept, ok := st.Kept(1); !ok || kept.Doc.Version != 1 || len(kept.Doc.Tools) != 2 {
		t.Fatalf("Kept(1) = %v, %v; want the version just published", kept.Doc, ok)
	}
	good := f.read(st, true).Tools.Get("alpha").Vector
	garbage := contract.VectorDigest([]byte("garbage"))

	// While the stamp matches, a pass uses what was kept: the corrupted
	// vector is not seen. A fresh read (a refresh request) reads it.
	f.corrupt("alpha")
	if got := f.read(f.open(), false).Tools.Get("alpha").Vector; got != good {
		t.Fatalf("a pass under the same stamp read the vector again: digest %x, want %x", got, good)
	}
	if got := f.read(f.open(), true).Tools.Get("alpha").Vector; got != garbage {
		t.Fatalf("a fresh read returned digest %x; want what Redis holds (%x)", got, garbage)
	}

	// The resync interval, on the injected clock, reads everything again,
	// but for a pass that follows edits: that leaves the check to the
	// periodic pass.
	goodBeta := f.read(st, false).Tools.Get("beta").Vector
	f.corrupt("beta")
	f.clock = f.clock.Add(f.cfg.Resync)
	if got := f.readAs(f.open(), catalog.Reading{Edits: true}).Tools.Get("beta").Vector; got != goodBeta {
		t.Fatalf("an edit's pass at the resync interval returned digest %x; want the kept one (%x), the check left to the periodic pass", got, goodBeta)
	}
	if got := f.read(f.open(), false).Tools.Get("beta").Vector; got != garbage {
		t.Fatalf("a pass past the resync interval returned digest %x; want what Redis holds (%x)", got, garbage)
	}

	// Edits that leave no periodic pass wait for the check one interval
	// more, no longer.
	if err := f.srv.Client().HSet(ctx, f.cfg.Keys.Embeddings(), "beta", "garbage again").Err(); err != nil {
		t.Fatal(err)
	}
	again := contract.VectorDigest([]byte("garbage again"))
	f.clock = f.clock.Add(f.cfg.Resync)
	if got := f.readAs(f.open(), catalog.Reading{Edits: true}).Tools.Get("beta").Vector; got != garbage {
		t.Fatalf("an edit's pass one interval after the check returned digest %x; want the kept one (%x)", got, garbage)
	}
	f.clock = f.clock.Add(f.cfg.Resync)
	if got := f.readAs(f.open(), catalog.Reading{Edits: true}).Tools.Get("beta").Vector; got != again {
		t.Fatalf("an edit's pass two intervals after the check returned digest %x; want what Redis holds (%x)", got, again)
	}
}

// Release lets go of a small catalog's kept state, not a large one's; the
// next pass reads what Redis holds.
func TestReleaseLetsGoOfASmallCatalogsState(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	st := f.open()
	empty := f.read(st, false)
	if _, err := st.Publish(ctx, empty, f.build(st, empty, "alpha", "beta"), 0); err != nil {
		t.Fatal(err)
	}
	f.cs.KeepMinTools = 2
	st.Release()
	if _, ok := st.Kept(1); !ok {
		t.Fatal("Release let go of a catalog of KeepMinTools tools")
	}
	good := f.read(st, true).Tools.Get("alpha").Vector
	f.corrupt("alpha")
	if got := f.read(f.open(), false).Tools.Get("alpha").Vector; got != good {
		t.Fatalf("a pass under the same stamp read the vector again: digest %x, want %x", got, good)
	}
	f.cs.KeepMinTools = 3
	st.Release()
	if _, ok := st.Kept(1); ok {
		t.Fatal("Release kept the state of a catalog smaller than KeepMinTools")
	}
	if got := f.read(f.open(), false).Tools.Get("alpha").Vector; got != contract.VectorDigest([]byte("garbage")) {
		t.Fatalf("the pass after Release returned digest %x; want what Redis holds", got)
	}
}

// A whole read lets go of the plans made from the state it replaces,
// which hold that state's entries: a catalog's two states are not held at
// once while the new one is read.
func TestAWholeReadLetsGoOfThePlans(t *testing.T) {
	f := newFixture(t)
	st := f.open()
	empty := f.read(st, false)
	if _, err := st.Publish(context.Background(), empty, f.build(st, empty, "alpha", "beta"), 0); err != nil {
		t.Fatal(err)
	}
	plan := func() {
		stored := f.read(st, false)
		sel := f.selection(st, "alpha", "beta")
		_, _ = st.Planner().Plan(catalog.PlanInput{Tools: sel.Tools, Stored: stored.Tools, Lineage: stored.Lineage(), Model: embedding.LexicalEmbedder{}.Model(), QueriesPerTool: 2})
	}
	plan()
	if got := st.Planner().Holds(); got != 2 {
		t.Fatalf("the planner holds %d plans after planning the published tools; want 2", got)
	}
	plan()
	if got := st.Planner().Holds(); got != 2 {
		t.Fatalf("a read of the kept state left the planner %d plans; want 2", got)
	}
	f.read(st, true)
	if got := st.Planner().Holds(); got != 0 {
		t.Fatalf("a whole read left the planner %d plans of the state it replaced", got)
	}
}

func TestPublishFromAStaleReadConflictsAndForgetsTheSnapshot(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	st := f.open()
	stale := f.read(st, false)
	if _, err := st.Publish(ctx, stale, f.build(st, stale, "alpha"), 0); err != nil {
		t.Fatal(err)
	}
	// A second writer from the same (now stale) read must not overwrite.
	_, err := st.Publish(ctx, stale, f.build(st, stale, "other"), 0)
	if !errors.Is(err, contract.ErrConflict) {
		t.Fatalf("publish from a stale read = %v; want contract.ErrConflict", err)
	}
	if _, ok := st.Kept(1); ok {
		t.Fatal("the snapshot is still kept after a conflict; the next pass must read everything")
	}
	now := f.read(st, false)
	if now.Version != 1 || len(now.Doc.Tools) != 1 || now.Doc.Tools[0].Name != "alpha" {
		t.Fatalf("Redis holds %d %v; want version 1 with alpha only", now.Version, now.Doc)
	}
}

func TestVersionsContinueFromTheFloorAfterRedisLostTheCatalog(t *testing.T) {
	f := newFixture(t)
	st := f.open()
	empty := f.read(st, false)
	v, err := st.Publish(context.Background(), empty, f.build(st, empty, "alpha"), 7)
	if err != nil || v != 8 {
		t.Fatalf("publish with floor 7 = %d, %v; want version 8", v, err)
	}
}

func TestRemoveLeavesAnotherCatalogsKeys(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	st := f.open()
	empty := f.read(st, false)
	if _, err := st.Publish(ctx, empty, f.build(st, empty, "alpha"), 0); err != nil {
		t.Fatal(err)
	}
	owner, err := f.cs.Remove(ctx, "ns/other", "uid-2", f.cfg.Keys, f.cfg.Redis)
	if err != nil || owner != "uid-1" {
		t.Fatalf("Remove by another catalog = %q, %v; want the owner uid-1 and nothing deleted", owner, err)
	}
	if n := f.srv.Client().Exists(ctx, f.cfg.Keys.Head()).Val(); n != 1 {
		t.Fatal("another catalog's Remove deleted the head")
	}
	if owner, err := f.cs.Remove(ctx, "ns/c", "uid-1", f.cfg.Keys, f.cfg.Redis); err != nil || owner != "" {
		t.Fatalf("Remove by the owner = %q, %v", owner, err)
	}
	if n := f.srv.Client().Exists(ctx, f.cfg.Keys.Head(), f.cfg.Keys.Version(), f.cfg.Keys.Embeddings()).Val(); n != 0 {
		t.Fatalf("%d keys left after the owner removed the catalog", n)
	}
}

// Past the resync interval, a catalog Redis still holds as kept is
// compared field by field, not read whole: the state and the plans made
// from it are kept. A field rewritten behind the operator's back, which
// leaves the stamp as it was, is found, and then the catalog is read
// whole.
func TestAResyncReadsWholeOnlyWhatChangedBehindTheOperator(t *testing.T) {
	ctx := context.Background()
	rewrite := func(key func(contract.Keys) string, field, from, to string) func(*fixture) {
		return func(f *fixture) {
			rc := f.srv.Client()
			raw, err := rc.HGet(ctx, key(f.cfg.Keys), field).Result()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(raw, from) {
				t.Fatalf("%s of %s holds no %q: %s", key(f.cfg.Keys), field, from, raw)
			}
			if err := rc.HSet(ctx, key(f.cfg.Keys), field, strings.Replace(raw, from, to, 1)).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	tools, metadata := contract.Keys.Tools, contract.Keys.Metadata
	for _, tc := range []struct {
		name   string
		tamper func(*fixture)
		// found says the read returned what Redis holds.
		found func(catalog.Stored) bool
	}{
		{"nothing changed", func(*fixture) {}, nil},
		{"an entry rewritten", rewrite(tools, "alpha", "does alpha", "does omega"), func(s catalog.Stored) bool {
			tool, ok := s.Doc.ToolByName("alpha")
			return ok && tool.Description == "does omega"
		}},
		{"an entry's permissions added", rewrite(tools, "beta", `"name":"beta"`, `"name":"beta","allowed_principals":["mallory"]`), func(s catalog.Stored) bool {
			return slices.Equal(s.Doc.Permissions["beta"], []string{"mallory"})
		}},
		{"metadata rewritten", rewrite(metadata, "alpha", "does alpha", "does omega"), func(s catalog.Stored) bool {
			return s.Tools.Get("alpha").Metadata != nil && s.Tools.Get("alpha").Metadata.Description == "does omega"
		}},
		{"metadata unreadable", rewrite(metadata, "beta", "{", "["), func(s catalog.Stored) bool {
			return s.Tools.Get("beta").MetadataErr != nil
		}},
		{"a vector rewritten", func(f *fixture) { f.corrupt("alpha") }, func(s catalog.Stored) bool {
			return s.Tools.Get("alpha").Vector == contract.VectorDigest([]byte("garbage"))
		}},
		{"a field renamed, the count kept", func(f *fixture) {
			rc := f.srv.Client()
			raw, err := rc.HGet(ctx, f.cfg.Keys.Metadata(), "beta").Result()
			if err == nil {
				_, err = rc.TxPipelined(ctx, func(p redis.Pipeliner) error {
					p.HDel(ctx, f.cfg.Keys.Metadata(), "beta")
					p.HSet(ctx, f.cfg.Keys.Metadata(), "gamma", raw)
					return nil
				})
			}
			if err != nil {
				t.Fatal(err)
			}
		}, func(s catalog.Stored) bool { return s.Tools.Get("gamma").Metadata != nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			st := f.open()
			empty := f.read(st, false)
			if _, err := st.Publish(ctx, empty, f.build(st, empty, "alpha", "beta"), 0); err != nil {
				t.Fatal(err)
			}
			stored := f.read(st, false)
			sel := f.selection(st, "alpha", "beta")
			_, _ = st.Planner().Plan(catalog.PlanInput{Tools: sel.Tools, Stored: stored.Tools, Lineage: stored.Lineage(), Model: embedding.LexicalEmbedder{}.Model(), QueriesPerTool: 2})
			if got := st.Planner().Holds(); got != 2 {
				t.Fatalf("the planner holds %d plans; want 2", got)
			}
			tc.tamper(f)
			f.clock = f.clock.Add(f.cfg.Resync)
			got := f.read(f.open(), false)
			if tc.found == nil {
				if n := st.Planner().Holds(); n != 2 {
					t.Fatalf("the resync of an unchanged catalog read it whole: the planner holds %d plans, want 2", n)
				}
				if _, ok := st.Kept(1); !ok {
					t.Fatal("the resync of an unchanged catalog let go of its state")
				}
				// The check is done for another interval: a change now is
				// not seen until then.
				f.corrupt("alpha")
				if got := f.read(f.open(), false).Tools.Get("alpha").Vector; got != stored.Tools.Get("alpha").Vector {
					t.Fatal("the pass after a resync read the vectors again")
				}
				return
			}
			if !tc.found(got) {
				t.Fatalf("the resync did not return what Redis holds: %+v", got.Tools)
			}
			if n := st.Planner().Holds(); n != 0 {
				t.Fatalf("a resync that found a change left the planner %d plans of the state it replaced", n)
			}
		})
	}
}

// The watch's changes reach the catalogs they are for, once a pass has
// taken the first (whole) selection; a ToolSource's change reaches every
// catalog of its namespace and no other.
func TestChangesReachTheirCatalogs(t *testing.T) {
	f := newFixture(t)
	cs := f.cs
	cs.Changed("ns/c", "early") // nothing kept yet: the first pass is whole anyway
	c := cs.Open("ns/c", "uid-1", f.cfg)
	other := cs.Open("other/c", "uid-2", f.cfg)
	t.Cleanup(func() { cs.Forget("other/c") })
	for _, st := range []*published.State{c, other} {
		if _, whole := st.Changes().Take(); !whole {
			t.Fatal("a catalog's first pass did not select whole")
		}
	}
	cs.Changed("ns/c", "a")
	cs.Changed("ns/c", "b")
	if objects, whole := c.Changes().Take(); whole || !slices.Equal(objects, []string{"a", "b"}) {
		t.Fatalf("changes taken = %v, %v; want a and b", objects, whole)
	}
	cs.AllChangedIn("ns")
	if _, whole := c.Changes().Take(); !whole {
		t.Fatal("a ToolSource's change did not reach a catalog of its namespace")
	}
	if objects, whole := other.Changes().Take(); whole || len(objects) != 0 {
		t.Fatalf("a ToolSource's change reached another namespace's catalog: %v, %v", objects, whole)
	}
}
