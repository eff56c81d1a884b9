package querystore

import (
	"runtime"
	"slices"
	"testing"
	"time"
	"weak"
)

// Equal vectors decoded apart are held once, while anyone holds them; a
// vector of the same hash but other values is never handed out for
// another; and an entry goes with the last holder of its vector.
func TestSharedVectorsHoldEqualVectorsOnce(t *testing.T) {
	sv := &sharedVectors{byHash: map[uint64]sharedVector{}, seed: shared.seed}
	a := sv.of([]float32{1, 2, 3, 4, 5})
	b := sv.of([]float32{1, 2, 3, 4, 5})
	if &a[0] != &b[0] {
		t.Fatal("two equal vectors are held twice")
	}
	c := sv.of([]float32{1, 2, 3, 4, 6})
	if &c[0] == &a[0] || !slices.Equal(c, []float32{1, 2, 3, 4, 6}) {
		t.Fatalf("another vector was handed out as %v", c)
	}
	// A vector whose hash is another's: its entry stands for d, not e.
	d := []float32{7, 7, 7, 7}
	h := sv.hash([]float32{9, 9, 9, 9})
	sv.byHash[h] = sharedVector{first: weak.Make(&d[0]), n: len(d)}
	runtime.AddCleanup(&d[0], sv.forget, h)
	if e := sv.of([]float32{9, 9, 9, 9}); !slices.Equal(e, []float32{9, 9, 9, 9}) {
		t.Fatalf("a vector of a colliding hash came back as %v", e)
	}
	if small := []float32{1, 2}; &sv.of(small)[0] != &small[0] || sv.len() != 3 {
		t.Fatalf("a vector of %d values was shared (%d entries)", len(small), sv.len())
	}
	runtime.KeepAlive(d)
	a, b, c = nil, nil, nil
	deadline := time.Now().Add(10 * time.Second)
	for sv.len() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d entries left after every holder let its vector go", sv.len())
		}
		runtime.GC()
		runtime.Gosched()
	}
}
