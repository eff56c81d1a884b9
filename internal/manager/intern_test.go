package manager

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
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

// ToolDefinitions labelled alike share one map of labels, and one labelled
// otherwise, even by one value, keeps labels equal to its own: a catalog
// selects by them. The table is bounded, and a set too long to keep is
// left as it came.
func TestLabelSetsShareEqualLabels(t *testing.T) {
	var ls labelSets
	same := func(a, b map[string]string) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	a := ls.share(map[string]string{"team": "billing", "toolcatalog.dev/source": "crm"})
	b := ls.share(map[string]string{"toolcatalog.dev/source": "crm", "team": "billing"})
	if !same(a, b) {
		t.Fatal("two equal label sets are held twice")
	}
	for _, other := range []map[string]string{
		{"team": "billing", "toolcatalog.dev/source": "crm2"},
		{"team": "billing"},
		{"team": "billing", "toolcatalog.dev/source": "crm", "x": ""},
		{"team\x00billing": "toolcatalog.dev/source\x00crm"},
	} {
		got := ls.share(other)
		if same(got, a) || !maps.Equal(got, other) {
			t.Fatalf("labels %v were cached as %v", other, got)
		}
	}
	if got := ls.share(nil); got != nil {
		t.Fatalf("no labels became %v", got)
	}
	long := map[string]string{"a": strings.Repeat("v", maxLabelSetLen)}
	if got := ls.share(long); !same(got, long) {
		t.Fatal("a label set too long to keep was copied")
	}
	for i := range 3 * maxSharedSets {
		ls.share(map[string]string{"n": fmt.Sprint(i)})
		if len(ls.m) > maxSharedSets {
			t.Fatalf("%d label sets held, more than %d", len(ls.m), maxSharedSets)
		}
	}
}

// Equal condition lists, times included, are held once; a list that
// differs in any field is held as it is, and the table is bounded.
func TestConditionSetsShareEqualConditions(t *testing.T) {
	var cs conditionSets
	at := metav1.NewTime(time.Date(2026, 11, 29, 1, 2, 3, 0, time.Local))
	list := func(mod func(c *metav1.Condition)) []metav1.Condition {
		l := append(make([]metav1.Condition, 0, 4),
			metav1.Condition{Type: "Validated", Status: metav1.ConditionTrue, ObservedGeneration: 1, LastTransitionTime: at, Reason: "Valid", Message: "ok"},
			metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, ObservedGeneration: 1, LastTransitionTime: at, Reason: "Embedded", Message: "in 1 catalog"})
		if mod != nil {
			mod(&l[1])
		}
		return l
	}
	a, b := cs.share(list(nil)), cs.share(list(nil))
	if &a[0] != &b[0] || cap(a) != 2 {
		t.Fatalf("two equal condition lists are held twice, or with spare room (%d)", cap(a))
	}
	for name, mod := range map[string]func(c *metav1.Condition){
		"status":     func(c *metav1.Condition) { c.Status = metav1.ConditionFalse },
		"generation": func(c *metav1.Condition) { c.ObservedGeneration = 2 },
		"time":       func(c *metav1.Condition) { c.LastTransitionTime = metav1.NewTime(at.Add(time.Second)) },
		"reason":     func(c *metav1.Condition) { c.Reason = "Pending" },
		"message":    func(c *metav1.Condition) { c.Message = "in 2 catalogs" },
		"NUL":        func(c *metav1.Condition) { c.Message = "in 1 catalog\x00" },
	} {
		want := list(mod)
		got := cs.share(list(mod))
		if &got[0] == &a[0] || !slices.Equal(got, want) {
			t.Fatalf("a list differing in its %s was cached as %+v", name, got)
		}
	}
	if got := cs.share(nil); got != nil {
		t.Fatalf("no conditions became %v", got)
	}
	long := list(func(c *metav1.Condition) { c.Message = strings.Repeat("m", maxConditionSetLen) })
	if got := cs.share(long); &got[0] == &cs.share(list(func(c *metav1.Condition) { c.Message = strings.Repeat("m", maxConditionSetLen) }))[0] || cap(got) != 2 {
		t.Fatal("a list too long to keep was shared, or kept with spare room")
	}
	for i := range 3 * maxSharedSets {
		cs.share(list(func(c *metav1.Condition) { c.ObservedGeneration = int64(i) }))
		if len(cs.m) > maxSharedSets {
			t.Fatalf("%d condition lists held, more than %d", len(cs.m), maxSharedSets)
		}
	}
}

// A cached ToolDefinition keeps its status lists in arrays of their length,
// not the room the decoder grew them to.
func TestInternedToolDefinitionHoldsNoSpareRoom(t *testing.T) {
	td := &v1alpha1.ToolDefinition{}
	td.Status.Conditions = append(make([]metav1.Condition, 0, 4), metav1.Condition{Type: "Ready"}, metav1.Condition{Type: "Validated"}, metav1.Condition{Type: "Embedded"})
	td.Status.Catalogs = append(make([]v1alpha1.CatalogEmbeddingStatus, 0, 2), v1alpha1.CatalogEmbeddingStatus{Catalog: "a"})
	internToolDefinition(td)
	if c := td.Status.Conditions; cap(c) != 3 || c[2].Type != "Embedded" {
		t.Fatalf("conditions %v in room for %d", c, cap(c))
	}
	if c := td.Status.Catalogs; cap(c) != 1 || c[0].Catalog != "a" {
		t.Fatalf("records %v in room for %d", c, cap(c))
	}
}
