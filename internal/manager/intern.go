package manager

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
)

// Bounds of the strings the cache shares: short ones, and at most
// maxInterned of them before the table starts afresh.
const (
	maxInterned    = 4096
	maxInternedLen = 256
)

// interner hands out one copy of each short string it is given, so the
// strings thousands of cached objects repeat (condition types, reasons
// and messages, catalog and model names, labels) are held once. Strings
// are immutable: sharing them cannot change what any reader sees. A
// bounded map is used rather than the unique package, whose canonical
// copies live only while a handle does, and the cache keeps no handles.
type interner struct {
	mu sync.Mutex
	m  map[string]string
}

func (in *interner) intern(s *string) {
	if *s == "" || len(*s) > maxInternedLen {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.m[*s]; ok {
		*s = v
		return
	}
	if in.m == nil || len(in.m) >= maxInterned {
		in.m = make(map[string]string, maxInterned)
	}
	in.m[*s] = *s
}

var cacheStrings interner

// maxSharedSets bounds the values each sharedSets keeps before it starts
// afresh.
const maxSharedSets = 4096

// sharedSets hands out one copy of each value (a set of labels, a list of
// conditions) that many cached objects hold equal, under a key its caller
// writes the value out as. Cached objects are read-only: the cache hands
// out deep copies, and the lists that skip the copy only read.
type sharedSets[V any] struct {
	mu sync.Mutex
	m  map[string]V
}

// share returns the value kept under key when equal says it is v's
// equal, else keeps own(v), a copy of v for objects to share, and
// returns it.
func (ss *sharedSets[V]) share(key string, v V, equal func(kept, v V) bool, own func(V) V) V {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if kept, ok := ss.m[key]; ok && equal(kept, v) {
		return kept
	}
	if ss.m == nil || len(ss.m) >= maxSharedSets {
		ss.m = make(map[string]V, maxSharedSets)
	}
	shared := own(v)
	ss.m[key] = shared
	return shared
}

// maxLabelSetLen bounds a set of labels the cache shares, written out.
const maxLabelSetLen = 1024

// labelSets hands out one map per distinct set of labels, so the
// thousands of objects a ToolSource or a directory of manifests labels
// alike hold one map between them, where each held its own (about 300
// bytes for one label).
type labelSets struct{ sharedSets[map[string]string] }

// share returns a map equal to labels that objects with the same labels
// share, or labels itself when it is empty or too long to keep.
func (ls *labelSets) share(labels map[string]string) map[string]string {
	if len(labels) == 0 {
		return labels
	}
	var key strings.Builder
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		// Neither keys nor values may hold a NUL, so the set is
		// written out unambiguously; the look-up checks it all the same.
		key.WriteString(k)
		key.WriteByte(0)
		key.WriteString(labels[k])
		key.WriteByte(0)
		if key.Len() > maxLabelSetLen {
			return labels
		}
	}
	return ls.sharedSets.share(key.String(), labels, maps.Equal, func(labels map[string]string) map[string]string {
		shared := make(map[string]string, len(labels))
		for k, v := range labels {
			cacheStrings.intern(&k)
			cacheStrings.intern(&v)
			shared[k] = v
		}
		return shared
	})
}

var cacheLabels labelSets

// maxConditionSetLen bounds a list of conditions the cache shares,
// written out.
const maxConditionSetLen = 2048

// conditionSets hands out one array per distinct list of conditions, so
// the objects whose conditions are equal, times included (the tools a bulk
// apply validated and embedded in the same second), hold one list between
// them, where each held its own (about 340 bytes for three).
type conditionSets struct{ sharedSets[[]metav1.Condition] }

// share returns a list equal to conditions, in an array of its length,
// that objects with equal conditions share; a list too long to keep is
// returned in an array of its own.
func (cs *conditionSets) share(conditions []metav1.Condition) []metav1.Condition {
	if len(conditions) == 0 {
		return conditions
	}
	var key strings.Builder
	for _, c := range conditions {
		for _, field := range []string{c.Type, string(c.Status), c.Reason, c.Message} {
			key.WriteString(field)
			key.WriteByte(0)
		}
		key.WriteString(strconv.FormatInt(c.ObservedGeneration, 10))
		key.WriteByte(0)
		key.WriteString(strconv.FormatInt(c.LastTransitionTime.UnixNano(), 10))
		key.WriteByte(0)
		if key.Len() > maxConditionSetLen {
			conditions = exact(conditions)
			internConditions(conditions)
			return conditions
		}
	}
	// The key is unambiguous but for a NUL in a message: the look-up
	// checks the whole list all the same.
	return cs.sharedSets.share(key.String(), conditions, slices.Equal, func(conditions []metav1.Condition) []metav1.Condition {
		shared := append([]metav1.Condition(nil), conditions...)
		internConditions(shared)
		return shared
	})
}

var cacheConditions conditionSets

// exact returns s in an array of its length: the JSON decoder grows the
// slices it fills by doubling, so a cached list of three conditions
// would keep room for four.
func exact[S ~[]E, E any](s S) S {
	if cap(s) == len(s) {
		return s
	}
	return append(S(nil), s...)
}

// internToolDefinition shares the repeated strings of a cached
// ToolDefinition. A catalog's record of the current spec hash shares the
// status's.
func internToolDefinition(td *v1alpha1.ToolDefinition) {
	in := cacheStrings.intern
	in(&td.APIVersion)
	in(&td.Kind)
	in(&td.Namespace)
	td.Labels = cacheLabels.share(td.Labels)
	for i := range td.OwnerReferences {
		in(&td.OwnerReferences[i].APIVersion)
		in(&td.OwnerReferences[i].Kind)
		in(&td.OwnerReferences[i].Name)
	}
	in(&td.Spec.Toolset)
	td.Status.Catalogs, td.Status.Conditions = exact(td.Status.Catalogs), cacheConditions.share(td.Status.Conditions)
	for i := range td.Status.Catalogs {
		rec := &td.Status.Catalogs[i]
		in(&rec.Catalog)
		in(&rec.Model)
		in(&rec.Reason)
		in(&rec.Message)
		if rec.SpecHash == td.Status.SpecHash {
			rec.SpecHash = td.Status.SpecHash
		}
	}
}

func internConditions(conditions []metav1.Condition) {
	for i := range conditions {
		c := &conditions[i]
		cacheStrings.intern(&c.Type)
		cacheStrings.intern((*string)(&c.Status))
		cacheStrings.intern(&c.Reason)
		cacheStrings.intern(&c.Message)
	}
}
