package published_test

import (
	"context"
	"slices"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/internal/published/versions"
)

// The probe marks a catalog lost when its Redis holds no version, or an
// older one, than the manager published there, once; a newer version
// (another writer's, or the manager's own next one), and a Redis that does
// not answer, mark nothing; a pass's own read finds the same.
func TestProbeFindsWhatRedisLost(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	st := f.open()
	empty := f.read(st, false)
	v1, err := st.Publish(ctx, empty, f.build(st, empty, "alpha"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if lost := f.cs.Probe(ctx); len(lost) != 0 {
		t.Fatalf("nothing was lost, the probe says %v", lost)
	}
	// Deleted behind the manager's back: lost, once.
	rc := f.srv.Client()
	defer rc.Close()
	if deleteErr := versions.Delete(ctx, rc, f.cfg.Keys); deleteErr != nil {
		t.Fatal(deleteErr)
	}
	if lost := f.cs.Probe(ctx); !slices.Equal(lost, []string{"ns/c"}) {
		t.Fatalf("the probe after the delete: %v", lost)
	}
	if lost := f.cs.Probe(ctx); len(lost) != 0 {
		t.Fatalf("the loss is told twice: %v", lost)
	}
	loss := f.cs.TakeLoss("ns/c")
	if loss == nil || loss.Version != v1 || loss.Found != 0 || f.cs.TakeLoss("ns/c") != nil {
		t.Fatalf("the loss taken: %+v", loss)
	}
	// Published again, then a newer version by another writer: not lost.
	st = f.open()
	again := f.read(st, false)
	v2, err := st.Publish(ctx, again, f.build(st, again, "alpha"), v1)
	if err != nil || v2 <= v1 {
		t.Fatalf("published again as %d: %v", v2, err)
	}
	if setErr := rc.Set(ctx, f.cfg.Keys.Version(), v2+5, 0).Err(); setErr != nil {
		t.Fatal(setErr)
	}
	if lost := f.cs.Probe(ctx); len(lost) != 0 {
		t.Fatalf("a newer version is no loss: %v", lost)
	}
	// An older one is, found by a pass's read as well as by the probe.
	if setErr := rc.Set(ctx, f.cfg.Keys.Version(), 1, 0).Err(); setErr != nil {
		t.Fatal(setErr)
	}
	st = f.open()
	_ = f.read(st, true)
	if loss := f.cs.TakeLoss("ns/c"); loss == nil || loss.Found != 1 {
		t.Fatalf("the pass's read of an older version: %+v", loss)
	}
	// A Redis that does not answer says nothing.
	st = f.open()
	if setErr := rc.Set(ctx, f.cfg.Keys.Version(), 9, 0).Err(); setErr != nil {
		t.Fatal(setErr)
	}
	_ = f.read(st, true)
	if setErr := f.srv.Kill(); setErr != nil {
		t.Fatal(setErr)
	}
	if lost := f.cs.Probe(ctx); len(lost) != 0 {
		t.Fatalf("a Redis that does not answer: %v", lost)
	}
}
