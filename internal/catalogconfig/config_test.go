package catalogconfig

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
)

// The published disclosure policy has every field set: unset fields take
// the documented defaults, and the default top k never exceeds the
// largest.
func TestDisclosureOf(t *testing.T) {
	threshold, window := 0.25, int32(32000)
	for _, tt := range []struct {
		name string
		spec v1alpha1.DisclosureSpec
		want contract.Disclosure
	}{
		{"unset", v1alpha1.DisclosureSpec{},
			contract.Disclosure{Mode: "auto", Threshold: 0.10, ContextWindow: 128000, SearchTopK: 5, SearchMaxTopK: 20, DescriptionLength: 300}},
		{"set", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOn, Threshold: &threshold, ContextWindow: &window, SearchTopK: 8, SearchMaxTopK: 10, DescriptionLength: 120},
			contract.Disclosure{Mode: "on", Threshold: 0.25, ContextWindow: 32000, SearchTopK: 8, SearchMaxTopK: 10, DescriptionLength: 120}},
		{"top k above the largest", v1alpha1.DisclosureSpec{SearchMaxTopK: 3},
			contract.Disclosure{Mode: "auto", Threshold: 0.10, ContextWindow: 128000, SearchTopK: 3, SearchMaxTopK: 3, DescriptionLength: 300}},
	} {
		if got := *DisclosureOf(tt.spec); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// A custom prefix is the catalog's only when its first hash tag is its
// own: anything else could reach another catalog's keys.
func TestCheckKeyPrefix(t *testing.T) {
	for prefix, ok := range map[string]bool{
		"":                                true,
		"tc:{team-a/search}":              true,
		"{team-a/search}:v2":              true,
		"tc:{team-b/prod}":                false,
		"tc:{team-b/prod}{team-a/search}": false,
		"tc:team-a/search":                false,
		"tc:{team-a/search":               false,
		"tc:{team-a/searc}h}":             false,
		"toolcatalog:{team-a/search-2}":   false,
	} {
		tc := &v1alpha1.ToolCatalog{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "search"}}
		tc.Spec.Redis.KeyPrefix = prefix
		if err := CheckKeyPrefix(tc); (err == nil) != ok {
			t.Errorf("%q: %v, want allowed=%v", prefix, err, ok)
		}
	}
}

// Intents off is published; on, the default, publishes nothing, so the
// document of a catalog that keeps it is as before the setting existed.
func TestIntentsSettingIsPublished(t *testing.T) {
	for setting, want := range map[v1alpha1.SearchIntents]string{"": "", v1alpha1.IntentsOn: "", v1alpha1.IntentsOff: toolcatalog.IntentsOff} {
		tc := &v1alpha1.ToolCatalog{Spec: v1alpha1.ToolCatalogSpec{Redis: v1alpha1.RedisSpec{Addresses: []string{"127.0.0.1:6379"}}}}
		tc.Namespace, tc.Name = "ns", "c"
		tc.Spec.Search.Intents = setting
		cfg, err := (&Resolver{}).Resolve(context.Background(), tc)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Search.Intents != want {
			t.Errorf("intents %q publishes %q, want %q", setting, cfg.Search.Intents, want)
		}
	}
}
