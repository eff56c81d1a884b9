package catalogconfig

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/egress"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
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

// Every provider endpoint is a namespace user's choice: each is checked
// against the egress policy before a client is built, and one the policy
// refuses is an EgressDenied error naming the field and the flag.
func TestProviderEndpointsMeetTheEgressPolicy(t *testing.T) {
	api := func(u string) embedding.OpenAIConfig { return embedding.OpenAIConfig{BaseURL: u} }
	const denied, public = "http://169.254.169.254/latest/meta-data?x=", "https://api.openai.com/v1"
	for _, tt := range []struct {
		field string
		s     ProviderSettings
	}{
		{"spec.embedding.baseURL", ProviderSettings{Embedding: &embedding.OpenAIEmbedderConfig{OpenAIConfig: api(denied), Model: "m"}}},
		{"spec.queryGeneration.baseURL", ProviderSettings{Generation: &embedding.OpenAIQueryGeneratorConfig{OpenAIConfig: api("http://10.0.0.7/v1"), Models: []string{"m"}}}},
		{"spec.queryGeneration.fallback.baseURL", ProviderSettings{Generation: &embedding.OpenAIQueryGeneratorConfig{OpenAIConfig: api(public), Models: []string{"m"},
			Fallback: &embedding.OpenAIFallback{OpenAIConfig: api("http://kubernetes.default.svc/v1"), Model: "m"}}}},
	} {
		_, err := BuildProviders(tt.s, nil)
		var ce *Error
		if !errors.As(err, &ce) || ce.Reason != v1alpha1.ReasonEgressDenied {
			t.Errorf("%s: got %v, want EgressDenied", tt.field, err)
			continue
		}
		if !strings.HasPrefix(ce.Message, tt.field+" ") || !strings.Contains(ce.Message, "--egress-allow") || strings.Contains(ce.Message, "meta-data") {
			t.Errorf("%s: the message does not name the field and the flag, or repeats the path: %s", tt.field, ce.Message)
		}
	}
	// A public endpoint, and a private one the platform operators listed,
	// are reached.
	open, err := egress.New([]string{"0.0.0.0/0", "http://10.0.0.7/"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := BuildProviders(ProviderSettings{Embedding: &embedding.OpenAIEmbedderConfig{OpenAIConfig: api(public), Model: "m"},
		Generation: &embedding.OpenAIQueryGeneratorConfig{OpenAIConfig: api("http://10.0.0.7/v1"), Models: []string{"m"}}}, open); err != nil {
		t.Errorf("allowed endpoints refused: %v", err)
	}
}
