package catalog_test

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/reconcile"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/providertest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/redistest"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
)

// remove deletes a ToolDefinition and tells the catalog's store, as the
// watch does.
func (h *harness) remove(name string) {
	h.objs.mu.Lock()
	delete(h.objs.tools, h.tc.Namespace+"/"+name)
	h.objs.mu.Unlock()
	h.cats.Changed(catalog.ID(h.tc), name)
}

// create adds ToolDefinitions and tells the catalog's store.
func (h *harness) create(tds ...*v1alpha1.ToolDefinition) {
	for _, td := range tds {
		h.objs.put(td)
		h.cats.Changed(catalog.ID(h.tc), td.Name)
	}
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

func TestDeletedAndUnlabelledToolsAreDropped(t *testing.T) {
	h := catalogCase(t, "dropped", providertest.New(t))
	h.remove("email")
	h.edit("issue", func(td *v1alpha1.ToolDefinition) { delete(td.Labels, catalogLabel) })
	res := h.converge(5, nil)
	if c := res.Outcome.Counts(); c.Tools != 1 {
		t.Errorf("%d tools selected, want 1", c.Tools)
	}
	if doc := h.document(); len(doc.Tools) != 1 || doc.Tools[0].Name != "get_weather" {
		t.Errorf("the version holds %v", doc.Tools)
	}
	for _, key := range []string{h.keys.Embeddings(), h.keys.Metadata()} {
		if got := sortedKeys(h.rc.HGetAll(h.ctx, key).Val()); !slices.Equal(got, []string{"get_weather"}) {
			t.Errorf("%s holds %v", key, got)
		}
	}
	// Neither has a record of the catalog any more.
	recs := res.Outcome.Records(nil)
	for _, name := range []string{"email", "issue"} {
		if _, selected := recs.For(name, nil); selected {
			t.Errorf("%s still has a record", name)
		}
	}
}

func TestConflictsAndRejectedToolsAreReported(t *testing.T) {
	h := catalogCase(t, "conflicts", providertest.New(t))
	published, _ := h.document().ToolByName("send_email")

	// A second ToolDefinition takes the name send_email: neither wins,
	// and the published entry stays as it was.
	bad := tool(h.tc.Namespace, "broken", "broken_tool", "A tool with a broken schema.")
	bad.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","required":"x"}`)}
	h.create(tool(h.tc.Namespace, "email-v2", "send_email", "Send an email, the new way."), bad)
	res := h.converge(5, nil)
	o := res.Outcome
	reasons := map[string]string{}
	for _, f := range o.FailingTools() {
		reasons[f.ToolDefinition] = f.Reason
	}
	if want := map[string]string{"email": v1alpha1.ReasonNameConflict, "email-v2": v1alpha1.ReasonNameConflict, "broken": v1alpha1.ReasonInvalidSpec}; !maps.Equal(reasons, want) {
		t.Errorf("failing tools %v; want %v", reasons, want)
	}
	if c := o.Counts(); c.Rejected != 3 || c.Tools != 2 {
		t.Errorf("counts %+v; want 3 rejected of 2 selected names", c)
	}
	if _, reason, message := o.Synced(); reason != v1alpha1.ReasonNameConflict || !strings.Contains(message, "send_email") {
		t.Errorf("EmbeddingsSynced %s: %s", reason, message)
	}
	doc := h.document()
	if still, ok := doc.ToolByName("send_email"); !ok || !reflect.DeepEqual(still, published) {
		t.Errorf("the published entry changed: %+v", still)
	}
	if _, ok := doc.ToolByName("broken_tool"); ok {
		t.Error("the broken tool was published")
	}
	if rec, _ := o.Records(nil).For("email-v2", nil); rec.Reason != v1alpha1.ReasonNameConflict || !strings.Contains(rec.Message, "email, email-v2") {
		t.Errorf("the record of email-v2: %+v", rec)
	}

	// Resolving the conflict publishes the survivor.
	h.remove("email")
	h.converge(5, nil)
	if got, _ := h.document().ToolByName("send_email"); got.Description != "Send an email, the new way." {
		t.Errorf("send_email says %q", got.Description)
	}
}

func TestPassesSurviveARedisOutageAndAFlush(t *testing.T) {
	own := redistest.New(t)
	p := providertest.New(t)
	h := newHarness(t, own, providerCatalog("outage", own, p), p, tool("outage", "weather", "get_weather", "Get the weather."))
	h.converge(5, nil)

	// Redis goes away: the pass says so, naming the address.
	if err := own.Stop(); err != nil {
		t.Fatal(err)
	}
	h.edit("weather", func(td *v1alpha1.ToolDefinition) { td.Spec.Description = "Get the weather and the forecast." })
	res := h.run()
	e := reconcile.As(res.Err)
	if e == nil || e.Reason != v1alpha1.ReasonRedisUnavailable || !slices.Contains(e.Also, v1alpha1.ConditionPublished) || !strings.Contains(e.Message, own.Addr) {
		t.Fatalf("a pass without Redis: %v", res.Err)
	}

	// It comes back empty (no persistence): the catalog is published again
	// with a newer version than consumers have seen.
	if err := own.Restart(); err != nil {
		t.Fatal(err)
	}
	res = h.converge(20, nil)
	doc := h.document()
	if !res.Outcome.Published || doc.Version != 2 || doc.Tools[0].Description != "Get the weather and the forecast." || h.rc.HLen(h.ctx, h.keys.Embeddings()).Val() != 1 {
		t.Fatalf("after the restart: version %d, %+v", doc.Version, doc.Tools)
	}

	// FLUSHALL: the next pass republishes.
	if err := h.rc.FlushAll(h.ctx).Err(); err != nil {
		t.Fatal(err)
	}
	h.converge(5, nil)
	if v := h.rc.Get(h.ctx, h.keys.Version()).Val(); v != "3" || len(h.document().Tools) != 1 || h.rc.HLen(h.ctx, h.keys.Metadata()).Val() != 1 {
		t.Fatalf("after FLUSHALL: version %s", v)
	}
}

// A pass's configuration that names a Secret the namespace lacks stops
// the pass, saying which Secret and which field; nothing is asked of the
// providers. With the Secret there, the catalog is published.
func TestAMissingSecretStopsThePass(t *testing.T) {
	p := providertest.NewWire(t)
	p.APIKeys = []string{"sk-good"}
	h := keyedHarness(t, "secret", p, "openai")
	res := h.run()
	e := reconcile.As(res.Err)
	if e == nil || e.Kind != reconcile.Stalled || e.Reason != v1alpha1.ReasonSecretNotFound ||
		!strings.Contains(e.Message, "Secret secret/openai") || !strings.Contains(e.Message, "spec.embedding.apiKeySecretRef") {
		t.Fatalf("a pass without its Secret: %v", res.Err)
	}
	if len(p.ChatRequests()) != 0 || len(p.Refused()) != 0 {
		t.Error("the providers were asked")
	}
	h.secrets(secret("secret", "openai", map[string]string{"apiKey": "sk-good"}))
	if res := h.converge(5, nil); res.Outcome.Version != 1 {
		t.Errorf("with the Secret: version %d", res.Outcome.Version)
	}
}

// A document that cannot be read is never published over: what it held
// could not be rebuilt. Once the key is removed, the catalog is rebuilt
// from the ToolDefinitions and the stored embeddings.
func TestAnUnreadableDocumentIsNotPublishedOver(t *testing.T) {
	h := catalogCase(t, "unreadable", providertest.New(t))
	if err := h.rc.Set(h.ctx, h.keys.Head(), "garbage{", 0).Err(); err != nil {
		t.Fatal(err)
	}
	h.edit("weather", func(td *v1alpha1.ToolDefinition) { td.Spec.Description = "Get the weather and the forecast." })
	res := h.run()
	if res.Err != nil || res.Outcome.Published || !strings.Contains(res.Outcome.Build.Blocked, h.keys.Head()+" is unreadable") {
		t.Fatalf("over an unreadable document: %v, blocked %q", res.Err, res.Outcome.Build.Blocked)
	}
	if h.rc.Get(h.ctx, h.keys.Head()).Val() != "garbage{" || h.rc.Get(h.ctx, h.keys.Version()).Val() != "1" || h.rc.HLen(h.ctx, h.keys.Embeddings()).Val() != 3 {
		t.Fatal("Redis changed under an unreadable document")
	}
	if err := h.rc.Del(h.ctx, h.keys.Head()).Err(); err != nil {
		t.Fatal(err)
	}
	h.tc.Annotations = map[string]string{v1alpha1.AnnotationRefreshRequestedAt: "after-cleanup"}
	if res := h.converge(5, nil); res.Outcome.Version != 2 {
		t.Fatalf("after the cleanup: version %d", res.Outcome.Version)
	}
	doc := h.document()
	if weather, _ := doc.ToolByName("get_weather"); len(doc.Tools) != 3 || weather.Description != "Get the weather and the forecast." {
		t.Errorf("rebuilt: %+v", doc.Tools)
	}
}

// Absent permissions and "*" let everyone use a tool; an empty list lets
// nobody. The published document and consumers keep the difference.
func TestPermissionsDistinguishEveryoneFromNobody(t *testing.T) {
	perms := map[string]*v1alpha1.ToolPermissions{
		"absent":     nil,
		"unset_list": {},
		"star":       {AllowedPrincipals: []string{"*"}},
		"nobody":     {AllowedPrincipals: []string{}},
		"ops_only":   {AllowedPrincipals: []string{"group:ops"}},
	}
	var tds []*v1alpha1.ToolDefinition
	for name, p := range perms {
		td := tool("perms", strings.ReplaceAll(name, "_", "-"), name, "Tool "+name+".")
		td.Spec.Permissions = p
		tds = append(tds, td)
	}
	srv := redistest.New(t)
	p := providertest.New(t)
	h := newHarness(t, srv, providerCatalog("perms", srv, p), p, tds...)
	h.converge(5, nil)

	cat, err := toolcatalog.Load(h.ctx, h.rc, h.keys)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string][]string{"star": {"*"}, "nobody": {}, "ops_only": {"group:ops"}}; !equalPermissions(cat.Document.Permissions, want) {
		t.Errorf("permissions %v; want %v", cat.Document.Permissions, want)
	}
	entries := h.rc.HGetAll(h.ctx, h.keys.Tools()).Val()
	if !strings.Contains(entries["nobody"], `"allowed_principals":[]`) || strings.Contains(entries["absent"], "allowed_principals") {
		t.Errorf("entries: nobody %s, absent %s", entries["nobody"], entries["absent"])
	}
	for tool, want := range map[string]bool{"absent": true, "unset_list": true, "star": true, "nobody": false, "ops_only": false} {
		if got := cat.IsAllowed(tool, "user:alice"); got != want {
			t.Errorf("user:alice on %s: %t", tool, got)
		}
	}
	if !cat.IsAllowed("ops_only", "group:ops") || cat.IsAllowed("nobody", "group:ops") {
		t.Error("group:ops")
	}
}

func equalPermissions(a, b map[string][]string) bool {
	return maps.EqualFunc(a, b, func(x, y []string) bool { return slices.Equal(x, y) && (x == nil) == (y == nil) })
}
