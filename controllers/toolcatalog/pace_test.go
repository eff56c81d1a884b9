package toolcatalog

import (
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// During a burst, passes that publish as soon as they may are spaced
// further and further apart, up to paceMax; a version after a quiet
// spell is not delayed, nor is another catalog's.
func TestPacerSpacesVersionsOfABurst(t *testing.T) {
	var ps pacer
	key, other := client.ObjectKey{Namespace: "ns", Name: "tools"}, client.ObjectKey{Namespace: "ns", Name: "other"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	if d := ps.wait(key, now); d != 0 {
		t.Fatalf("first pass waits %v", d)
	}
	// A burst: every pass starts as soon as it may and takes a second,
	// longer than the first waits.
	var waits []time.Duration
	versions := 0
	for now.Sub(t0) < time.Minute {
		started := now.Add(ps.wait(key, now) + 10*time.Millisecond)
		now = started.Add(time.Second)
		ps.published(key, started, now)
		versions++
		waits = append(waits, ps.wait(key, now))
	}
	want := []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, paceMax, paceMax}
	for i, w := range want {
		if waits[i] != w {
			t.Fatalf("wait after version %d: %v, want %v (all: %v)", i+1, waits[i], w, waits)
		}
	}
	if versions > 12 {
		t.Fatalf("a minute of changes made %d versions", versions)
	}
	if d := ps.wait(other, now); d != 0 {
		t.Fatalf("another catalog waits %v", d)
	}
	// A quiet spell ends the burst: the next version comes at once, and
	// the one after too if it follows after more than paceBase.
	now = now.Add(3 * paceMax)
	if d := ps.wait(key, now); d != 0 {
		t.Fatalf("a pass after a quiet spell waits %v", d)
	}
	ps.published(key, now, now)
	now = now.Add(2 * paceBase)
	ps.published(key, now, now)
	if d := ps.wait(key, now); d != 0 {
		t.Fatalf("two edits %v apart: the second waits %v", 2*paceBase, d)
	}
	ps.forget(key)
	if d := ps.wait(key, now); d != 0 {
		t.Fatalf("a forgotten catalog waits %v", d)
	}
}
