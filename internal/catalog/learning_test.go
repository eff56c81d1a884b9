package catalog_test

import (
	"context"
	"slices"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/redistest"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/builtin"
)

// rankOf is a tool's rank for a request in the published catalog,
// searched the way a consumer does; 0 when it is not in the top 10.
func rankOf(t *testing.T, cat *toolcatalog.Catalog, request, tool string) int {
	t.Helper()
	resp, err := cat.Search(context.Background(), request, toolcatalog.Options{TopK: 10, Embedder: builtin.Embedder{}})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range resp.Results {
		if r.Tool.Name == tool {
			return i + 1
		}
	}
	return 0
}

// A learning catalog folds the requests consumers recorded into the tools
// they led to: a new version re-embeds only those tools, a held-back
// request in the same words ranks its tool higher, and turning learning
// off deletes the recorded text.
func TestLearningFromRecordedRequests(t *testing.T) {
	const ns = "learns"
	srv := redistest.New(t)
	tc := builtinCatalog(ns, srv.Addr)
	tc.Spec.Learning = v1alpha1.LearningSpec{Enabled: true, MinCount: 2, MinPrincipals: 2, QueriesPerTool: 3}
	h := newHarness(t, srv, tc, nil,
		tool(ns, "weather", "get_weather", "Get the current weather conditions and the forecast for a city."),
		tool(ns, "email", "send_email", "Send an email message to a recipient."),
		tool(ns, "issue", "create_issue", "Open an issue in a GitHub repository."),
		tool(ns, "sql", "run_sql", "Run a read-only SQL query on the analytics warehouse."),
		tool(ns, "room", "book_room", "Reserve a meeting room in the office for a time slot."),
	)
	if res := h.converge(5, nil); res.Outcome.Counts().Tools != 5 {
		t.Fatalf("%d tools", res.Outcome.Counts().Tools)
	}
	ctx, rc, keys := h.ctx, h.rc, h.keys
	cat, err := toolcatalog.Load(ctx, rc, keys)
	if err != nil || !cat.Document.Search.LearnFromRequests {
		t.Fatalf("the catalog does not say it learns: %v", err)
	}

	// The team calls its rooms after fish tanks; the catalog cannot know.
	heldBack := "is the fishbowl free for our standup"
	before := rankOf(t, cat, heldBack, "book_room")
	if before == 1 {
		t.Fatal("the held-back request already finds book_room first")
	}

	// Usage: the runtime's own pairs, by two principals, and a
	// tool_search → tool_call through the bridge.
	record := func(principal, request string) {
		t.Helper()
		if recordErr := toolcatalog.RecordRequest(ctx, rc, keys, cat, principal, request, "book_room"); recordErr != nil {
			t.Fatal(recordErr)
		}
	}
	for i, req := range []string{"grab the fishbowl for standup", "grab the fishbowl for standup", "fishbowl at ten for the standup please"} {
		record([]string{"ana", "ben", "ana"}[i], req)
	}
	bridge := &toolcatalog.Bridge{Catalog: func() *toolcatalog.Catalog { return cat }, Search: toolcatalog.Options{Embedder: builtin.Embedder{}}}
	if _, _, searchErr := bridge.Handle(ctx, toolcatalog.ToolSearch, `{"query":"reserve a meeting room for the fishbowl at ten for the standup","top_k":5}`); searchErr != nil {
		t.Fatal(searchErr)
	}
	_, call, err := bridge.Handle(ctx, toolcatalog.ToolCall, `{"name":"book_room","arguments":{"q":"10:00"}}`)
	if err != nil || call.Name != "book_room" || call.Request != "reserve a meeting room for the fishbowl at ten for the standup" {
		t.Fatalf("the bridge's call: %+v, %v", call, err)
	}
	record("ana", call.Request)
	// Once only: not learned (minCount 2).
	for _, pair := range []string{`["book_room","fishbowl at ten for the standup please"]`, `["book_room","reserve a meeting room for the fishbowl at ten for the standup"]`} {
		if n := rc.ZScore(ctx, keys.Requests(), pair).Val(); n != 1 {
			t.Errorf("%s recorded %v times", pair, n)
		}
	}
	record("ben", "fishbowl at ten for the standup please")

	// A new version re-embeds exactly the tool the requests led to.
	res := h.converge(5, nil)
	if res.Outcome.Version != 2 || res.Outcome.Summary() != "5 tools, embedded 1 (book_room), 1 of them for new learned requests" {
		t.Errorf("version %d: %s", res.Outcome.Version, res.Outcome.Summary())
	}
	changes, err := contract.ReadChanges(ctx, rc, keys, 1, 2)
	if err != nil || len(changes) != 1 || !slices.Equal(changes[0].Updated, []string{"book_room"}) {
		t.Fatalf("changes %+v, %v", changes, err)
	}
	meta := func(name string) *contract.Metadata {
		m, parseErr := contract.ParseMetadata(rc.HGet(ctx, keys.Metadata(), name).Val())
		if parseErr != nil {
			t.Fatal(parseErr)
		}
		return m
	}
	// Both were recorded twice: a tie, taken in draw order.
	if got := meta("book_room").LearnedQueries; !slices.Equal(got, []string{"grab the fishbowl for standup", "fishbowl at ten for the standup please"}) {
		t.Errorf("book_room learned %q", got)
	}
	for _, other := range []string{"get_weather", "send_email", "create_issue", "run_sql"} {
		if got := meta(other).LearnedQueries; len(got) != 0 {
			t.Errorf("%s learned %q", other, got)
		}
	}
	if cat, err = toolcatalog.Load(ctx, rc, keys); err != nil {
		t.Fatal(err)
	}
	after := rankOf(t, cat, heldBack, "book_room")
	t.Logf("held-back request %q: book_room ranked %d before learning, %d after", heldBack, before, after)
	if after != 1 {
		t.Errorf("book_room ranks %d after learning", after)
	}

	// Turning learning off deletes the recorded text and the learned
	// queries, in a new version.
	h.tc.Spec.Learning.Enabled = false
	if res := h.converge(5, nil); res.Outcome.Version != 3 {
		t.Fatalf("version %d after learning was turned off", res.Outcome.Version)
	}
	if n := rc.Exists(ctx, keys.Requests(), keys.RequestsSeen(), keys.RequestsBy()).Val(); n != 0 {
		t.Errorf("%d keys of recorded requests left", n)
	}
	if got := meta("book_room").LearnedQueries; len(got) != 0 {
		t.Errorf("book_room keeps %q", got)
	}
	if cat, err = toolcatalog.Load(ctx, rc, keys); err != nil || cat.Document.Search.LearnFromRequests {
		t.Fatalf("the catalog still says it learns: %v", err)
	}
	// Consumers of a catalog that does not learn record nothing.
	if err := toolcatalog.RecordRequest(ctx, rc, keys, cat, "ana", "grab the fishbowl", "book_room"); err != nil || rc.Exists(ctx, keys.Requests()).Val() != 0 {
		t.Errorf("a request recorded for a catalog that does not learn: %v", err)
	}
}
