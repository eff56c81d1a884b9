package controllers

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/builtin"
)

// rankOf is a tool's rank for a request in the published catalog,
// searched the way a consumer does; 0 when it is not in the top 10.
func rankOf(g Gomega, cat *toolcatalog.Catalog, request, tool string) int {
	resp, err := cat.Search(context.Background(), request, toolcatalog.Options{TopK: 10, Embedder: builtin.Embedder{}})
	g.Expect(err).NotTo(HaveOccurred())
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
	g := gomegaFor(t)
	ctx := context.Background()
	ns := newNamespace(t)
	rc := redisClient(t)
	keys := catalogKeys(ns, "learns")
	tc := builtinCatalog(ns, "learns")
	tc.Spec.Publish.ResyncInterval = &metav1.Duration{Duration: time.Second}
	tc.Spec.Learning = v1alpha1.LearningSpec{Enabled: true, MinCount: 2, MinPrincipals: 2, QueriesPerTool: 3}
	createAll(g,
		testTool(ns, "weather", "get_weather", "Get the current weather conditions and the forecast for a city.", "learns"),
		testTool(ns, "email", "send_email", "Send an email message to a recipient.", "learns"),
		testTool(ns, "issue", "create_issue", "Open an issue in a GitHub repository.", "learns"),
		testTool(ns, "sql", "run_sql", "Run a read-only SQL query on the analytics warehouse.", "learns"),
		testTool(ns, "room", "book_room", "Reserve a meeting room in the office for a time slot.", "learns"),
		tc,
	)
	waitVersion(g, ns, "learns", 1)
	g.Expect(getTC(g, ns, "learns").Status.Counts.Tools).To(Equal(int32(5)))
	cat, err := toolcatalog.Load(ctx, rc, keys)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cat.Document.Search.LearnFromRequests).To(BeTrue())

	// The team calls its rooms after fish tanks; the catalog cannot know.
	heldBack := "is the fishbowl free for our standup"
	before := rankOf(g, cat, heldBack, "book_room")
	g.Expect(before).NotTo(Equal(1), "the held-back request already finds book_room first")

	// Usage: the runtime's own pairs, by two principals, and a
	// tool_search → tool_call through the bridge.
	for i, req := range []string{"grab the fishbowl for standup", "grab the fishbowl for standup", "fishbowl at ten for the standup please"} {
		g.Expect(toolcatalog.RecordRequest(ctx, rc, keys, cat, []string{"ana", "ben", "ana"}[i], req, "book_room")).To(Succeed())
	}
	bridge := &toolcatalog.Bridge{Catalog: func() *toolcatalog.Catalog { return cat }, Search: toolcatalog.Options{Embedder: builtin.Embedder{}}}
	_, _, err = bridge.Handle(ctx, toolcatalog.ToolSearch, `{"query":"reserve a meeting room for the fishbowl at ten for the standup","top_k":5}`)
	g.Expect(err).NotTo(HaveOccurred())
	_, call, err := bridge.Handle(ctx, toolcatalog.ToolCall, `{"name":"book_room","arguments":{"q":"10:00"}}`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(call.Name).To(Equal("book_room"))
	g.Expect(call.Request).To(Equal("reserve a meeting room for the fishbowl at ten for the standup"))
	g.Expect(toolcatalog.RecordRequest(ctx, rc, keys, cat, "ana", call.Request, call.Name)).To(Succeed())
	// Once only: not learned (minCount 2).
	g.Expect(rc.ZScore(ctx, keys.Requests(), `["book_room","fishbowl at ten for the standup please"]`).Val()).To(Equal(1.0))
	g.Expect(rc.ZScore(ctx, keys.Requests(), `["book_room","reserve a meeting room for the fishbowl at ten for the standup"]`).Val()).To(Equal(1.0))
	g.Expect(toolcatalog.RecordRequest(ctx, rc, keys, cat, "ben", "fishbowl at ten for the standup please", "book_room")).To(Succeed())

	// A new version re-embeds exactly the tool the requests led to.
	waitVersion(g, ns, "learns", 2)
	changes, err := contract.ReadChanges(ctx, rc, keys, 1, 2)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changes).To(HaveLen(1))
	g.Expect(changes[0].Updated).To(Equal([]string{"book_room"}))
	g.Eventually(func(g Gomega) {
		g.Expect(hasEventNote(eventsFor(g, ns, "learns"), "published version 2: 5 tools, embedded 1 (book_room), 1 of them for new learned requests")).To(BeTrue())
	}).Should(Succeed())
	meta := storedMetadata(g, rc, keys)
	// Both were recorded twice: a tie, taken in draw order.
	g.Expect(meta["book_room"].LearnedQueries).To(Equal([]string{"grab the fishbowl for standup", "fishbowl at ten for the standup please"}))
	for _, other := range []string{"get_weather", "send_email", "create_issue", "run_sql"} {
		g.Expect(meta[other].LearnedQueries).To(BeEmpty())
	}
	cat, err = toolcatalog.Load(ctx, rc, keys)
	g.Expect(err).NotTo(HaveOccurred())
	after := rankOf(g, cat, heldBack, "book_room")
	t.Logf("held-back request %q: book_room ranked %d before learning, %d after", heldBack, before, after)
	g.Expect(after).To(Equal(1))

	// Turning learning off deletes the recorded text and the learned
	// queries, in a new version.
	editTC(g, ns, "learns", func(tc *v1alpha1.ToolCatalog) { tc.Spec.Learning.Enabled = false })
	waitVersion(g, ns, "learns", 3)
	g.Expect(rc.Exists(ctx, keys.Requests(), keys.RequestsSeen(), keys.RequestsBy()).Val()).To(BeZero())
	g.Expect(storedMetadata(g, rc, keys)["book_room"].LearnedQueries).To(BeEmpty())
	cat, err = toolcatalog.Load(ctx, rc, keys)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cat.Document.Search.LearnFromRequests).To(BeFalse())
	// Consumers of a catalog that does not learn record nothing.
	g.Expect(toolcatalog.RecordRequest(ctx, rc, keys, cat, "ana", "grab the fishbowl", "book_room")).To(Succeed())
	g.Expect(rc.Exists(ctx, keys.Requests()).Val()).To(BeZero())
}

func hasEventNote(events []eventsv1.Event, note string) bool {
	for _, e := range events {
		if e.Note == note {
			return true
		}
	}
	return false
}
