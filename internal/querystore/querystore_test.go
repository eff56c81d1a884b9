package querystore

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/redistest"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

var server = redistest.NewShared()

func TestMain(m *testing.M) { os.Exit(server.Main(m)) }

// namespace is a namespace of its own for each run of a test: the
// server's keys outlive a run.
func namespace(t *testing.T, name string) string {
	return fmt.Sprintf("%s-%s-%d", name, t.Name(), time.Now().UnixNano())
}

// counting is a provider with an identity that counts what it is asked.
type counting struct {
	mu    sync.Mutex
	asked []string
	dims  int
}

func (c *counting) Identity() string { return "counting" }
func (c *counting) Model() string    { return "m" }
func (c *counting) Dimensions() int  { return c.dims }

func (c *counting) Embed(_ context.Context, texts []string) ([][]float32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, texts...)
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = []float32{float32(len(t)), 1}
	}
	return out, nil
}

func (c *counting) GenerateQueries(_ context.Context, req embedding.QueryRequest) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, req.Tool.Name)
	qs := make([]string, req.Count)
	for i := range qs {
		qs[i] = fmt.Sprintf("%s about %s, number %d", req.Tool.Name, req.Tool.Description, i)
	}
	return qs, nil
}

func (c *counting) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.asked
	c.asked = nil
	return out
}

var weather = embedding.QueryRequest{Tool: embedding.ToolSpec{Name: "get_weather", Description: "Get the weather."}, Count: 3, Existing: []string{"weather in Oslo"}}

// Two catalogs of a namespace ask the generator once for one request; a
// changed description, another count or another namespace asks again. An
// entry lives for the grace period.
func TestGeneratorAsksOnceForTheSameRequest(t *testing.T) {
	teama, teamb := namespace(t, "team-a"), namespace(t, "team-b")
	ctx := context.Background()
	rc := server.Client(t)
	p := &counting{}
	first := New(rc, teama, time.Hour).Generator(p)
	want, err := first.GenerateQueries(ctx, weather)
	if err != nil || len(p.take()) != 1 {
		t.Fatalf("first request: %v", err)
	}
	second := New(rc, teama, time.Hour).Generator(p)
	got, err := second.GenerateQueries(ctx, weather)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("the same request from another catalog: %v, %v; want %v", got, err, want)
	}
	if asked := p.take(); len(asked) != 0 {
		t.Fatalf("the same request asked the generator again: %v", asked)
	}
	edited := weather
	edited.Tool.Description = "Get the weather and the forecast."
	more := weather
	more.Count = 4
	for _, req := range []embedding.QueryRequest{edited, more} {
		if _, err := second.GenerateQueries(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := New(rc, teamb, time.Hour).Generator(p).GenerateQueries(ctx, weather); err != nil {
		t.Fatal(err)
	}
	if asked := p.take(); len(asked) != 3 {
		t.Fatalf("an edited description, another count and another namespace asked %d times; want 3", len(asked))
	}
	keys := rc.Keys(ctx, "toolcatalog:store:"+teama+":queries:*").Val()
	if len(keys) != 3 {
		t.Fatalf("team-a's entries: %v", keys)
	}
	if ttl := rc.PTTL(ctx, keys[0]).Val(); ttl <= 0 || ttl > time.Hour {
		t.Fatalf("an entry lives %v; want at most the grace period", ttl)
	}
}

// The embedder asks only for the texts the store lacks, and its answer
// is the one a plain embedder gives.
func TestEmbedderEmbedsOnlyWhatItLacks(t *testing.T) {
	teama := namespace(t, "team-a")
	ctx := context.Background()
	p := &counting{dims: 2}
	e := New(server.Client(t), teama, time.Hour).Embedder(p)
	if _, err := e.Embed(ctx, []string{"a", "bb"}); err != nil {
		t.Fatal(err)
	}
	p.take()
	got, err := e.Embed(ctx, []string{"bb", "ccc", "a"})
	if err != nil {
		t.Fatal(err)
	}
	if asked := p.take(); !slices.Equal(asked, []string{"ccc"}) {
		t.Fatalf("asked %v; want only the text not kept", asked)
	}
	want, _ := (&counting{dims: 2}).Embed(ctx, []string{"bb", "ccc", "a"})
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("vectors %v; want %v", got, want)
	}
	// A requested refresh reads nothing: it asks again and keeps that.
	renewing := New(server.Client(t), teama, time.Hour)
	renewing.Renew = true
	if _, err := renewing.Embedder(p).Embed(ctx, []string{"a", "bb"}); err != nil {
		t.Fatal(err)
	}
	if asked := p.take(); !slices.Equal(asked, []string{"a", "bb"}) {
		t.Fatalf("a renewing store asked %v; want every text", asked)
	}
}

// What sits in the store is checked as a provider's answer is: a query
// set that is not one the generator could have written, or a vector that
// is not one of the embedder's, is asked again and replaced.
func TestHostileEntriesAreAskedAgain(t *testing.T) {
	teama := namespace(t, "team-a")
	ctx := context.Background()
	rc := server.Client(t)
	p := &counting{dims: 2}
	s := New(rc, teama, time.Hour)
	key := s.key("queries", generation{Generator: "counting", Name: weather.Tool.Name, Description: weather.Tool.Description, Count: weather.Count, Existing: weather.Existing})
	nan := contract.EncodeVector([]float32{float32(math.NaN()), 1})
	for _, bad := range []string{`not json`, `["one","two"]`, `["a","a","b"]`, `["weather in Oslo","b","c"]`, `["a","","c"]`} {
		rc.Set(ctx, key, bad, time.Hour)
		qs, err := s.Generator(p).GenerateQueries(ctx, weather)
		if err != nil || len(p.take()) != 1 || len(qs) != 3 {
			t.Fatalf("entry %s: %v, %v; want the generator asked", bad, qs, err)
		}
		if rc.Get(ctx, key).Val() == bad {
			t.Fatalf("entry %s was not replaced", bad)
		}
	}
	vkey := s.key("vector", vector{Embedder: "counting", Text: "a"})
	for _, bad := range [][]byte{nan, contract.EncodeVector([]float32{1, 2, 3}), {1, 2, 3}} {
		rc.Set(ctx, vkey, bad, time.Hour)
		vecs, err := s.Embedder(p).Embed(ctx, []string{"a"})
		if err != nil || len(p.take()) != 1 || len(vecs[0]) != 2 || math.IsNaN(float64(vecs[0][0])) {
			t.Fatalf("entry %x: %v, %v; want the embedder asked", bad, vecs, err)
		}
	}
}

// A provider that names no identity (the builtin ones) is not wrapped,
// and a store that cannot be reached costs nothing but the lookup: the
// provider answers.
func TestUnnamedProvidersAndAnUnreachableStore(t *testing.T) {
	teama := namespace(t, "team-a")
	s := New(server.Client(t), teama, time.Hour)
	if g := s.Generator(embedding.TemplateQueryGenerator{}); g != (embedding.TemplateQueryGenerator{}) {
		t.Fatalf("the builtin generator was wrapped: %T", g)
	}
	if e := s.Embedder(embedding.SentenceEmbedder{}); e != (embedding.SentenceEmbedder{}) {
		t.Fatalf("the builtin embedder was wrapped: %T", e)
	}
	down, err := redistest.Start("")
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(&redis.Options{Addr: down.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rc.Close() })
	_ = down.Stop()
	var errors int
	gone := New(rc, teama, time.Hour)
	gone.Observe = func(_, outcome string, n int) {
		if outcome == "error" {
			errors += n
		}
	}
	p := &counting{dims: 2}
	if qs, err := gone.Generator(p).GenerateQueries(context.Background(), weather); err != nil || len(qs) != 3 {
		t.Fatalf("with the store down: %v, %v", qs, err)
	}
	if vecs, err := gone.Embedder(p).Embed(context.Background(), []string{"a", "b"}); err != nil || len(vecs) != 2 {
		t.Fatalf("with the store down: %v, %v", vecs, err)
	}
	if errors != 6 {
		t.Fatalf("%d errors observed; want 6 (a read and a write of the query set, of the two vectors)", errors)
	}
}

// gated is a counting provider whose answers wait for their gate.
type gated struct {
	counting
	generating, embedding chan struct{}
	entered               chan struct{}
}

func (g *gated) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	g.entered <- struct{}{}
	<-g.embedding
	return g.counting.Embed(ctx, texts)
}

func (g *gated) GenerateQueries(ctx context.Context, req embedding.QueryRequest) ([]string, error) {
	g.entered <- struct{}{}
	<-g.generating
	return g.counting.GenerateQueries(ctx, req)
}

// Passes of one process asking at once for what no one has kept yet ask
// the provider once: the others wait for that answer.
func TestPassesAskingAtOnceAskOnce(t *testing.T) {
	teama := namespace(t, "team-a")
	ctx := context.Background()
	rc := server.Client(t)
	p := &gated{counting: counting{dims: 2}, generating: make(chan struct{}), embedding: make(chan struct{}), entered: make(chan struct{}, 10)}
	var flights Flights
	looked := make(chan string, 100)
	stores := []*Store{New(rc, teama, time.Hour), New(rc, teama, time.Hour)}
	for _, s := range stores {
		s.Flights = &flights
		s.Observe = func(kind, outcome string, _ int) { looked <- kind + " " + outcome }
	}
	var wg sync.WaitGroup
	vecs := make([][][]float32, 2)
	qs := make([][]string, 2)
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if qs[i], err = s.Generator(p).GenerateQueries(ctx, weather); err != nil {
				t.Error(err)
			}
			if vecs[i], err = s.Embedder(p).Embed(ctx, []string{"a", "bb"}); err != nil {
				t.Error(err)
			}
		}()
	}
	// Both stores found nothing kept while one asks the provider; then the
	// provider answers.
	missed := func(kind string) {
		for n := 0; n < 2; {
			if <-looked == kind+" miss" {
				n++
			}
		}
	}
	<-p.entered
	missed("queries")
	close(p.generating)
	<-p.entered
	missed("vectors")
	close(p.embedding)
	wg.Wait()
	if asked := p.take(); len(asked) != 3 {
		t.Fatalf("the provider was asked %v; want one generation and two texts", asked)
	}
	if !slices.Equal(qs[0], qs[1]) || !slices.EqualFunc(vecs[0], vecs[1], slices.Equal) {
		t.Fatalf("the stores answered differently: %v %v, %v %v", qs[0], qs[1], vecs[0], vecs[1])
	}
}

// A pass that found nothing kept, while another pass asked the provider
// and kept the answer before the first one's flight began, asks nothing:
// its flight looks again.
func TestAFlightThatEndedMeanwhileIsNotAskedAgain(t *testing.T) {
	teama := namespace(t, "team-a")
	ctx := context.Background()
	rc := server.Client(t)
	p := &counting{dims: 2}
	var flights Flights
	late, early := New(rc, teama, time.Hour), New(rc, teama, time.Hour)
	late.Flights, early.Flights = &flights, &flights
	// The early pass asks and keeps its answer right after the late one
	// missed: between the late pass's look and its flight.
	var earlyErr error
	late.Observe = func(kind, outcome string, _ int) {
		if outcome != "miss" {
			return
		}
		switch kind {
		case "queries":
			_, earlyErr = early.Generator(p).GenerateQueries(ctx, weather)
		case "vectors":
			_, earlyErr = early.Embedder(p).Embed(ctx, []string{"a", "bb"})
		}
	}
	qs, err := late.Generator(p).GenerateQueries(ctx, weather)
	if err != nil || earlyErr != nil {
		t.Fatal(err, earlyErr)
	}
	vecs, err := late.Embedder(p).Embed(ctx, []string{"a", "bb"})
	if err != nil || earlyErr != nil {
		t.Fatal(err, earlyErr)
	}
	if asked := p.take(); len(asked) != 3 {
		t.Fatalf("the provider was asked %v; want one generation and two texts", asked)
	}
	if len(qs) != weather.Count || len(vecs) != 2 || vecs[1][0] != 2 {
		t.Fatalf("the late pass got %v and %v", qs, vecs)
	}
}

// A namespace that churns entries (a ToolDefinition's description edited
// in a loop) holds at most MaxEntries: each write past the bound deletes
// the least recently used, an entry found recently stays, and another
// namespace's entries are untouched.
func TestANamespaceHoldsAtMostItsBound(t *testing.T) {
	ctx := context.Background()
	rc := server.Client(t)
	churn, quiet := namespace(t, "churn"), namespace(t, "quiet")
	p := &counting{dims: 2}
	clock := time.Unix(1_800_000_000, 0)
	store := func(ns string) *Store {
		s := New(rc, ns, time.Hour)
		s.MaxEntries, s.Now = 5, func() time.Time { return clock }
		return s
	}
	if _, err := store(quiet).Embedder(p).Embed(ctx, []string{"kept elsewhere"}); err != nil {
		t.Fatal(err)
	}
	e := store(churn).Embedder(p)
	texts := []string{"text 0", "text 1", "text 2", "text 3", "text 4"}
	for _, text := range texts {
		clock = clock.Add(time.Second)
		if _, err := e.Embed(ctx, []string{text}); err != nil {
			t.Fatal(err)
		}
	}
	// text 0, the oldest written, is found again: the least recently used
	// is now text 1.
	clock = clock.Add(time.Second)
	if _, err := e.Embed(ctx, []string{"text 0"}); err != nil {
		t.Fatal(err)
	}
	p.take()
	for i := range 20 {
		clock = clock.Add(time.Second)
		if _, err := e.Embed(ctx, []string{fmt.Sprintf("edit %d", i)}); err != nil {
			t.Fatal(err)
		}
		if n := len(rc.Keys(ctx, "toolcatalog:store:"+churn+":vector:*").Val()); n > 5 {
			t.Fatalf("after %d more writes the namespace holds %d entries, more than its bound of 5", i+1, n)
		}
		if i == 0 {
			if _, err := e.Embed(ctx, []string{"text 0", "text 1"}); err != nil {
				t.Fatal(err)
			}
			if asked := p.take(); !slices.Equal(asked, []string{"edit 0", "text 1"}) {
				t.Fatalf("after one write past the bound, asked %v; want text 1 (the least recently used) asked again, text 0 found", asked)
			}
		}
	}
	if n := rc.ZCard(ctx, "toolcatalog:store:"+churn+":index").Val(); n != 5 {
		t.Fatalf("the index holds %d entries, want 5", n)
	}
	if _, err := store(quiet).Embedder(p).Embed(ctx, []string{"kept elsewhere"}); err != nil {
		t.Fatal(err)
	}
	if asked := p.take(); len(asked) != 19 {
		t.Fatalf("asked %d texts: the other namespace's entry must have been found (19 edits asked since the last count, nothing else)", len(asked))
	}
}

// verbose answers with queries of a page each.
type verbose struct{ counting }

func (v *verbose) GenerateQueries(ctx context.Context, req embedding.QueryRequest) ([]string, error) {
	qs, err := v.counting.GenerateQueries(ctx, req)
	for i := range qs {
		qs[i] += strings.Repeat(" and more", 1000)
	}
	return qs, err
}

// A provider that answers with pages is used, not kept: an entry's size
// is bounded, so the next pass asks again.
func TestAnOversizedAnswerIsNotKept(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "verbose")
	rc := server.Client(t)
	p := &verbose{}
	for range 2 {
		qs, err := New(rc, ns, time.Hour).Generator(p).GenerateQueries(ctx, weather)
		if err != nil || len(qs) != weather.Count {
			t.Fatalf("queries %d, %v", len(qs), err)
		}
	}
	if asked := p.take(); len(asked) != 2 {
		t.Fatalf("asked %d times; want twice, the answer not kept", len(asked))
	}
	if keys := rc.Keys(ctx, "toolcatalog:store:"+ns+":*").Val(); len(keys) != 0 {
		t.Fatalf("kept %v", keys)
	}
}
