package querystore

import (
	"hash/maphash"
	"runtime"
	"slices"
	"sync"
	"unsafe"
	"weak"
)

// sharedVectors hands out one copy of each distinct vector decoded from a
// store while anything holds it: the catalogs of a namespace that select
// the same tools grade with the same query vectors, which each catalog's
// grading would otherwise hold a copy of. Only equal vectors are shared,
// so sharing tells no caller anything it did not read itself. Vectors
// handed out are read-only, as they are between the callers of one flight.
// The unique package does this for comparable values; a slice is not one.
type sharedVectors struct {
	mu sync.Mutex
	// byHash holds a weak pointer to the first value of each vector
	// handed out, by a hash of its values; the entry goes with the
	// vector's last holder.
	byHash map[uint64]sharedVector
	seed   maphash.Seed
}

type sharedVector struct {
	first weak.Pointer[float32]
	n     int
}

var shared = &sharedVectors{byHash: map[uint64]sharedVector{}, seed: maphash.MakeSeed()}

// of returns a vector equal to v that others decoded before and still
// hold, or v itself, which later callers then share. Vectors of fewer
// than minShared values are not shared: the runtime may pack them with
// other small objects, and then never tell that they went.
func (sv *sharedVectors) of(v []float32) []float32 {
	if len(v) < minShared {
		return v
	}
	h := sv.hash(v)
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if e, ok := sv.byHash[h]; ok {
		if first := e.first.Value(); first != nil {
			if held := unsafe.Slice(first, e.n); slices.Equal(held, v) {
				return held
			}
			return v // another vector of the same hash: not shared
		}
	}
	sv.byHash[h] = sharedVector{first: weak.Make(&v[0]), n: len(v)}
	runtime.AddCleanup(&v[0], sv.forget, h)
	return v
}

// minShared is the fewest values a shared vector has.
const minShared = 4

func (sv *sharedVectors) hash(v []float32) uint64 {
	return maphash.Bytes(sv.seed, unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*4))
}

// forget drops the entry of a vector no one holds any more, unless another
// vector of that hash took its place.
func (sv *sharedVectors) forget(h uint64) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if e, ok := sv.byHash[h]; ok && e.first.Value() == nil {
		delete(sv.byHash, h)
	}
}

// len is how many vectors are shared.
func (sv *sharedVectors) len() int {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return len(sv.byHash)
}
