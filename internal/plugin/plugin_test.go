package plugin

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/manager"
	"github.com/toolcatalog/tool-catalog-operator/internal/redisconn"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/mcptest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/redistest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/suite"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/testenv"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

var (
	cfg      *rest.Config
	k8s      client.Client
	redisSrv *redistest.Server
	ns       = "plugin-test"
)

// shared is a real API server with the operator's controllers and a real
// Redis, publishing a catalog of four tools with the builtin providers:
// the first test that runs the plugin starts it.
var shared = suite.New(startSuite)

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

func startSuite(onStop func(func() error)) error {
	env, c, err := testenv.Start(filepath.Join("..", ".."), "")
	if err != nil {
		return err
	}
	cfg = c
	onStop(env.Stop)
	if redisSrv, err = redistest.Start(""); err != nil {
		return err
	}
	onStop(redisSrv.Stop)

	scheme := manager.Scheme()
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	onStop(func() error { cancel(); return nil })
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		return err
	}
	pool := redisconn.NewPool()
	onStop(func() error { pool.Close(); return nil })
	// ToolSources on loopback MCP servers hold upstream changes for the
	// console's approvals page; the ToolDefinitions' status, which the
	// console shows, is their own reconciler's.
	if err = manager.Setup(ctx, mgr, pool, manager.Config{EgressAllow: []string{"127.0.0.1/32"}, SourceMaxTools: 100}); err != nil {
		return err
	}
	go func() { _ = mgr.Start(ctx) }()
	if err := publishFixture(ctx); err != nil {
		return fmt.Errorf("publishing the fixture catalog: %w", err)
	}
	return nil
}

func publishFixture(ctx context.Context) error {
	objs := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}}
	tool := func(name, tn, desc string, principals ...string) *v1alpha1.ToolDefinition {
		td := &v1alpha1.ToolDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"catalog": "assistant"}},
			Spec: v1alpha1.ToolDefinitionSpec{Name: tn, Description: desc}}
		if principals != nil {
			td.Spec.Permissions = &v1alpha1.ToolPermissions{AllowedPrincipals: principals}
		}
		return td
	}
	objs = append(objs,
		tool("weather", "get_weather", "Get the current weather conditions and the forecast for a city."),
		tool("email", "send_email", "Send an email message to a recipient."),
		tool("issue", "create_issue", "Open an issue in a GitHub repository."),
		tool("sql", "run_sql", "Run a read-only SQL query on the analytics warehouse.", "group:analysts"),
		&v1alpha1.ToolCatalog{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "assistant"}, Spec: v1alpha1.ToolCatalogSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"catalog": "assistant"}},
			Redis:    v1alpha1.RedisSpec{Addresses: []string{redisSrv.Addr}},
			Search:   v1alpha1.SearchSpec{Method: v1alpha1.SearchHybrid, TopK: 3},
		}},
	)
	for _, o := range objs {
		if err := k8s.Create(ctx, o); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		tc := &v1alpha1.ToolCatalog{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "assistant"}, tc); err == nil &&
			meta.IsStatusConditionTrue(tc.Status.Conditions, v1alpha1.ConditionReady) && tc.Status.Counts != nil && tc.Status.Counts.Tools == 4 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("catalog not ready in time")
}

// kubectlToolcatalog runs the plugin's command tree in-process.
func kubectlToolcatalog(t *testing.T, args ...string) (string, error) {
	t.Helper()
	shared.Use(t)
	var out, errOut bytes.Buffer
	cmd := NewCommand(&Options{Out: &out, Err: &errOut, RESTConfig: cfg})
	cmd.SetArgs(append([]string{"-n", ns}, args...))
	err := cmd.ExecuteContext(context.Background())
	t.Logf("kubectl toolcatalog %s:\n%s%s", strings.Join(args, " "), out.String(), errOut.String())
	return out.String(), err
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := kubectlToolcatalog(t, args...)
	if err != nil {
		t.Fatalf("kubectl toolcatalog %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func rows(out string) [][]string {
	var r [][]string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		r = append(r, strings.Fields(line))
	}
	return r
}

func TestSearch(t *testing.T) {
	out := mustRun(t, "search", "assistant", "send an email to my manager")
	r := rows(out)
	if strings.Join(r[0], " ") != "RANK TOOL SCORE DESCRIPTION" || r[1][1] != "send_email" {
		t.Fatalf("unexpected table:\n%s", out)
	}
	if len(r) != 4 {
		t.Fatalf("%d rows, want the catalog's topK 3", len(r)-1)
	}

	out = mustRun(t, "search", "assistant", "weather forecast for Paris", "--explain", "--method", "semantic", "--top-k", "2")
	for _, s := range []string{"version 1 (4 tools)", "method semantic", "RANK  TOOL", "SEMANTIC", "BM25"} {
		if !strings.Contains(out, s) {
			t.Errorf("explain output lacks %q", s)
		}
	}
	// Line 1 describes the search, line 2 is the header.
	r = rows(out)
	if top := r[2]; top[1] != "get_weather" || top[2] != "ranked" || top[5] != "(#1)" {
		t.Fatalf("semantic top row %v, want get_weather ranked first by the semantic arm", top)
	}
	if len(r) != 4 {
		t.Fatalf("%d result rows, want 2", len(r)-2)
	}

	// Hybrid explains its blend, and says when a query with no telling
	// tool word was ranked by meaning alone.
	out = mustRun(t, "search", "assistant", "send an email to my manager", "--explain")
	if !strings.Contains(out, "method hybrid") || !regexp.MustCompile(`blend: 0\.\d\d·cosine \+ 0\.\d\d·bm25 \(each normalised\); lexical evidence \d+\.\d\d`).MatchString(out) {
		t.Errorf("hybrid explain output lacks the blend:\n%s", out)
	}
	out = mustRun(t, "search", "assistant", "will it be chilly tomorrow", "--explain")
	if !strings.Contains(out, "semantic-only rule fired: lexical evidence 0.00 < 1.00") {
		t.Errorf("hybrid explain output does not say the semantic-only rule fired:\n%s", out)
	}

	// A request for two things: each intent, its blend and the tools it
	// placed; --intents off searches it whole.
	two := "Send an email to my manager about the outage. Then tell me the weather forecast for Paris."
	out = mustRun(t, "search", "assistant", two, "--explain")
	for _, s := range []string{"2 intents, each searched on its own", `intent 1: "Send an email to my manager about the outage"`, `intent 2: "Then tell me the weather forecast for Paris"`} {
		if !strings.Contains(out, s) {
			t.Errorf("explain output lacks %q:\n%s", s, out)
		}
	}
	if !regexp.MustCompile(`(?m)^\d +send_email +intent 1 `).MatchString(out) || !regexp.MustCompile(`(?m)^\d +get_weather +intent 2 `).MatchString(out) {
		t.Errorf("the rows do not say which intent placed send_email and get_weather:\n%s", out)
	}
	if out := mustRun(t, "search", "assistant", two, "--explain", "--intents", "off"); strings.Contains(out, "intents, each") || strings.Contains(out, "intent 1") {
		t.Errorf("--intents off still split the request:\n%s", out)
	}

	// Permissions: run_sql only for its principal.
	if out := mustRun(t, "search", "assistant", "run a SQL query", "--principal", "group:sales"); strings.Contains(out, "run_sql") {
		t.Fatalf("run_sql shown to group:sales:\n%s", out)
	}
	if out := mustRun(t, "search", "assistant", "run a SQL query", "--principal", "group:analysts"); rows(out)[1][1] != "run_sql" {
		t.Fatalf("run_sql not first for group:analysts:\n%s", out)
	}
}

func TestDescribeTool(t *testing.T) {
	out := mustRun(t, "describe-tool", "assistant", "get_weather")
	for _, s := range []string{"Tool:             get_weather", "(version 1)", "Spec hash:", "Embedded:         builtin-use-lite-f16, 512 dimensions", "Synthetic queries:", "  - ", "Allowed:          everyone", "Parameters:"} {
		if !strings.Contains(out, s) {
			t.Errorf("describe-tool output lacks %q", s)
		}
	}
	if out := mustRun(t, "describe-tool", "assistant", "run_sql"); !strings.Contains(out, "Allowed:          group:analysts") {
		t.Errorf("permissions not shown:\n%s", out)
	}
	if _, err := kubectlToolcatalog(t, "describe-tool", "assistant", "nope"); err == nil || !strings.Contains(err.Error(), `no tool "nope"`) {
		t.Fatalf("unknown tool: %v", err)
	}
}

func TestVersionsAndRefresh(t *testing.T) {
	shared.Use(t)
	out := mustRun(t, "versions", "assistant")
	r := rows(out)
	if strings.Join(r[0], " ") != "VERSION CURRENT SERVED TOOLS SCHEMA HASH GENERATED" || r[1][0] != "1" || r[1][1] != "*" || r[1][2] != "*" || r[1][3] != "4" {
		t.Fatalf("versions:\n%s", out)
	}

	// A forced refresh of the builtin (deterministic) providers handles
	// the request and changes nothing: still version 1.
	out = mustRun(t, "refresh", "assistant", "--mode", "force", "--tools", "get_weather", "--wait", "30s")
	if !strings.Contains(out, "refresh of plugin-test/assistant requested") || !strings.Contains(out, "handled: version 1") {
		t.Fatalf("refresh:\n%s", out)
	}
	tc := &v1alpha1.ToolCatalog{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "assistant"}, tc); err != nil {
		t.Fatal(err)
	}
	if tc.Annotations[v1alpha1.AnnotationRefreshMode] != "force" || tc.Annotations[v1alpha1.AnnotationRefreshTools] != "get_weather" {
		t.Fatalf("annotations %v", tc.Annotations)
	}
	if _, err := kubectlToolcatalog(t, "refresh", "assistant", "--mode", "everything"); err == nil || !strings.Contains(err.Error(), "--mode must be") {
		t.Fatalf("bad mode: %v", err)
	}
	// A refresh of tools the catalog does not have fails visibly.
	if _, err := kubectlToolcatalog(t, "refresh", "assistant", "--tools", "get_wether", "--wait", "30s"); err == nil || !strings.Contains(err.Error(), "none of the requested tools (get_wether) is in the catalog") {
		t.Fatalf("refresh of an unknown tool: %v", err)
	}
}

func TestRedisAddressOverrideAndErrors(t *testing.T) {
	shared.Use(t)
	if out := mustRun(t, "--redis-addr", redisSrv.Addr, "search", "assistant", "open a bug in github", "--method", "bm25"); rows(out)[1][1] != "create_issue" {
		t.Fatalf("search through --redis-addr:\n%s", out)
	}
	if _, err := kubectlToolcatalog(t, "search", "missing", "x"); err == nil || !strings.Contains(err.Error(), "reading ToolCatalog plugin-test/missing") {
		t.Fatalf("missing catalog: %v", err)
	}
	if _, err := kubectlToolcatalog(t, "search", "assistant"); err == nil {
		t.Fatal("search without a query accepted")
	}
}

func TestPurgeRequestsDeletesTheRecordedText(t *testing.T) {
	shared.Use(t)
	ctx := context.Background()
	rc := redisSrv.Client()
	defer rc.Close()
	keys := contract.Keys{Prefix: contract.DefaultPrefix(ns, "assistant")}
	for _, req := range []string{"book the fishbowl", "book the fishbowl", "will it rain"} {
		if err := contract.RecordRequest(ctx, rc, keys, "alice", req, "get_weather", time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	out := mustRun(t, "purge-requests", "assistant")
	if !strings.Contains(out, "deleted 2 recorded requests of catalog "+ns+"/assistant") {
		t.Fatalf("purge-requests output:\n%s", out)
	}
	if n := rc.Exists(ctx, keys.Requests(), keys.RequestsSeen()).Val(); n != 0 {
		t.Fatalf("%d request keys left after purge-requests", n)
	}
}

// import needs no cluster: the ToolDefinitions it writes are created as
// they are, and a tool that cannot be one is reported.
func TestImportWritesToolDefinitionsFromAnMCPServer(t *testing.T) {
	shared.Use(t)
	srv := mcptest.New(t, mcptest.Options{Name: "docs", Version: "2.1.0", PageSize: 2, Token: "s3cret"})
	srv.Tool("search", "Search the documentation by keywords.",
		map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}, "required": []string{"q"}},
		&mcpsdk.ToolAnnotations{Title: "Search docs", ReadOnlyHint: true})
	srv.Tool("read_page", "Read a page of the manual.", nil, nil)
	srv.Tool("admin_reset", "Reset the index.", nil, nil)
	srv.Tool("mute", "", nil, nil)

	var out, errOut bytes.Buffer
	cmd := NewCommand(&Options{Out: &out, Err: &errOut, Kubeconfig: filepath.Join(t.TempDir(), "none")})
	cmd.SetArgs([]string{"import", "--mcp", srv.URL, "--prefix", "docs_", "--labels", "catalog=assistant", "--header", "Authorization: Bearer s3cret", "--exclude", "admin_*"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("import: %v\n%s", err, errOut.String())
	}
	t.Logf("kubectl toolcatalog import:\n%s\nstderr:\n%s", out.String(), errOut.String())
	if !strings.Contains(errOut.String(), "skipped mute: it has no description") {
		t.Errorf("stderr lacks the skipped tool:\n%s", errOut.String())
	}
	docs := strings.Split(out.String(), "\n---\n")[1:]
	if len(docs) != 2 {
		t.Fatalf("%d documents, want docs_read_page and docs_search", len(docs))
	}
	importNS := "import-test"
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: importNS}}); err != nil {
		t.Fatal(err)
	}
	for _, doc := range docs {
		td := &v1alpha1.ToolDefinition{}
		if err := yaml.UnmarshalStrict([]byte(doc), td); err != nil {
			t.Fatalf("decoding %s: %v", doc, err)
		}
		td.Namespace = importNS
		if err := k8s.Create(context.Background(), td); err != nil {
			t.Fatalf("the API server refused %s: %v", td.Name, err)
		}
		if td.Labels["catalog"] != "assistant" || td.Spec.Source == nil || td.Spec.Source.MCPURL != srv.URL {
			t.Errorf("%s: labels %v source %+v", td.Name, td.Labels, td.Spec.Source)
		}
	}
	if !strings.Contains(out.String(), "name: docs-search") || !strings.Contains(out.String(), "readOnlyHint: true") {
		t.Errorf("output lacks the search tool's name or annotations:\n%s", out.String())
	}
}

// describe-source shows what the operator recorded of a source's server,
// its own words escaped.
func TestDescribeSource(t *testing.T) {
	synced := metav1.Now()
	ts := &v1alpha1.ToolSource{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "fetch"}, Spec: v1alpha1.ToolSourceSpec{
		MCP: v1alpha1.MCPServerSpec{ServerRef: &v1alpha1.ServerReference{APIVersion: "mcp.x-k8s.io/v1beta1", Kind: "MCPServer", Name: "fetch"}}},
		Status: v1alpha1.ToolSourceStatus{
			Server:       &v1alpha1.MCPServerInfo{Name: "fetch", Version: "1.2.0", ProtocolVersion: "2025-11-25", Instructions: "Call fetch\u202e with a URL."},
			Endpoint:     &v1alpha1.ServerEndpoint{Kind: "MCPServer", Namespace: "team-a", Name: "fetch", URL: "http://fetch.team-a.svc.cluster.local:8080/mcp", Ready: true},
			ToolCount:    2,
			LastSyncTime: &synced,
			Conditions:   []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSynced, Message: "2 tools from fetch 1.2.0"}},
		}}
	var out bytes.Buffer
	describeSource(&out, ts)
	for _, s := range []string{"Reference:        MCPServer fetch (mcp.x-k8s.io/v1beta1)", "Endpoint:         http://fetch.team-a.svc.cluster.local:8080/mcp (ready: true)",
		"Server:           fetch 1.2.0 (protocol 2025-11-25)", `Instructions:     Call fetch\u202E with a URL.`, "Tools:            2", "Ready:            True (Synced): 2 tools from fetch 1.2.0"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("describe-source output lacks %q:\n%s", s, out.String())
		}
	}
	if _, err := kubectlToolcatalog(t, "describe-source", "nope"); err == nil || !strings.Contains(err.Error(), "reading ToolSource") {
		t.Fatalf("unknown source: %v", err)
	}
}
