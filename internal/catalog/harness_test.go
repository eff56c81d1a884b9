package catalog_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalogconfig"
	"github.com/toolcatalog/tool-catalog-operator/internal/egress"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/internal/kube"
	"github.com/toolcatalog/tool-catalog-operator/internal/published"
	"github.com/toolcatalog/tool-catalog-operator/internal/reconcile"
	"github.com/toolcatalog/tool-catalog-operator/internal/redisconn"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/providertest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/redistest"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

func TestMain(m *testing.M) {
	// A test that kills Redis would fill the output with the client's
	// complaints.
	redisconn.RouteLogs(logr.Discard())
	os.Exit(m.Run())
}

// harness runs the passes of one catalog as the ToolCatalog reconciler
// would, without an API server: the ToolDefinitions are held in memory
// (objects), the store is the product's own over a real redis-server, the
// providers are the product's own clients talking to an in-process
// OpenAI-compatible server (providertest), and what the reconciler keeps
// in the catalog's status for the next pass is kept here.
type harness struct {
	t    testing.TB
	ctx  context.Context
	objs *objects
	cats *published.States
	pass *catalog.Pass
	tc   *v1alpha1.ToolCatalog
	srv  *redistest.Server
	rc   *redis.Client
	keys contract.Keys
}

// generators is the pass's provider factory: the product's own cache of
// clients, reaching loopback only, with a test's query generator when
// one is set.
type generators struct {
	catalogconfig.ProviderCache
	mu  sync.Mutex
	gen embedding.QueryGenerator
}

func (g *generators) Providers(id string, s catalogconfig.ProviderSettings) (catalogconfig.Providers, error) {
	p, err := g.ProviderCache.Providers(id, s)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err == nil && g.gen != nil {
		p.Generator = g.gen
	}
	return p, err
}

// providerCatalog is the catalog "tools" of namespace ns that embeds and
// writes three queries per tool with p, over HTTP, on srv.
func providerCatalog(ns string, srv *redistest.Server, p *providertest.Provider) *v1alpha1.ToolCatalog {
	return &v1alpha1.ToolCatalog{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tools", UID: "6a1f3c2e-0000-4000-8000-000000000002", Generation: 1},
		Spec: v1alpha1.ToolCatalogSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{catalogLabel: "tools"}},
			Redis:    v1alpha1.RedisSpec{Addresses: []string{srv.Addr}},
			Embedding: v1alpha1.EmbeddingSpec{
				Provider: v1alpha1.ProviderOpenAI, Model: providertest.EmbeddingModel, BaseURL: p.BaseURL(), BatchSize: 64,
			},
			QueryGeneration: v1alpha1.QueryGenerationSpec{
				Provider: v1alpha1.ProviderOpenAI, Models: []string{providertest.ChatModel}, BaseURL: p.BaseURL(),
				QueriesPerTool: 3, Concurrency: 3,
			},
			Publish: v1alpha1.PublishSpec{Channel: "toolcatalog:test:" + ns, RetainVersions: 3},
		},
	}
}

// newHarness is a harness for tc, whose Redis is srv, with gen as the
// query generator (nil: the catalog's own), over the tools tds.
func newHarness(t testing.TB, srv *redistest.Server, tc *v1alpha1.ToolCatalog, gen embedding.QueryGenerator, tds ...*v1alpha1.ToolDefinition) *harness {
	t.Helper()
	policy, err := egress.New([]string{"127.0.0.1/32"})
	if err != nil {
		t.Fatal(err)
	}
	pool := redisconn.NewPool()
	t.Cleanup(pool.Close)
	fast := embedding.DefaultRetryPolicy()
	fast.MaxRetries = 1
	fast.Backoff.Duration = 10 * time.Millisecond
	cats := &published.States{Pool: pool}
	h := &harness{t: t, ctx: context.Background(), objs: newObjects(tds...), cats: cats, tc: tc, srv: srv,
		keys: contract.Keys{Prefix: contract.DefaultPrefix(tc.Namespace, tc.Name)}}
	h.pass = &catalog.Pass{
		Configs:   &catalogconfig.Resolver{RetryPolicy: &fast},
		Providers: &generators{ProviderCache: catalogconfig.ProviderCache{Egress: policy}, gen: gen},
		States:    cats,
		Objects:   h.objs,
	}
	h.rc = srv.Client()
	t.Cleanup(func() { _ = h.rc.Close() })
	return h
}

// run runs one pass and keeps what the reconciler keeps of it in the
// catalog's status for the next: the version, the versions published and
// the refresh request handled.
func (h *harness) run() catalog.PassResult {
	res := h.pass.Run(h.ctx, h.tc)
	if o := res.Outcome; o != nil {
		st := &h.tc.Status
		if res.Request.Token != "" {
			st.LastHandledRefreshAt = res.Request.Token
		}
		st.Version = max(st.Version, o.Version)
		if o.Published {
			st.PublishedVersions = append(st.PublishedVersions, v1alpha1.PublishedVersion{Version: o.Version, SchemaHash: o.Build.Document.SchemaHash})
		}
	}
	if res.State != nil {
		res.State.Release()
	}
	return res
}

// settled reports whether a pass left nothing for the next one to do.
func settled(res catalog.PassResult) bool {
	o := res.Outcome
	return res.Err == nil && o != nil && o.RetryableFailures() == 0 && len(o.Pending()) == 0 && len(o.Remaining()) == 0
}

// redisRetry is how soon the reconciler tries a catalog whose Redis
// was unreachable again, at first.
const redisRetry = 250 * time.Millisecond

// converge runs passes until one settles, at most max of them, calling
// each (when not nil) after every pass.
func (h *harness) converge(max int, each func(catalog.PassResult)) catalog.PassResult {
	h.t.Helper()
	var res catalog.PassResult
	for range max {
		res = h.run()
		if each != nil {
			each(res)
		}
		if settled(res) {
			return res
		}
		if reconcile.HasReason(res.Err, v1alpha1.ReasonRedisUnavailable) {
			// As the reconciler requeues: the client dials a Redis
			// that refused it again only after a moment.
			time.Sleep(redisRetry)
		}
	}
	h.t.Fatalf("not settled after %d passes; the last: %v", max, res.Err)
	return res
}

// edit changes a ToolDefinition and tells the catalog's store, as the
// watch does.
func (h *harness) edit(name string, edit func(*v1alpha1.ToolDefinition)) {
	h.objs.edit(h.tc.Namespace, name, edit)
	h.cats.Changed(catalog.ID(h.tc), name)
}

// numbered is n tools of the catalog "tools" named tool-0000 and on, each
// described by description with its number.
func numbered(ns string, n int, description string) []*v1alpha1.ToolDefinition {
	out := make([]*v1alpha1.ToolDefinition, n)
	for i := range out {
		out[i] = tool(ns, fmt.Sprintf("tool-%04d", i), fmt.Sprintf("tool_%04d", i), fmt.Sprintf(description, i))
	}
	return out
}

// secrets is the resolver's reader over Secrets held in memory.
type secrets struct {
	mu     sync.Mutex
	byName map[types.NamespacedName]*corev1.Secret
}

func (s *secrets) Get(_ context.Context, key types.NamespacedName, obj kube.Object) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sec, ok := s.byName[key]
	out, isSecret := obj.(*corev1.Secret)
	if !ok || !isSecret {
		return apierrors.NewNotFound(corev1.Resource("secrets"), key.Name)
	}
	sec.DeepCopyInto(out)
	return nil
}

// secrets gives the catalog's resolver these Secrets to read.
func (h *harness) secrets(secs ...*corev1.Secret) {
	s := &secrets{byName: map[types.NamespacedName]*corev1.Secret{}}
	for _, sec := range secs {
		s.byName[types.NamespacedName{Namespace: sec.Namespace, Name: sec.Name}] = sec
	}
	h.pass.Configs.(*catalogconfig.Resolver).Reader = s
}

// secret is a Secret that opted in to being used by catalogs.
func secret(ns, name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{v1alpha1.LabelSecret: v1alpha1.LabelSecretValue}},
		Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// keyedHarness is a harness for the catalog "tools" of namespace ns whose
// providers, p's over HTTP, accept only the API keys p names, both read
// from the key "apiKey" of the Secret secretName; it has the one tool
// get_weather and no Secret yet.
func keyedHarness(t *testing.T, ns string, p *providertest.Provider, secretName string) *harness {
	t.Helper()
	srv := redistest.New(t)
	tc := providerCatalog(ns, srv, p)
	ref := &v1alpha1.SecretKeySelector{Name: secretName, Key: "apiKey"}
	tc.Spec.Embedding.APIKeySecretRef, tc.Spec.QueryGeneration.APIKeySecretRef = ref, ref
	h := newHarness(t, srv, tc, nil, tool(ns, "weather", "get_weather", "Get the weather."))
	h.secrets()
	return h
}
