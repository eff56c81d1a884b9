package catalog_test

import (
	"maps"
	"net/http"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/providertest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/redistest"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// threeTools are the tools of the usual catalog case: a weather tool
// always included with permissions, an issue tool with an example query,
// and an email tool without parameters.
func threeTools(ns string) []*v1alpha1.ToolDefinition {
	weather := tool(ns, "weather", "get_weather", "Get the current weather for a city.")
	weather.Spec.Permissions = &v1alpha1.ToolPermissions{AllowedPrincipals: []string{"group:b", "group:a"}}
	weather.Spec.AlwaysInclude = true
	issue := tool(ns, "issue", "create_issue", "Open an issue in a GitHub repository.")
	issue.Spec.ExampleQueries = []string{"file a bug about the login page"}
	email := tool(ns, "email", "send_email", "Send an email to a recipient.")
	email.Spec.Parameters = nil
	return []*v1alpha1.ToolDefinition{weather, issue, email}
}

// catalogCase is the catalog "tools" of three tools (threeTools) of p's
// providers, published at version 1.
func catalogCase(t *testing.T, ns string, p *providertest.Provider) *harness {
	srv := redistest.New(t)
	h := newHarness(t, srv, providerCatalog(ns, srv, p), p, threeTools(ns)...)
	if res := h.converge(5, nil); res.Outcome.Version != 1 {
		t.Fatalf("the first pass published version %d", res.Outcome.Version)
	}
	return h
}

// callDelta is what a step cost: chat calls per tool and embedded texts.
type callDelta struct {
	chat  map[string]int
	texts int
}

func measure(p *providertest.Provider, step func()) callDelta {
	chatBefore := p.ChatCalls()
	_, textsBefore := p.EmbeddingCalls()
	step()
	d := callDelta{chat: map[string]int{}}
	for tool, n := range p.ChatCalls() {
		if n > chatBefore[tool] {
			d.chat[tool] = n - chatBefore[tool]
		}
	}
	_, texts := p.EmbeddingCalls()
	d.texts = texts - textsBefore
	return d
}

// refresh asks for a refresh (toolcatalog.dev/refresh-* annotations) and
// runs passes until one settles.
func (h *harness) refresh(token, mode, tools string) catalog.PassResult {
	h.t.Helper()
	h.tc.Annotations = map[string]string{v1alpha1.AnnotationRefreshRequestedAt: token, v1alpha1.AnnotationRefreshMode: mode, v1alpha1.AnnotationRefreshTools: tools}
	return h.converge(5, nil)
}

// corruptQueries overwrites a tool's stored query set with one entry.
func (h *harness) corruptQueries(tool string) {
	h.t.Helper()
	m, err := contract.ParseMetadata(h.rc.HGet(h.ctx, h.keys.Metadata(), tool).Val())
	if err != nil {
		h.t.Fatal(err)
	}
	m.SyntheticQueries = []string{"only one"}
	raw, _ := m.Marshal()
	if err := h.rc.HSet(h.ctx, h.keys.Metadata(), tool, raw).Err(); err != nil {
		h.t.Fatal(err)
	}
}

func expectCalls(t *testing.T, step string, d callDelta, chat map[string]int, texts int) {
	t.Helper()
	if !maps.Equal(d.chat, chat) || d.texts != texts {
		t.Errorf("%s: chat calls %v and %d texts embedded; want %v and %d", step, d.chat, d.texts, chat, texts)
	}
}

func TestRefreshModes(t *testing.T) {
	p := providertest.New(t)
	h := catalogCase(t, "modes", p)

	// A corrupted query set is invalid: only that tool's queries are
	// regenerated, by a normal pass.
	h.corruptQueries("send_email")
	var res catalog.PassResult
	d := measure(p, func() { res = h.refresh("1", "", "") })
	expectCalls(t, "a normal pass after a corruption", d, map[string]int{"send_email": 1}, 3)
	if res.Outcome.Version != 2 {
		t.Errorf("version %d after the corruption was mended, want 2", res.Outcome.Version)
	}
	// embed-only: vectors from stored queries, no chat call at all.
	expectCalls(t, "embed-only", measure(p, func() { h.refresh("2", "embed-only", "") }), map[string]int{}, 9)
	// invalid-only: only the tool whose set is invalid.
	h.corruptQueries("create_issue")
	expectCalls(t, "invalid-only", measure(p, func() { h.refresh("3", "invalid-only", "") }), map[string]int{"create_issue": 1}, 3)
	// force: every tool.
	expectCalls(t, "force", measure(p, func() { h.refresh("4", "force", "") }), map[string]int{"get_weather": 1, "create_issue": 1, "send_email": 1}, 9)
	// A tool list alone forces those tools only.
	expectCalls(t, "a tool list", measure(p, func() { h.refresh("5", "", "get_weather, send_email") }), map[string]int{"get_weather": 1, "send_email": 1}, 6)
	// The same token again is not a new request.
	expectCalls(t, "the same token again", measure(p, func() { h.refresh("5", "force", "") }), map[string]int{}, 0)
	// An unknown mode is reported and ignored: a normal pass.
	d = measure(p, func() { res = h.refresh("6", "everything", "") })
	expectCalls(t, "an unknown mode", d, map[string]int{}, 0)
	if r := res.Request.Result(res.Outcome.Plans); r == nil || r.Result != v1alpha1.RefreshFailed || !strings.Contains(r.Message, `not "everything"`) {
		t.Errorf("an unknown mode's result: %+v", r)
	}
}

func TestModelChangeMakesEveryToolStale(t *testing.T) {
	p := providertest.New(t)
	h := catalogCase(t, "model", p)
	var res catalog.PassResult
	d := measure(p, func() {
		h.tc.Spec.Embedding.Model = "text-embedding-3-large"
		h.tc.Generation++
		res = h.converge(5, nil)
	})
	// Queries are still valid: re-embedded, not regenerated.
	expectCalls(t, "a model change", d, map[string]int{}, 9)
	if res.Outcome.Version != 2 {
		t.Errorf("version %d, want 2", res.Outcome.Version)
	}
	if doc := h.document(); doc.Embedding.Model != "text-embedding-3-large" {
		t.Errorf("the document's model is %s", doc.Embedding.Model)
	}
	for name, raw := range h.rc.HGetAll(h.ctx, h.keys.Metadata()).Val() {
		if m, err := contract.ParseMetadata(raw); err != nil || m.Model != "text-embedding-3-large" {
			t.Errorf("the metadata of %s: %v, %v", name, m, err)
		}
	}
}

// document is the version Redis holds.
func (h *harness) document() *contract.Document {
	h.t.Helper()
	snap, err := contract.Read(h.ctx, h.rc, h.keys)
	if err != nil {
		h.t.Fatal(err)
	}
	doc, err := snap.Document()
	if err != nil || doc == nil {
		h.t.Fatalf("no document under %s: %v", h.keys.Prefix, err)
	}
	return doc
}

// dump is every key of the catalog's Redis, to compare byte for byte.
func (h *harness) dump() string {
	h.t.Helper()
	d, err := redistest.Dump(h.ctx, h.rc, "*")
	if err != nil {
		h.t.Fatal(err)
	}
	return d
}

func TestProviderFailures(t *testing.T) {
	p := providertest.New(t)
	h := catalogCase(t, "failures", p)
	oldVectors := h.rc.HGetAll(h.ctx, h.keys.Embeddings()).Val()
	oldMeta := h.rc.HGetAll(h.ctx, h.keys.Metadata()).Val()

	// One tool's provider fails: the others are published, it keeps its
	// previous vector, metadata and document entry, and is listed.
	p.Fail("get_weather", http.StatusInternalServerError)
	for _, name := range []string{"weather", "email"} {
		h.edit(name, func(td *v1alpha1.ToolDefinition) { td.Spec.Description += " Now with more detail." })
	}
	res := h.run()
	o := res.Outcome
	if res.Err != nil || o.Version != 2 {
		t.Fatalf("version %d, %v; want version 2 published", o.Version, res.Err)
	}
	failing := o.FailingTools()
	if len(failing) != 1 || failing[0].ToolDefinition != "weather" || failing[0].Tool != "get_weather" ||
		failing[0].Reason != v1alpha1.ReasonQueryGenerationFailed || !strings.Contains(failing[0].Message, "cannot serve get_weather") {
		t.Fatalf("failing tools %+v", failing)
	}
	if c := o.Counts(); c.Failed != 1 || c.Stale != 1 {
		t.Errorf("counts %+v; want one failed and stale", c)
	}
	if status, reason, _ := o.Synced(); status != metav1.ConditionFalse || reason != v1alpha1.ReasonToolsFailed {
		t.Errorf("EmbeddingsSynced %s/%s", status, reason)
	}
	if got, _ := o.Records(nil).For("weather", nil); got.Reason != v1alpha1.ReasonQueryGenerationFailed {
		t.Errorf("the failed tool's record: %+v", got)
	}
	if h.rc.HGet(h.ctx, h.keys.Embeddings(), "get_weather").Val() != oldVectors["get_weather"] ||
		h.rc.HGet(h.ctx, h.keys.Metadata(), "get_weather").Val() != oldMeta["get_weather"] {
		t.Error("the failed tool's vector or metadata changed")
	}
	if h.rc.HGet(h.ctx, h.keys.Embeddings(), "send_email").Val() == oldVectors["send_email"] {
		t.Error("the edited tool was not re-embedded")
	}
	doc := h.document()
	if w, _ := doc.ToolByName("get_weather"); w.Description != "Get the current weather for a city." {
		t.Errorf("the failed tool's entry: %q", w.Description)
	}
	if e, _ := doc.ToolByName("send_email"); !strings.HasSuffix(e.Description, "Now with more detail.") {
		t.Errorf("the edited tool's entry: %q", e.Description)
	}

	// Every target fails: Redis stays byte for byte as it was, and the
	// outcome says why.
	p.Fail("*", http.StatusServiceUnavailable)
	before := h.dump()
	for _, name := range []string{"issue", "email"} {
		h.edit(name, func(td *v1alpha1.ToolDefinition) { td.Spec.Description += " Edited again." })
	}
	res = h.run()
	if o := res.Outcome; res.Err != nil || len(o.FailingTools()) != 3 || o.Counts().Failed != 3 || o.Published {
		t.Fatalf("every target failing: %v, %+v", res.Err, o.FailingTools())
	}
	if _, _, message := res.Outcome.Synced(); !strings.Contains(message, "3 tools failed to refresh") {
		t.Errorf("EmbeddingsSynced says %q", message)
	}
	if after := h.dump(); after != before {
		t.Error("Redis changed although every tool failed")
	}

	// Healed: everything is published.
	p.Fail("*", 0)
	p.Fail("get_weather", 0)
	res = h.converge(5, nil)
	if o := res.Outcome; o.Version != 3 || len(o.FailingTools()) != 0 || !reflect.DeepEqual(o.Counts(), v1alpha1.ToolCounts{Tools: 3, Embedded: 3}) {
		t.Errorf("healed: version %d, failing %v, counts %+v", o.Version, o.FailingTools(), o.Counts())
	}
}

func TestProviderAuthFailure(t *testing.T) {
	p := providertest.NewWire(t)
	p.APIKeys = []string{"sk-right"}
	h := keyedHarness(t, "auth", p, "llm")
	h.secrets(secret("auth", "llm", map[string]string{"apiKey": "sk-wrong"}))
	res := h.run()
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	status, reason, message := res.Outcome.Synced()
	if status != metav1.ConditionFalse || reason != v1alpha1.ReasonProviderAuthFailed || !strings.Contains(message, "apiKeySecretRef") || strings.Contains(message, "sk-wrong") {
		t.Errorf("EmbeddingsSynced %s/%s: %s", status, reason, message)
	}
	// One attempt per route: a rejected key is not retried (the
	// harness's policy would retry once).
	refused := p.Refused()
	if len(refused) == 0 {
		t.Error("no request reached the provider")
	}
	for path, n := range refused {
		if n > 1 {
			t.Errorf("%d requests to %s with a rejected key, want 1", n, path)
		}
	}
}

// Tool names in toolcatalog.dev/refresh-tools that the catalog does not
// have are reported; a request naming none it has fails visibly.
func TestRefreshReportsUnknownTools(t *testing.T) {
	p := providertest.New(t)
	h := catalogCase(t, "unknown", p)
	result := func(res catalog.PassResult) *v1alpha1.RefreshResult { return res.Request.Result(res.Outcome.Plans) }

	res := h.refresh("partly", "force", "get_weather, get_wether")
	if got, want := result(res), (&v1alpha1.RefreshResult{
		RequestedAt: "partly", Result: v1alpha1.RefreshPartiallyIgnored, UnknownTools: []string{"get_wether"},
		Message: `refresh request "partly" ignored 1 tools that are not in the catalog (get_wether) and refreshed the others`,
	}); !reflect.DeepEqual(got, want) {
		t.Errorf("result %+v; want %+v", got, want)
	}
	if n := p.ChatCalls()["get_weather"]; n != 2 {
		t.Errorf("the known tool was generated for %d times, want 2 (it was still refreshed)", n)
	}
	res = h.refresh("none", "embed-only", "nope,nada")
	if r := result(res); r.Result != v1alpha1.RefreshFailed || !reflect.DeepEqual(r.UnknownTools, []string{"nope", "nada"}) ||
		!strings.Contains(r.Message, "none of the requested tools (nope, nada) is in the catalog") {
		t.Errorf("result %+v", r)
	}
	if r := result(h.refresh("all-known", "force", "send_email")); r.Result != v1alpha1.RefreshSucceeded || len(r.UnknownTools) != 0 {
		t.Errorf("result %+v", r)
	}
}
