package manager

import (
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

// internToolDefinition shares the repeated strings of a cached
// ToolDefinition. A catalog's record of the current spec hash shares the
// status's.
func internToolDefinition(td *v1alpha1.ToolDefinition) {
	in := cacheStrings.intern
	in(&td.APIVersion)
	in(&td.Kind)
	in(&td.Namespace)
	labels := make(map[string]string, len(td.Labels))
	for k, v := range td.Labels {
		in(&k)
		in(&v)
		labels[k] = v
	}
	if td.Labels != nil {
		td.Labels = labels
	}
	for i := range td.OwnerReferences {
		in(&td.OwnerReferences[i].APIVersion)
		in(&td.OwnerReferences[i].Kind)
		in(&td.OwnerReferences[i].Name)
	}
	in(&td.Spec.Toolset)
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
	internConditions(td.Status.Conditions)
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
