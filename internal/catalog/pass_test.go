package catalog_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalogconfig"
	"github.com/toolcatalog/tool-catalog-operator/internal/published"
	"github.com/toolcatalog/tool-catalog-operator/internal/redisconn"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/redistest"
)

// The pass runs with in-process ports: the ToolDefinitions a catalog
// selects are held here, and its store is the product's own over a real
// redis-server.

// objects is the pass's Objects port over ToolDefinitions held in memory.
type objects struct {
	mu    sync.Mutex
	tools map[string]*v1alpha1.ToolDefinition
	// fail, when set, is the error every listing returns.
	fail error
}

func newObjects(tds ...*v1alpha1.ToolDefinition) *objects {
	o := &objects{tools: map[string]*v1alpha1.ToolDefinition{}}
	for _, td := range tds {
		o.put(td)
	}
	return o
}

// put creates or replaces a ToolDefinition as the API server would: a
// new UID for a new object, the next generation for a changed one.
func (o *objects) put(td *v1alpha1.ToolDefinition) {
	o.mu.Lock()
	defer o.mu.Unlock()
	key := td.Namespace + "/" + td.Name
	td = td.DeepCopy()
	if was := o.tools[key]; was != nil {
		td.UID, td.Generation = was.UID, was.Generation+1
	} else {
		td.UID, td.Generation = types.UID("uid-"+key), 1
	}
	o.tools[key] = td
}

func (o *objects) edit(namespace, name string, edit func(*v1alpha1.ToolDefinition)) {
	o.mu.Lock()
	td := o.tools[namespace+"/"+name].DeepCopy()
	o.mu.Unlock()
	edit(td)
	o.put(td)
}

func (o *objects) ToolDefinitions(_ context.Context, namespace string, sel labels.Selector) ([]*v1alpha1.ToolDefinition, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.fail != nil {
		return nil, o.fail
	}
	var out []*v1alpha1.ToolDefinition
	for _, td := range o.tools {
		if td.Namespace == namespace && sel.Matches(labels.Set(td.Labels)) {
			out = append(out, td)
		}
	}
	slices.SortFunc(out, func(a, b *v1alpha1.ToolDefinition) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (o *objects) Lookup(context.Context) (func(namespace, name string) *v1alpha1.ToolDefinition, bool, error) {
	return func(namespace, name string) *v1alpha1.ToolDefinition {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.tools[namespace+"/"+name]
	}, true, nil
}

func (o *objects) ToolSources(context.Context, string) (catalog.Sources, error) {
	return func(string) *v1alpha1.ToolSource { return nil }, nil
}

const catalogLabel = "test.toolcatalog.dev/catalog"

// tool is a ToolDefinition the catalog "tools" selects.
func tool(ns, object, name, description string) *v1alpha1.ToolDefinition {
	return &v1alpha1.ToolDefinition{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: object, Labels: map[string]string{catalogLabel: "tools"}},
		Spec: v1alpha1.ToolDefinitionSpec{Name: name, Description: description,
			Parameters: &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)}},
	}
}

// builtinCatalog is the catalog "tools" of namespace ns on redis at addr,
// with the builtin model and queries.
func builtinCatalog(ns, addr string) *v1alpha1.ToolCatalog {
	return &v1alpha1.ToolCatalog{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tools", UID: "6a1f3c2e-0000-4000-8000-000000000001"},
		Spec: v1alpha1.ToolCatalogSpec{
			Selector:        metav1.LabelSelector{MatchLabels: map[string]string{catalogLabel: "tools"}},
			Redis:           v1alpha1.RedisSpec{Addresses: []string{addr}},
			Embedding:       v1alpha1.EmbeddingSpec{Provider: v1alpha1.ProviderBuiltin},
			QueryGeneration: v1alpha1.QueryGenerationSpec{Provider: v1alpha1.ProviderBuiltin},
		},
	}
}

// newPass is a pass over objs with the product's own resolver, provider
// cache and published catalogs (returned too: the watch tells them what
// changed), on clock.
func newPass(t *testing.T, objs catalog.Objects, clock func() time.Time) (*catalog.Pass, *published.States) {
	pool := redisconn.NewPool()
	t.Cleanup(pool.Close)
	cats := &published.States{Pool: pool, Now: clock}
	return &catalog.Pass{
		Configs:   &catalogconfig.Resolver{},
		Providers: &catalogconfig.ProviderCache{},
		States:    cats,
		Objects:   objs,
		Now:       clock,
	}, cats
}

// What two passes write to Redis (a first version of three tools, then a
// second after one description changed) is pinned byte for byte: the
// Redis contract does not move unless this file does.
func TestPublishedVersionGolden(t *testing.T) {
	const ns, golden = "golden", "testdata/published.golden"
	ctx := context.Background()
	srv := redistest.New(t)
	tc := builtinCatalog(ns, srv.Addr)
	tc.Spec.Publish.Channel = "toolcatalog:golden"
	weather := tool(ns, "weather", "get_weather", "Get the current weather for a city.")
	weather.Spec.AlwaysInclude = true
	issue := tool(ns, "issue", "create_issue", "Open an issue in a GitHub repository.")
	issue.Spec.ExampleQueries = []string{"file a bug about the login page"}
	email := tool(ns, "email", "send_email", "Send an email to a recipient.")
	email.Spec.Parameters = nil
	objs := newObjects(weather, issue, email)
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	pass, cats := newPass(t, objs, func() time.Time { return at })
	rc := srv.Client()
	var dumps strings.Builder
	for i, edit := range []func(){nil, func() {
		objs.edit(ns, "email", func(td *v1alpha1.ToolDefinition) { td.Spec.Description = "Send an email to one or more recipients." })
		cats.Changed(catalog.ID(tc), "email")
	}} {
		if edit != nil {
			edit()
			at = at.Add(time.Minute)
		}
		res := pass.Run(ctx, tc)
		if res.Err != nil {
			t.Fatalf("pass %d: %v", i+1, res.Err)
		}
		if res.Outcome.Version != int64(i+1) || !res.Held {
			t.Fatalf("pass %d: version %d, held %t", i+1, res.Outcome.Version, res.Held)
		}
		tc.Status.Version = res.Outcome.Version
		d, err := redistest.Dump(ctx, rc, "*")
		if err != nil {
			t.Fatal(err)
		}
		dumps.WriteString("# after pass " + string(rune('1'+i)) + "\n" + d)
	}
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(golden, []byte(dumps.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v: run with UPDATE_GOLDEN=1 once", err)
	}
	if dumps.String() != string(want) {
		t.Fatalf("what a pass writes to Redis changed; if that is meant, run with UPDATE_GOLDEN=1 and say so in docs/redis-contract.md. Got:\n%s", dumps.String())
	}
}

// The periodic checks (the selection made whole, every field in Redis
// compared) are the catalog's periodic pass's: a pass that follows an
// edit leaves them to it, and makes them itself only an interval late. A
// ToolDefinition the watch never named shows when they are made.
func TestAnEditsPassLeavesThePeriodicChecksToThePeriodicPass(t *testing.T) {
	const ns = "resync"
	ctx := context.Background()
	srv := redistest.New(t)
	tc := builtinCatalog(ns, srv.Addr)
	objs := newObjects(tool(ns, "a", "alpha", "Does alpha."), tool(ns, "b", "beta", "Does beta."))
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	pass, cats := newPass(t, objs, func() time.Time { return at })
	run := func(step string) []string {
		t.Helper()
		res := pass.Run(ctx, tc)
		if res.Err != nil {
			t.Fatalf("%s: %v", step, res.Err)
		}
		tc.Status.Version = res.Outcome.Version
		var names []string
		for _, e := range res.Outcome.Build.Document.Tools {
			names = append(names, e.Name)
		}
		return names
	}
	edit := func(n int) {
		objs.edit(ns, "a", func(td *v1alpha1.ToolDefinition) { td.Spec.Description = strings.Repeat("Does alpha again. ", n) })
		cats.Changed(catalog.ID(tc), "a")
	}
	run("the first pass")
	// The watch misses a ToolDefinition.
	objs.put(tool(ns, "c", "gamma", "Does gamma."))
	at = at.Add(catalogconfig.DefaultResync)
	edit(1)
	if got := run("the edit's pass at the interval"); !slices.Equal(got, []string{"alpha", "beta"}) {
		t.Fatalf("the edit's pass at the resync interval published %v; want alpha and beta, the selection made whole by the periodic pass", got)
	}
	if got := run("the periodic pass"); !slices.Equal(got, []string{"alpha", "beta", "gamma"}) {
		t.Fatalf("the periodic pass published %v; want gamma too, the selection made whole", got)
	}
	// Edits that leave no periodic pass make the checks an interval late.
	objs.put(tool(ns, "d", "delta", "Does delta."))
	for i, want := range [][]string{{"alpha", "beta", "gamma"}, {"alpha", "beta", "delta", "gamma"}} {
		at = at.Add(catalogconfig.DefaultResync)
		edit(i + 2)
		if got := run("an edit's pass"); !slices.Equal(got, want) {
			t.Fatalf("the edit's pass %d intervals after the checks published %v; want %v", i+1, got, want)
		}
	}
}
