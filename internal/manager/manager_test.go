package manager

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/openaitest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/redistest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/suite"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/testenv"
)

var (
	cfg      *rest.Config
	kube     client.Client
	redisSrv *redistest.Server
	// kubeconfig lets a manager process reach the test API server.
	kubeconfig []byte
)

// shared is the API server and Redis the tests share, started by the
// first test that needs them.
var shared = suite.New(func(onStop func(func() error)) error {
	env, c, err := testenv.Start(filepath.Join("..", ".."), "")
	if err != nil {
		return err
	}
	onStop(env.Stop)
	cfg, kubeconfig = c, env.KubeConfig
	if kube, err = client.New(cfg, client.Options{Scheme: Scheme()}); err != nil {
		return err
	}
	if redisSrv, err = redistest.Start(""); err != nil {
		return err
	}
	onStop(redisSrv.Stop)
	return nil
})

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

var waitFor = testenv.WaitFor

// countingReconciler counts the ConfigMaps of one namespace it reconciles.
type countingReconciler struct{ n atomic.Int64 }

func (c *countingReconciler) Reconcile(context.Context, reconcile.Request) (reconcile.Result, error) {
	c.n.Add(1)
	return reconcile.Result{}, nil
}

// namespaceRecorder records the namespaces of the requests it reconciles.
type namespaceRecorder struct {
	mu   sync.Mutex
	seen map[string]int
}

func (r *namespaceRecorder) Reconcile(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen[req.Namespace]++
	return reconcile.Result{}, nil
}

func (r *namespaceRecorder) count(ns string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[ns]
}

// Shards: two managers, each with its own namespaces and its own Lease,
// both lead at once, and each reconciles only its own namespaces.
func TestShardsLeadTheirOwnNamespaces(t *testing.T) {
	shared.Use(t)
	leases := testenv.Namespace(t, kube, "shards-")
	nsA, nsB := testenv.Namespace(t, kube, "shard-a-"), testenv.Namespace(t, kube, "shard-b-")
	start := func(id, ns string) (*namespaceRecorder, <-chan struct{}) {
		mgr, err := New(cfg, Config{MetricsAddr: "0", ProbeAddr: "0", LeaderElection: true, LeaderElectionID: id, LeaderElectionNamespace: leases,
			LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond, SkipNameValidation: true,
			WatchNamespaces: []string{ns}})
		if err != nil {
			t.Fatal(err)
		}
		rec := &namespaceRecorder{seen: map[string]int{}}
		if err := ctrl.NewControllerManagedBy(mgr).Named("shard-" + id).For(&corev1.ConfigMap{}).Complete(rec); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = mgr.Start(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		return rec, mgr.Elected()
	}
	a, electedA := start("shard-a", nsA)
	b, electedB := start("shard-b", nsB)
	waitFor(t, "both shards elected", 20*time.Second, func() bool {
		select {
		case <-electedA:
		default:
			return false
		}
		select {
		case <-electedB:
			return true
		default:
			return false
		}
	})
	for _, ns := range []string{nsA, nsB} {
		for i := range 3 {
			if err := kube.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%d", i)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitFor(t, "each shard to reconcile its namespace", 10*time.Second, func() bool { return a.count(nsA) >= 3 && b.count(nsB) >= 3 })
	if a.count(nsB) != 0 || b.count(nsA) != 0 {
		t.Fatalf("shard a reconciled %d requests of shard b's namespace, shard b %d of shard a's", a.count(nsB), b.count(nsA))
	}
	for _, id := range []string{"shard-a", "shard-b"} {
		lease := &coordinationv1.Lease{}
		if err := kube.Get(context.Background(), client.ObjectKey{Namespace: leases, Name: id}, lease); err != nil || lease.Spec.HolderIdentity == nil {
			t.Fatalf("lease %s: %v %+v", id, err, lease.Spec)
		}
	}
}

func TestLeaderElectionLetsExactlyOneManagerReconcile(t *testing.T) {
	shared.Use(t)
	ns := testenv.Namespace(t, kube, "leader-")
	c := Config{MetricsAddr: "0", ProbeAddr: "0", LeaderElection: true, LeaderElectionID: "leader-test", LeaderElectionNamespace: ns,
		LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond, SkipNameValidation: true}

	type replica struct {
		counter *countingReconciler
		cancel  context.CancelFunc
		done    chan struct{}
		elected <-chan struct{}
	}
	start := func(name string) *replica {
		mgr, err := New(cfg, c)
		if err != nil {
			t.Fatal(err)
		}
		r := &replica{counter: &countingReconciler{}, done: make(chan struct{}), elected: mgr.Elected()}
		if err := ctrl.NewControllerManagedBy(mgr).Named("count-" + name).For(&corev1.ConfigMap{}).Complete(r.counter); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		r.cancel = cancel
		go func() { defer close(r.done); _ = mgr.Start(ctx) }()
		return r
	}
	a, b := start("a"), start("b")
	defer func() { a.cancel(); b.cancel(); <-a.done; <-b.done }()

	var leader, follower *replica
	waitFor(t, "a leader", 20*time.Second, func() bool {
		select {
		case <-a.elected:
			leader, follower = a, b
		case <-b.elected:
			leader, follower = b, a
		default:
			return false
		}
		return true
	})
	for i := range 5 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%d", i)}}
		if err := kube.Create(context.Background(), cm); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the leader to reconcile", 10*time.Second, func() bool { return leader.counter.n.Load() >= 5 })
	// Give the follower every chance to (wrongly) reconcile too.
	time.Sleep(time.Second)
	if n := follower.counter.n.Load(); n != 0 {
		t.Fatalf("the follower reconciled %d times while not leading", n)
	}
	select {
	case <-follower.elected:
		t.Fatal("both managers consider themselves elected")
	default:
	}

	// The leader shuts down gracefully and releases the lease: the other
	// takes over and reconciles.
	leader.cancel()
	<-leader.done
	waitFor(t, "the follower to take over", 20*time.Second, func() bool {
		select {
		case <-follower.elected:
			return follower.counter.n.Load() > 0
		default:
			return false
		}
	})
	t.Logf("leader reconciled %d, follower 0 while following and %d after taking over", leader.counter.n.Load(), follower.counter.n.Load())
}

func TestMetricsAndProbesOfARunningManager(t *testing.T) {
	shared.Use(t)
	ctx, cancel := context.WithCancel(context.Background())
	metricsAddr, probeAddr := freeAddr(t), freeAddr(t)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, cfg, Config{MetricsAddr: metricsAddr, ProbeAddr: probeAddr, LeaderElectionID: "metrics-test", SkipNameValidation: true, EgressAllow: []string{"127.0.0.1/32"}})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	reader, err := testenv.MetricsReaderToken(ctx, cfg, "manager-metrics-reader", true)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := testenv.MetricsReaderToken(ctx, cfg, "manager-metrics-stranger", false)
	if err != nil {
		t.Fatal(err)
	}
	token := reader
	get := func(path string, addr string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	waitFor(t, "readyz", 20*time.Second, func() bool { code, _ := get("/readyz", probeAddr); return code == http.StatusOK })
	if code, body := get("/healthz", probeAddr); code != http.StatusOK {
		t.Fatalf("healthz %d: %s", code, body)
	}

	// A catalog whose embeddings come from an OpenAI-compatible server,
	// so provider metrics have something to count.
	p := openaitest.New(t)
	ns := testenv.Namespace(t, kube, "metrics-")
	objs := []client.Object{
		&v1alpha1.ToolDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "weather", Labels: map[string]string{"c": "m"}},
			Spec: v1alpha1.ToolDefinitionSpec{Name: "get_weather", Description: "Get the weather for a city."}},
		&v1alpha1.ToolCatalog{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m"}, Spec: v1alpha1.ToolCatalogSpec{
			Selector:  metav1.LabelSelector{MatchLabels: map[string]string{"c": "m"}},
			Redis:     v1alpha1.RedisSpec{Addresses: []string{redisSrv.Addr}},
			Embedding: v1alpha1.EmbeddingSpec{Provider: v1alpha1.ProviderOpenAI, Model: "text-embedding-3-small", BaseURL: p.BaseURL()},
		}},
		// Nothing listens on this address: a Redis error to count.
		&v1alpha1.ToolCatalog{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dead"}, Spec: v1alpha1.ToolCatalogSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"c": "dead"}},
			Redis:    v1alpha1.RedisSpec{Addresses: []string{freeAddr(t)}},
		}},
	}
	for _, o := range objs {
		if err := kube.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	catalog := ns + "/m"
	want := []string{
		`toolcatalog_catalog_version{catalog="` + catalog + `"} 1`,
		`toolcatalog_tools{catalog="` + catalog + `",state="embedded"} 1`,
		`toolcatalog_tools{catalog="` + catalog + `",state="stale"} 0`,
		`toolcatalog_tools_embedded_total{catalog="` + catalog + `"} 1`,
		`toolcatalog_publish_duration_seconds_count{catalog="` + catalog + `"} 1`,
		`toolcatalog_provider_requests_total{model="text-embedding-3-small",outcome="success",provider="openai-embeddings"} 1`,
		// Any count: the manager also reconciles what other tests of the
		// package left behind (a catalog whose provider is gone, graded
		// after a restart, retries its requests).
		`toolcatalog_provider_request_duration_seconds_count{model="text-embedding-3-small",provider="openai-embeddings"} `,
		`toolcatalog_redis_errors_total{catalog="` + ns + `/dead",operation="read"}`,
	}
	var body string
	var missing []string
	var mu sync.Mutex
	defer func() {
		if t.Failed() {
			mu.Lock()
			defer mu.Unlock()
			t.Logf("the last /metrics lacked %q; it held:\n%s", missing, body)
		}
	}()
	waitFor(t, "the catalog's metrics", 30*time.Second, func() bool {
		_, b := get("/metrics", metricsAddr)
		mu.Lock()
		defer mu.Unlock()
		body, missing = b, nil
		for _, w := range want {
			if !strings.Contains(b, w) {
				missing = append(missing, w)
			}
		}
		return len(missing) == 0
	})
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "toolcatalog_") && !strings.Contains(line, "_bucket") {
			t.Log(line)
		}
	}

	// The metrics name every namespace's catalogs: only a client whose
	// token may get /metrics reads them.
	for _, tt := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {"not-a-token", http.StatusUnauthorized}, {stranger, http.StatusForbidden}, {reader, http.StatusOK}} {
		token = tt.token
		if code, b := get("/metrics", metricsAddr); code != tt.want || (code != http.StatusOK && strings.Contains(b, "toolcatalog_")) {
			t.Errorf("/metrics with token %.12q: %d, want %d", tt.token, code, tt.want)
		}
	}
}

// The manager's cache holds objects without what nothing reads: kubectl
// apply's copy of the whole object and managedFields. Other annotations
// stay, and every write is a patch, so the API server keeps both. The
// strings ToolDefinitions repeat are held once.
func TestCacheDropsWhatNothingReads(t *testing.T) {
	shared.Use(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := testenv.Namespace(t, kube, "cache-")
	td := &v1alpha1.ToolDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "weather", Labels: map[string]string{"team": "forecasts"}, Annotations: map[string]string{
		corev1.LastAppliedConfigAnnotation: `{"spec":{"description":"` + strings.Repeat("a long description ", 100) + `"}}`,
		"team.example.com/owner":           "weather",
	}}, Spec: v1alpha1.ToolDefinitionSpec{Name: "get_weather", Description: "Get the weather for a city."}}
	// A second tool with the same labels, records and conditions: the
	// cache holds the strings they repeat once.
	twin := &v1alpha1.ToolDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forecast", Labels: map[string]string{"team": "forecasts"}},
		Spec: v1alpha1.ToolDefinitionSpec{Name: "get_forecast", Description: "Get the forecast for a city."}}
	for _, obj := range []*v1alpha1.ToolDefinition{td, twin} {
		if err := kube.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		obj.Status = v1alpha1.ToolDefinitionStatus{SpecHash: "sha256:" + obj.Name,
			Catalogs: []v1alpha1.CatalogEmbeddingStatus{{Catalog: "weather-tools", SpecHash: "sha256:" + obj.Name, Model: "text-embedding-3-small"}},
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonEmbedded,
				Message: "embedded in weather-tools (version 12)", LastTransitionTime: metav1.Now()}}}
		if err := kube.Status().Update(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	mgr, err := New(cfg, Config{MetricsAddr: "0", ProbeAddr: "0", LeaderElectionID: "cache-test", SkipNameValidation: true, WatchNamespaces: []string{ns}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	cached := &v1alpha1.ToolDefinition{}
	if err := mgr.GetCache().Get(ctx, client.ObjectKeyFromObject(td), cached); err != nil {
		t.Fatal(err)
	}
	if cached.Annotations["team.example.com/owner"] != "weather" {
		t.Fatalf("the cached object lost its other annotations: %v", cached.Annotations)
	}
	if _, ok := cached.Annotations[corev1.LastAppliedConfigAnnotation]; ok {
		t.Fatal("the cache holds kubectl's last-applied-configuration")
	}
	if cached.ManagedFields != nil {
		t.Fatal("the cache holds managedFields")
	}
	other := &v1alpha1.ToolDefinition{}
	if err := mgr.GetCache().Get(ctx, client.ObjectKeyFromObject(twin), other); err != nil {
		t.Fatal(err)
	}
	a, b := cached.Status, other.Status
	if len(a.Conditions) != 1 || len(b.Conditions) != 1 || len(a.Catalogs) != 1 || len(b.Catalogs) != 1 {
		t.Fatalf("cached statuses %+v and %+v", a, b)
	}
	for what, pair := range map[string][2]string{
		"label value":       {cached.Labels["team"], other.Labels["team"]},
		"condition message": {a.Conditions[0].Message, b.Conditions[0].Message},
		"condition reason":  {a.Conditions[0].Reason, b.Conditions[0].Reason},
		"record catalog":    {a.Catalogs[0].Catalog, b.Catalogs[0].Catalog},
		"record model":      {a.Catalogs[0].Model, b.Catalogs[0].Model},
	} {
		if pair[0] != pair[1] || unsafe.StringData(pair[0]) != unsafe.StringData(pair[1]) {
			t.Errorf("the cache holds the %s %q twice", what, pair[0])
		}
	}
	if unsafe.StringData(a.Catalogs[0].SpecHash) != unsafe.StringData(a.SpecHash) {
		t.Error("the cache holds a record's spec hash apart from the status's")
	}
	stored := &v1alpha1.ToolDefinition{}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(td), stored); err != nil {
		t.Fatal(err)
	}
	if stored.Annotations[corev1.LastAppliedConfigAnnotation] == "" || stored.ManagedFields == nil {
		t.Fatal("the API server's object lost what the cache dropped")
	}
}

// A source may not list more tools than its record of what it created
// holds: the manager refuses to start so configured.
func TestSourceMaxToolsIsBoundedByTheRecord(t *testing.T) {
	shared.Use(t)
	if _, err := New(cfg, Config{SourceMaxTools: MaxSourceTools + 1, MetricsAddr: "0", ProbeAddr: "0"}); err == nil || !strings.Contains(err.Error(), "status.imported") {
		t.Fatalf("--source-max-tools past the record: %v", err)
	}
}
