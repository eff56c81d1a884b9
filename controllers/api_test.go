package controllers

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	lua "github.com/yuin/gopher-lua"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalogconfig"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/mcptest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/samples"
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

// runKubectl runs the kubectl built beside the test API server.
func runKubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := tryKubectl(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func tryKubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cluster.Use(t)
	bin := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("kubectl not found in KUBEBUILDER_ASSETS: run `bash hack/build-controlplane.sh` (it builds kubectl with the API server): %v", err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

func TestKubectlExplainShowsFieldDocs(t *testing.T) {
	tests := []struct {
		resource string
		want     []string
	}{
		{"tooldefinition.spec", []string{"function name the model sees", "description", "only prose the model reads", "parameters", "JSON Schema", "exampleQueries", "alwaysInclude"}},
		{"td.status", []string{"specHash", "sha256", "catalogs", "conditions"}},
		{"toolcatalog.spec.redis", []string{"addresses", "hash tag", "passwordSecretRef"}},
		{"tc.spec.search.method", []string{"semantic, bm25, hybrid or rrf"}},
	}
	for _, tt := range tests {
		t.Run(tt.resource, func(t *testing.T) {
			// The API server publishes a new CRD's OpenAPI schema shortly
			// after the CRD is established.
			var out string
			gomegaFor(t).Eventually(func() (err error) {
				out, err = tryKubectl(t, "explain", tt.resource)
				return err
			}).Should(Succeed())
			t.Logf("kubectl explain %s:\n%s", tt.resource, out)
			for _, s := range tt.want {
				if !strings.Contains(out, s) {
					t.Errorf("kubectl explain %s does not mention %q:\n%s", tt.resource, s, out)
				}
			}
		})
	}
}

func TestKubectlGetUsesShortNamesCategoryAndColumns(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	g.Expect(k8sClient.Create(context.Background(), weatherTool(ns, "weather"))).To(Succeed())
	catalog := decodeYAML(t, validCatalogYAML)
	catalog.SetNamespace(ns)
	g.Expect(k8sClient.Create(context.Background(), catalog)).To(Succeed())
	g.Eventually(func(g Gomega) {
		expectCondition(g, getTD(g, ns, "weather"), v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSpecValid)
	}).Should(Succeed())

	// Short name td, and the columns Tool, Ready and Status.
	out := runKubectl(t, "get", "td", "-n", ns)
	g.Expect(strings.Fields(firstLine(out))).To(Equal([]string{"NAME", "TOOL", "READY", "STATUS", "AGE"}))
	g.Expect(out).To(MatchRegexp(`weather\s+get_weather\s+True\s+tool spec is valid`))

	// Short name tc, and the columns Version, Tools and Pinned.
	out = runKubectl(t, "get", "tc", "-n", ns)
	g.Expect(strings.Fields(firstLine(out))).To(Equal([]string{"NAME", "READY", "STATUS", "VERSION", "TOOLS", "PINNED", "AGE"}))

	// The category lists both kinds.
	out = runKubectl(t, "get", "toolcatalog", "-n", ns, "-o", "name")
	g.Expect(out).To(ContainSubstring("tooldefinition.toolcatalog.dev/weather"))
	g.Expect(out).To(ContainSubstring("toolcatalog.toolcatalog.dev/probe"))
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func TestKubectlDescribeShowsCatalogAndToolState(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	p := newProvider(t, ns)
	threeTools(t, g, ns, p)
	g.Eventually(func(g Gomega) {
		expectCondition(g, getTD(g, ns, "weather"), v1alpha1.ConditionEmbedded, metav1.ConditionTrue, v1alpha1.ReasonEmbedded)
	}).Should(Succeed())

	out := runKubectl(t, "get", "tc", "-n", ns, "-o", "wide")
	t.Logf("kubectl get tc -o wide:\n%s", out)
	g.Expect(out).To(MatchRegexp(`tools\s+True\s+version 1 serves 3 tools\s+1\s+3\s+0\s+0`))

	out = runKubectl(t, "describe", "tc", "-n", ns, "tools")
	t.Logf("kubectl describe tc:\n%s", out)
	for _, re := range []string{`Version:\s+1`, `Schema Hash:\s+[0-9a-f]{64}`, `Embedded:\s+3`, `Stale:\s+0`, `Type:\s+EmbeddingsSynced`,
		`Normal\s+VersionPublished\s+.*published version 1: 3 tools`} {
		g.Expect(out).To(MatchRegexp(re))
	}

	out = runKubectl(t, "describe", "td", "-n", ns, "weather")
	t.Logf("kubectl describe td:\n%s", out)
	for _, re := range []string{`Spec Hash:\s+[0-9a-f]{64}`, `Catalog:\s+tools`, `Catalog Version:\s+1`, `Query Count:\s+3`,
		`Message:\s+embedded in tools \(version 1\)`, `Type:\s+Embedded`} {
		g.Expect(out).To(MatchRegexp(re))
	}
}

func keyOf(obj client.Object) client.ObjectKey { return client.ObjectKeyFromObject(obj) }

// loadSamples decodes every object of config/samples.
func loadSamples(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	objs, err := samples.Load(filepath.Join("..", "config", "samples"))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func TestSamplesApplyCleanly(t *testing.T) {
	g := gomegaFor(t)
	ctx := context.Background()
	ns := newNamespace(t)

	objs := loadSamples(t)
	var tools, catalogs, sources int
	for _, obj := range objs {
		obj.SetNamespace(ns)
		if err := k8sClient.Create(ctx, obj); err != nil {
			t.Fatalf("sample %s/%s rejected: %v", obj.GetKind(), obj.GetName(), err)
		}
		switch obj.GetKind() {
		case "ToolDefinition":
			tools++
		case "ToolCatalog":
			catalogs++
		case "ToolSource":
			sources++
		}
	}
	g.Expect(tools).To(BeNumerically(">=", 5), "want at least five sample tools")
	g.Expect(catalogs).To(BeNumerically(">=", 1), "want a sample catalog")
	g.Expect(sources).To(BeNumerically(">=", 1), "want a sample ToolSource")

	// Every sample tool is valid for the controller too, and the catalog
	// selects all of them.
	tc := &v1alpha1.ToolCatalog{}
	for _, obj := range objs {
		if obj.GetKind() == "ToolCatalog" {
			g.Expect(k8sClient.Get(ctx, keyOf(obj), tc)).To(Succeed())
		}
	}
	selector, err := metav1.LabelSelectorAsSelector(&tc.Spec.Selector)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		list := &v1alpha1.ToolDefinitionList{}
		g.Expect(k8sClient.List(ctx, list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: selector})).To(Succeed())
		g.Expect(list.Items).To(HaveLen(tools))
		for i := range list.Items {
			expectCondition(g, &list.Items[i], v1alpha1.ConditionValid, metav1.ConditionTrue, v1alpha1.ReasonSpecValid)
		}
	}).Should(Succeed())
}

// kstatusOf is what kstatus (Flux's health checks, kubectl and the other
// users of cli-utils) says of an object, computed with
// sigs.k8s.io/cli-utils as they compute it. The Argo CD health script of
// docs/gitops.md must say the same.
func kstatusOf(g Gomega, obj client.Object) *status.Result {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	g.Expect(err).NotTo(HaveOccurred())
	res, err := status.Compute(&unstructured.Unstructured{Object: m})
	g.Expect(err).NotTo(HaveOccurred())
	health, message := argoHealth(g, obj)
	g.Expect(health).To(Equal(argoStatus[res.Status]), "Argo CD health of %s: %s (kstatus: %s, %s)", obj.GetName(), message, res.Status, res.Message)
	return res
}

// An object that waits for its user to change something is Failed to
// kstatus, with the message that says what to change; fixed, it is
// Current. Each kind: a catalog and a source whose Secret did not opt in,
// a tool whose spec is invalid.
func TestKstatusTellsStalledFromCurrent(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	_, tc := keyedCatalog(t, ns)
	srv := mcptest.New(t, mcptest.Options{})
	srv.Tool("lookup", "Look up an order.", nil, nil)
	ts := toolSource(ns, "collector", srv.URL)
	ts.Spec.MCP.BearerTokenSecretRef = &v1alpha1.SecretKeySelector{Name: "token", Key: "token"}
	bad := testTool(ns, "bad", "bad_tool", "A tool whose parameters are not an object.", "tools")
	bad.Spec.Parameters = rawJSON(`{"type":"string"}`)
	createAll(g, unlabelled(secret(ns, "openai", map[string]string{"apiKey": "sk-good"})), unlabelled(secret(ns, "token", map[string]string{"token": "t"})),
		tc, ts, bad, testTool(ns, "weather", "get_weather", "Get the weather.", "tools"))

	g.Eventually(func(g Gomega) {
		for _, obj := range []client.Object{getTC(g, ns, "tools"), getTS(g, ns, "collector")} {
			res := kstatusOf(g, obj)
			g.Expect(res.Status).To(Equal(status.FailedStatus), "%s: %s", obj.GetName(), res.Message)
			g.Expect(res.Message).To(ContainSubstring(notOptedIn))
		}
		res := kstatusOf(g, getTD(g, ns, "bad"))
		g.Expect(res.Status).To(Equal(status.FailedStatus), res.Message)
		g.Expect(res.Message).To(ContainSubstring("object"))
	}).Should(Succeed())

	optIn(g, ns, "openai")
	optIn(g, ns, "token")
	editTD(g, ns, "bad", func(td *v1alpha1.ToolDefinition) { td.Spec.Parameters = rawJSON(`{"type":"object"}`) })
	g.Eventually(func(g Gomega) {
		for _, obj := range []client.Object{getTC(g, ns, "tools"), getTS(g, ns, "collector"), getTD(g, ns, "bad"), getTD(g, ns, "weather")} {
			res := kstatusOf(g, obj)
			g.Expect(res.Status).To(Equal(status.CurrentStatus), "%s: %s", obj.GetName(), res.Message)
		}
	}).Should(Succeed())
}

// argoHealth runs the Argo CD health script of docs/gitops.md on obj, as
// Argo CD runs it (gopher-lua, obj a global), and returns its status.
func argoHealth(g Gomega, obj client.Object) (status, message string) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "gitops.md"))
	g.Expect(err).NotTo(HaveOccurred())
	_, script, ok := strings.Cut(string(doc), "-- toolcatalog health: begin\n")
	g.Expect(ok).To(BeTrue(), "docs/gitops.md holds no health script")
	script, _, ok = strings.Cut(script, "-- toolcatalog health: end")
	g.Expect(ok).To(BeTrue())
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	g.Expect(err).NotTo(HaveOccurred())
	L := lua.NewState()
	defer L.Close()
	L.SetGlobal("obj", toLua(L, m))
	g.Expect(L.DoString(script)).To(Succeed())
	hs, ok := L.Get(-1).(*lua.LTable)
	g.Expect(ok).To(BeTrue(), "the script returned no table")
	return hs.RawGetString("status").String(), hs.RawGetString("message").String()
}

// toLua is a JSON-like value as a Lua value.
func toLua(L *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := L.NewTable()
		for k, x := range v {
			t.RawSetString(k, toLua(L, x))
		}
		return t
	case []any:
		t := L.NewTable()
		for _, x := range v {
			t.Append(toLua(L, x))
		}
		return t
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	}
	return lua.LNil
}

// argoStatus is the Argo CD health status that stands for a kstatus one.
var argoStatus = map[status.Status]string{status.CurrentStatus: "Healthy", status.InProgressStatus: "Progressing", status.FailedStatus: "Degraded"}
