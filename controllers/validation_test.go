package controllers

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalogconfig"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

const validToolYAML = `
apiVersion: toolcatalog.dev/v1alpha1
kind: ToolDefinition
metadata:
  name: probe
spec:
  name: get_weather
  description: Get the weather for a city.
  parameters:
    type: object
    properties:
      city: {type: string}
`

const validCatalogYAML = `
apiVersion: toolcatalog.dev/v1alpha1
kind: ToolCatalog
metadata:
  name: probe
spec:
  selector:
    matchLabels: {team: a}
  redis:
    addresses: ["redis:6379"]
`

func decodeYAML(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	obj := map[string]any{}
	if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
		t.Fatalf("decoding YAML: %v", err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// set replaces the value at a dotted path of spec fields.
func set(value any, path ...string) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) {
		if err := unstructured.SetNestedField(u.Object, value, append([]string{"spec"}, path...)...); err != nil {
			panic(err)
		}
	}
}

func unset(path ...string) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) {
		unstructured.RemoveNestedField(u.Object, append([]string{"spec"}, path...)...)
	}
}

func TestAPIServerRejectsInvalidSpecs(t *testing.T) {
	tests := []struct {
		name    string
		base    string
		mutate  []func(*unstructured.Unstructured)
		wantMsg []string // substrings of the API server's error, field path first
	}{
		// ToolDefinition
		{"tool name with a space", validToolYAML, fn(set("get weather", "name")), []string{"spec.name", "should match"}},
		{"tool name with a dot", validToolYAML, fn(set("weather.get", "name")), []string{"spec.name"}},
		{"tool name too long", validToolYAML, fn(set(strings.Repeat("a", 65), "name")), []string{"spec.name", "64"}},
		{"tool name empty", validToolYAML, fn(set("", "name")), []string{"spec.name"}},
		{"tool name reserved: tool_search", validToolYAML, fn(set("tool_search", "name")), []string{"spec.name", "reserved for progressive disclosure"}},
		{"tool name reserved: tool_describe", validToolYAML, fn(set("tool_describe", "name")), []string{"spec.name", "reserved"}},
		{"tool name reserved: tool_call", validToolYAML, fn(set("tool_call", "name")), []string{"spec.name", "reserved"}},
		{"description blank", validToolYAML, fn(set("   \t", "description")), []string{"spec.description", "must not be blank"}},
		{"description empty", validToolYAML, fn(set("", "description")), []string{"spec.description"}},
		{"description missing", validToolYAML, fn(unset("description")), []string{"spec.description", "Required"}},
		{"description too long", validToolYAML, fn(set(strings.Repeat("x", 4097), "description")), []string{"spec.description", "4096"}},
		{"parameters a string", validToolYAML, fn(set("city: string", "parameters")), []string{"spec.parameters", "object"}},
		{"parameters a list", validToolYAML, fn(set([]any{"city"}, "parameters")), []string{"spec.parameters", "object"}},
		{"parameters a number", validToolYAML, fn(set(int64(3), "parameters")), []string{"spec.parameters", "object"}},
		{"blank example query", validToolYAML, fn(set([]any{"ok", " "}, "exampleQueries")), []string{"spec.exampleQueries", "blank"}},
		{"duplicate example query", validToolYAML, fn(set([]any{"a", "a"}, "exampleQueries")), []string{"spec.exampleQueries", "Duplicate"}},
		{"empty principal", validToolYAML, fn(set([]any{""}, "permissions", "allowedPrincipals")), []string{"spec.permissions.allowedPrincipals"}},

		// ToolCatalog: enums
		{"unknown search method", validCatalogYAML, fn(set("fuzzy", "search", "method")), []string{"spec.search.method", "Unsupported value", "fuzzy"}},
		{"unknown embedding provider", validCatalogYAML, fn(set("cohere", "embedding", "provider")), []string{"spec.embedding.provider", "Unsupported value"}},
		{"unknown query provider", validCatalogYAML, fn(set("anthropic", "queryGeneration", "provider")), []string{"spec.queryGeneration.provider", "Unsupported value"}},
		{"unknown redis mode", validCatalogYAML, fn(set("replica", "redis", "mode")), []string{"spec.redis.mode", "Unsupported value"}},
		// ToolCatalog: ranges
		{"topK zero", validCatalogYAML, fn(set(int64(0), "search", "topK")), []string{"spec.search.topK", "greater than or equal to 1"}},
		{"topK too large", validCatalogYAML, fn(set(int64(101), "search", "topK")), []string{"spec.search.topK", "less than or equal to 100"}},
		{"batch size zero", validCatalogYAML, fn(set(int64(0), "embedding", "batchSize")), []string{"spec.embedding.batchSize"}},
		{"batch size too large", validCatalogYAML, fn(set(int64(4096), "embedding", "batchSize")), []string{"spec.embedding.batchSize"}},
		{"queriesPerTool zero", validCatalogYAML, fn(set(int64(0), "queryGeneration", "queriesPerTool")), []string{"spec.queryGeneration.queriesPerTool"}},
		{"queriesPerTool too large", validCatalogYAML, fn(set(int64(51), "queryGeneration", "queriesPerTool")), []string{"spec.queryGeneration.queriesPerTool"}},
		{"concurrency zero", validCatalogYAML, fn(set(int64(0), "queryGeneration", "concurrency")), []string{"spec.queryGeneration.concurrency"}},
		{"concurrency too large", validCatalogYAML, fn(set(int64(33), "queryGeneration", "concurrency")), []string{"spec.queryGeneration.concurrency"}},
		{"threshold above one", validCatalogYAML, fn(set(1.5, "search", "similarityThreshold")), []string{"spec.search.similarityThreshold"}},
		{"retainVersions zero", validCatalogYAML, fn(set(int64(0), "publish", "retainVersions")), []string{"spec.publish.retainVersions"}},
		{"retainVersions beyond what a publish cleans up", validCatalogYAML, fn(set(int64(contract.MaxRetainVersions+1), "publish", "retainVersions")), []string{"spec.publish.retainVersions"}},
		{"dimensions zero", validCatalogYAML, fn(set(int64(0), "embedding", "dimensions")), []string{"spec.embedding.dimensions"}},
		{"malformed timeout", validCatalogYAML, fn(set("soon", "embedding", "timeout")), []string{"spec.embedding.timeout"}},
		{"malformed resync interval", validCatalogYAML, fn(set("10 minutes", "publish", "resyncInterval")), []string{"spec.publish.resyncInterval"}},
		{"base URL without scheme", validCatalogYAML, fn(set("api.openai.com/v1", "embedding", "baseURL")), []string{"spec.embedding.baseURL"}},
		{"bad always-include name", validCatalogYAML, fn(set([]any{"web search"}, "search", "alwaysInclude")), []string{"spec.search.alwaysInclude"}},
		// ToolCatalog: selector
		{"selector missing", validCatalogYAML, fn(unset("selector")), []string{"spec.selector", "Required"}},
		{"selector unknown operator", validCatalogYAML, fn(set([]any{map[string]any{"key": "team", "operator": "Near", "values": []any{"a"}}}, "selector", "matchExpressions")), []string{"spec.selector", "operator must be one of"}},
		{"selector In without values", validCatalogYAML, fn(set([]any{map[string]any{"key": "team", "operator": "In"}}, "selector", "matchExpressions")), []string{"spec.selector", "In and NotIn need values"}},
		{"selector Exists with values", validCatalogYAML, fn(set([]any{map[string]any{"key": "team", "operator": "Exists", "values": []any{"a"}}}, "selector", "matchExpressions")), []string{"spec.selector", "must have none"}},
		// ToolCatalog: Redis and rules spanning fields
		{"redis missing", validCatalogYAML, fn(unset("redis")), []string{"spec.redis", "Required"}},
		{"no redis address", validCatalogYAML, fn(set([]any{}, "redis", "addresses")), []string{"spec.redis.addresses"}},
		{"redis address without port", validCatalogYAML, fn(set([]any{"redis"}, "redis", "addresses")), []string{"spec.redis.addresses[0]"}},
		{"standalone with two addresses", validCatalogYAML, fn(set([]any{"a:6379", "b:6379"}, "redis", "addresses")), []string{"spec.redis", "standalone mode takes exactly one address"}},
		{"sentinel without master", validCatalogYAML, fn(set("sentinel", "redis", "mode")), []string{"spec.redis", "masterName is required"}},
		{"cluster with db", validCatalogYAML, fn(set("cluster", "redis", "mode"), set(int64(2), "redis", "db")), []string{"spec.redis", "db must be 0"}},
		{"cluster prefix without hash tag", validCatalogYAML, fn(set("cluster", "redis", "mode"), set([]any{"a:6379", "b:6379"}, "redis", "addresses"), set("tools:prod", "redis", "keyPrefix")), []string{"spec.redis", "hash tag"}},
		{"openai embedding without model", validCatalogYAML, fn(set("openai", "embedding", "provider")), []string{"spec.embedding", "model is required"}},
		{"openai queries without models", validCatalogYAML, fn(set("openai", "queryGeneration", "provider")), []string{"spec.queryGeneration", "models needs at least one model"}},
		{"fallback without model", validCatalogYAML, fn(set(map[string]any{"baseURL": "http://llm:8000/v1"}, "queryGeneration", "fallback")), []string{"spec.queryGeneration.fallback.model", "Required"}},
		{"secret ref without key", validCatalogYAML, fn(set(map[string]any{"name": "redis"}, "redis", "passwordSecretRef")), []string{"spec.redis.passwordSecretRef.key", "Required"}},
	}
	ns := newNamespace(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := decodeYAML(t, tt.base)
			obj.SetNamespace(ns)
			for _, m := range tt.mutate {
				m(obj)
			}
			err := k8sClient.Create(context.Background(), obj)
			g.Expect(err).To(HaveOccurred(), "the API server accepted an invalid %s", obj.GetKind())
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
			for _, s := range tt.wantMsg {
				g.Expect(err.Error()).To(ContainSubstring(s))
			}
		})
	}

	// The unmodified bases are valid, so each rejection above is caused by
	// its mutation alone.
	for _, base := range []string{validToolYAML, validCatalogYAML} {
		obj := decodeYAML(t, base)
		obj.SetNamespace(ns)
		if err := k8sClient.Create(context.Background(), obj); err != nil {
			t.Fatalf("valid base %s rejected: %v", obj.GetKind(), err)
		}
	}
}

func fn(m ...func(*unstructured.Unstructured)) []func(*unstructured.Unstructured) { return m }

func TestAPIServerAppliesCatalogDefaults(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	obj := decodeYAML(t, validCatalogYAML)
	obj.SetNamespace(ns)
	g.Expect(k8sClient.Create(ctx, obj)).To(Succeed())

	tc := &v1alpha1.ToolCatalog{}
	g.Expect(k8sClient.Get(ctx, keyOf(obj), tc)).To(Succeed())
	s := tc.Spec
	g.Expect(s.Redis.Mode).To(Equal(v1alpha1.RedisModeStandalone))
	g.Expect(s.Redis.DB).To(BeZero())
	g.Expect(s.Embedding.Provider).To(Equal(v1alpha1.ProviderBuiltin))
	g.Expect(s.Embedding.BatchSize).To(BeEquivalentTo(64))
	g.Expect(s.Embedding.Timeout).NotTo(BeNil())
	g.Expect(s.Embedding.Timeout.Duration.String()).To(Equal("30s"))
	g.Expect(s.QueryGeneration.Provider).To(Equal(v1alpha1.ProviderBuiltin))
	g.Expect(s.QueryGeneration.QueriesPerTool).To(BeEquivalentTo(5))
	g.Expect(s.QueryGeneration.Concurrency).To(BeEquivalentTo(3))
	g.Expect(s.QueryGeneration.MaxRetries).To(HaveValue(BeEquivalentTo(3)))
	g.Expect(s.Search.Method).To(Equal(v1alpha1.SearchHybrid))
	g.Expect(s.Search.TopK).To(BeEquivalentTo(5))
	g.Expect(s.Publish.Channel).To(Equal("toolcatalog:updates"))
	g.Expect(s.Publish.RetainVersions).To(BeEquivalentTo(5))
	g.Expect(s.Publish.ResyncInterval).NotTo(BeNil())
	g.Expect(s.Publish.ResyncInterval.Duration).To(Equal(catalogconfig.DefaultResync))
}
