package index

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/text"
)

// A request for three things gets each intent's best tool, says which
// intent placed it, and reports each intent's blend.
func TestSearchGivesEachIntentItsShare(t *testing.T) {
	c := buildFixture(t, fixture, contract.SearchDefaults{})
	emb := lexicalEmbedder()
	req := "Please send an email to my manager about the outage, and then open an issue in the repository about the crash. Also translate the text to Spanish."
	for _, m := range Methods {
		r := search(t, c, req, Options{Method: m, TopK: 4, Embedder: emb})
		if len(r.Intents) != 3 {
			t.Fatalf("%s: intents %+v, want 3", m, r.Intents)
		}
		byIntent := map[string]string{}
		for _, res := range r.Results {
			if res.Why == WhyIntent {
				byIntent[res.Tool.Name] = res.Intent
			}
		}
		want := map[string]string{
			"send_email":     "Please send an email to my manager about the outage",
			"create_issue":   "open an issue in the repository about the crash",
			"translate_text": "Also translate the text to Spanish",
		}
		for tool, intent := range want {
			if byIntent[tool] != intent {
				t.Errorf("%s: %s placed by intent %q, want %q (results %v)", m, tool, byIntent[tool], intent, names(r.Results))
			}
		}
		if r.Results[0].Tool.Name != "web_search" || r.Results[0].Why != WhyAlwaysInclude {
			t.Errorf("%s: the always-included tool does not come first: %v", m, names(r.Results))
		}
		for _, in := range r.Intents {
			if in.MinLexicalEvidence != DefaultMinLexicalEvidence {
				t.Errorf("%s: intent %q has no blend: %+v", m, in.Text, in)
			}
		}
	}
}

// A long intent crowds a short one out of the whole request's ranking;
// searched by intent, the short one gets its place.
func TestSearchIntentsOutweighALongerOne(t *testing.T) {
	crowd := append(slices.Clone(fixture),
		fixtureTool{name: "forward_email", description: "Forward an email message to another recipient.", queries: []string{"forward this mail to my manager", "pass the email on to the team"}},
		fixtureTool{name: "reply_email", description: "Reply to an email message from a sender.", queries: []string{"answer my manager's email", "reply to the team's message"}},
	)
	c := buildFixture(t, crowd, contract.SearchDefaults{})
	emb := lexicalEmbedder()
	req := "Send an email message to my manager and the team about the outage with the incident summary, and forward the email to the recipient list. Then translate the text to German."
	for _, m := range []Method{BM25, Semantic} {
		whole := names(search(t, c, req, Options{Method: m, TopK: 3, Embedder: emb, Intents: IntentsOff}).Results)
		if slices.Contains(whole, "translate_text") {
			t.Errorf("%s: searched whole, the request finds translate_text (%v): the test proves nothing", m, whole)
		}
	}
	for _, m := range Methods {
		r := search(t, c, req, Options{Method: m, TopK: 3, Embedder: emb})
		if got := names(r.Results); !slices.Contains(got, "translate_text") || len(got) != 3 {
			t.Errorf("%s: %v, want translate_text among 3 (intents %+v)", m, got, r.Intents)
		}
	}
}

// A request for one thing ranks exactly as with intents off.
func TestSearchOneIntentIsUnchanged(t *testing.T) {
	c := buildFixture(t, fixture, contract.SearchDefaults{})
	emb := lexicalEmbedder()
	for _, q := range []string{"send an email", "I want to report a defect in the repo. Can you help me with that?", "translate this paragraph to German"} {
		for _, m := range Methods {
			on := search(t, c, q, Options{Method: m, Embedder: emb})
			off := search(t, c, q, Options{Method: m, Embedder: emb, Intents: IntentsOff})
			if on.Intents != nil || !slices.Equal(names(on.Results), names(off.Results)) {
				t.Errorf("%s %q: intents %+v, results %v, whole %v", m, q, on.Intents, names(on.Results), names(off.Results))
			}
		}
	}
}

// The catalog's setting turns intents off; a search may turn them on, and
// an unknown setting is refused.
func TestSearchIntentsSetting(t *testing.T) {
	c := buildFixture(t, fixture, contract.SearchDefaults{Intents: IntentsOff})
	req := "Email my manager about the outage. Then say hello in Spanish."
	if r := search(t, c, req, Options{Method: BM25}); r.Intents != nil {
		t.Errorf("the catalog turns intents off, yet the search split the request: %+v", r.Intents)
	}
	if r := search(t, c, req, Options{Method: BM25, Intents: IntentsOn, MinIntentEvidence: ptr(0.0)}); len(r.Intents) != 2 {
		t.Errorf("intents on for one search: %+v", r.Intents)
	}
	if _, err := c.Search(context.Background(), req, Options{Intents: "sometimes"}); err == nil {
		t.Error("an unknown intents setting was accepted")
	}
}

// An intent's best tool the principal may not use is not returned.
func TestSearchIntentsKeepPermissions(t *testing.T) {
	c := buildFixture(t, fixture, contract.SearchDefaults{})
	req := "Count active users in the database with SQL. Then email my manager the numbers."
	for _, m := range Methods {
		hidden := search(t, c, req, Options{Method: m, Embedder: lexicalEmbedder(), Principal: "user:ana"})
		if slices.Contains(names(hidden.Results), "run_sql") {
			t.Errorf("%s: run_sql returned to a principal who may not use it: %v", m, names(hidden.Results))
		}
		shown := search(t, c, req, Options{Method: m, Embedder: lexicalEmbedder(), Principal: "user:ana", Groups: []string{"analysts"}})
		if !slices.Contains(names(shown.Results), "run_sql") {
			t.Errorf("%s: an analyst does not get run_sql: %v", m, names(shown.Results))
		}
	}
}

// Self-grading searches a tool's own query of several intents as Search
// does: with intents the short intent's tool is found; searched whole by
// the cosine it is crowded out.
func TestGradeSearchesIntents(t *testing.T) {
	crowd := slices.Clone(fixture)
	for _, verb := range []string{"Forward", "Reply to", "Draft", "Archive", "Label", "Schedule"} {
		crowd = append(crowd, fixtureTool{name: strings.ToLower(strings.ReplaceAll(verb, " ", "_")) + "_email",
			description: verb + " an email message to a recipient about the team.", queries: []string{strings.ToLower(verb) + " the email to my manager", strings.ToLower(verb) + " a message to the team"}})
	}
	queries := []string{
		"Send an email message to my manager and the team about the outage with the incident summary, and forward the email to the recipient list. Then translate the text to German.",
		"translate this paragraph to German",
	}
	intents := text.Intents(queries[0])
	if len(intents) != 2 {
		t.Fatalf("intents %q", intents)
	}
	emb := lexicalEmbedder()
	vecs, err := emb.Embed(context.Background(), append(slices.Clone(queries), intents...))
	if err != nil {
		t.Fatal(err)
	}
	set := QuerySet{Queries: queries, Vectors: vecs[:2], IntentVectors: map[int][][]float32{0: vecs[2:]}}
	for _, m := range []Method{BM25, Semantic, Hybrid} {
		recall := map[string]float64{}
		for _, setting := range []string{IntentsOn, IntentsOff} {
			c := buildFixture(t, crowd, contract.SearchDefaults{Method: string(m), Intents: setting})
			g, _, err := (&grader{}).grade(context.Background(), c, map[string]QuerySet{"translate_text": set})
			if err != nil {
				t.Fatal(err)
			}
			recall[setting] = g.SelfRecallAt5
		}
		if recall[IntentsOn] != 1 {
			t.Errorf("%s: self-recall@5 with intents %v, want 1", m, recall[IntentsOn])
		}
		// BM25 finds translate's rare words whole too; the cosine of the
		// whole request is the email's.
		if m == Semantic && recall[IntentsOff] != 0.5 {
			t.Errorf("semantic: self-recall@5 searched whole %v, want 0.5: the test proves nothing", recall[IntentsOff])
		}
	}
}

// An intent that names no telling word is ordered by the whole request
// among the tools it ranks alike; one that names enough keeps its own
// order, and the picks share the places rounded up.
func TestIntentsLeanOnTheRequestByTheirEvidence(t *testing.T) {
	rank := func(names ...string) []ranked {
		var out []ranked
		for i, n := range names {
			out = append(out, ranked{name: n, score: float64(len(names) - i)})
		}
		return out
	}
	request := searched{order: rank("hotel_booking", "weather", "flights")}
	request.final = armsOf(request.order)
	// The intent ranks flights a little above hotel_booking.
	intent := searched{order: []ranked{{name: "flights", score: 1}, {name: "hotel_booking", score: 0.9}, {name: "weather"}}}
	for _, tt := range []struct {
		evidence float64
		first    string
	}{
		{0, "hotel_booking"},
		{strongLexicalEvidence / 2, "hotel_booking"},
		{strongLexicalEvidence, "flights"},
		{3 * strongLexicalEvidence, "flights"},
	} {
		intent.evidence = tt.evidence
		if got := inContext(intent, request); got[0].name != tt.first {
			t.Errorf("evidence %.1f: %v first, want %s", tt.evidence, got[0].name, tt.first)
		}
	}

	two := []searched{request,
		{order: rank("a1", "a2", "a3", "a4"), evidence: 10},
		{order: rank("b1", "b2", "b3", "b4"), evidence: 10}}
	var got []string
	for _, p := range intentPicks(two, 5, func(string) bool { return true }) {
		got = append(got, p.name)
	}
	if want := []string{"a1", "b1", "a2", "b2", "a3"}; !slices.Equal(got, want) {
		t.Errorf("5 places for 2 intents: %v, want %v", got, want)
	}
}

// With MinIntentEvidence, a request is searched by intent only when two
// of its intents each name tool words: a request of two sentences that
// do not is ranked whole, exactly as with intents off.
func TestSearchIntentsNeedEvidence(t *testing.T) {
	c := buildFixture(t, fixture, contract.SearchDefaults{})
	emb := lexicalEmbedder()
	req := "Email my manager about the outage. Then say hello in Spanish."
	split := search(t, c, req, Options{Method: Hybrid, TopK: 3, Embedder: emb, MinIntentEvidence: ptr(0.0)})
	if len(split.Intents) != 2 {
		t.Fatalf("with no evidence asked for, the request is split: %+v", split.Intents)
	}
	low := search(t, c, req, Options{Method: Hybrid, TopK: 3, Embedder: emb, MinIntentEvidence: ptr(min(split.Intents[0].LexicalEvidence, split.Intents[1].LexicalEvidence))})
	if len(low.Intents) != 2 || !slices.Equal(names(low.Results), names(split.Results)) {
		t.Fatalf("both intents reach the evidence asked for, yet: intents %+v, results %v, want %v", low.Intents, names(low.Results), names(split.Results))
	}
	high := search(t, c, req, Options{Method: Hybrid, TopK: 3, Embedder: emb, MinIntentEvidence: ptr(50.0)})
	whole := search(t, c, req, Options{Method: Hybrid, TopK: 3, Embedder: emb, Intents: IntentsOff})
	byIntent := func(r Result) bool { return r.Intent != "" }
	if high.Intents != nil || slices.ContainsFunc(high.Results, byIntent) || !slices.Equal(names(high.Results), names(whole.Results)) {
		t.Fatalf("no intent reaches the evidence asked for: intents %+v, results %+v, want the whole request's %v", high.Intents, high.Results, names(whole.Results))
	}
	if !slices.ContainsFunc(split.Results, byIntent) {
		t.Fatalf("no result of the split request was placed by an intent (%+v): the test proves nothing", split.Results)
	}
}
