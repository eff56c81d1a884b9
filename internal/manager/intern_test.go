package manager

import (
	"strings"
	"testing"
	"unsafe"
)

// The interner shares short strings, leaves long ones alone and starts
// afresh when full, so a stream of distinct strings cannot grow it.
func TestInternerIsBounded(t *testing.T) {
	var in interner
	a, b := strings.Clone("Embedded"), strings.Clone("Embedded")
	in.intern(&a)
	in.intern(&b)
	if unsafe.StringData(a) != unsafe.StringData(b) {
		t.Fatal("two equal short strings are held twice")
	}
	long1, long2 := strings.Repeat("x", maxInternedLen+1), strings.Repeat("x", maxInternedLen+1)
	in.intern(&long1)
	in.intern(&long2)
	if unsafe.StringData(long1) == unsafe.StringData(long2) || len(in.m) != 1 {
		t.Fatalf("a string over %d bytes was interned (%d held)", maxInternedLen, len(in.m))
	}
	for i := range 3 * maxInterned {
		s := strings.Repeat("y", i%200) + string(rune('a'+i%26)) + strings.Repeat("z", i/200)
		in.intern(&s)
		if len(in.m) > maxInterned {
			t.Fatalf("%d strings held, more than %d", len(in.m), maxInterned)
		}
	}
}
