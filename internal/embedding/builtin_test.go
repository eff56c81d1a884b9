package embedding

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
)

func vectorBytes(v []float32) []byte {
	var b bytes.Buffer
	_ = binary.Write(&b, binary.LittleEndian, v)
	return b.Bytes()
}

func embedOne(t *testing.T, text string) []float32 {
	t.Helper()
	v, err := LexicalEmbedder{}.Embed(context.Background(), []string{text})
	mustf(t, err, "Embed(%q)", text)
	return v[0]
}

func TestLexicalEmbedderIsDeterministic(t *testing.T) {
	text := "Get the current weather and forecast for a city"
	a, b := embedOne(t, text), embedOne(t, text)
	if !bytes.Equal(vectorBytes(a), vectorBytes(b)) {
		t.Fatal("same input gave different bytes")
	}
	// A fixed digest pins the output across processes, platforms and
	// releases: a change here changes every stored vector, so it must come
	// with a new model id.
	sum := sha256.Sum256(vectorBytes(a))
	if got := hex.EncodeToString(sum[:]); got != lexicalGolden {
		t.Fatalf("vector digest %s, want %s: the builtin embedding changed; bump BuiltinLexicalModel and update the digest", got, lexicalGolden)
	}
}

const lexicalGolden = "d9d2fbdeb5f7c53392bfab1e54ea56ed1eba3de8d8f17b73d642f426778f5a27"

func TestLexicalEmbedderVectorsAreNormalised(t *testing.T) {
	texts := []string{
		"Send an email",
		"Wetter in München morgen früh?",
		"東京の天気予報を教えて",
		"погода в Москве",
		"🌧️ ☔",
		"the and of", // only stopwords
		strings.Repeat("very long text ", 500),
	}
	vecs, err := LexicalEmbedder{}.Embed(context.Background(), texts)
	mustf(t, err, "Embed")
	for i, v := range vecs {
		if len(v) != BuiltinLexicalDimensions {
			t.Fatalf("vector %d has %d dimensions", i, len(v))
		}
		var norm float64
		for _, x := range v {
			if math.IsNaN(float64(x)) {
				t.Fatalf("vector %d (%q) has NaN", i, texts[i])
			}
			norm += float64(x) * float64(x)
		}
		if math.Abs(norm-1) > 1e-5 {
			t.Errorf("vector %d (%q) has squared norm %v, want 1", i, texts[i], norm)
		}
	}
	// Composed and decomposed forms of the same text are one text.
	if Cosine(embedOne(t, "café crème"), embedOne(t, "cafe\u0301 cre\u0300me")) < 0.9999 {
		t.Error("NFC and NFD forms embed differently")
	}
}

func TestLexicalEmbedderSimilarityOrdering(t *testing.T) {
	tests := []struct{ anchor, similar, unrelated string }{
		{"get the weather forecast for Paris", "weather forecast for tomorrow", "create a GitHub issue"},
		{"create a github issue for the bug", "open an issue in the repository", "what is the temperature outside"},
		{"send an email to my manager", "email the report to finance", "run a SQL query on the warehouse"},
		{"run a SQL query against the database", "query the sales database with SQL", "book a meeting room"},
		{"search the web for recent news", "web search for news about elections", "send a text message"},
		{"東京の天気", "東京の天気予報", "メールを送信"},
	}
	for _, tt := range tests {
		a, s, u := embedOne(t, tt.anchor), embedOne(t, tt.similar), embedOne(t, tt.unrelated)
		if cs, cu := Cosine(a, s), Cosine(a, u); cs <= cu {
			t.Errorf("%q: similar %q scores %.3f, unrelated %q scores %.3f", tt.anchor, tt.similar, cs, tt.unrelated, cu)
		}
	}
}

func TestLexicalEmbedderRejectsBlankText(t *testing.T) {
	if _, err := (LexicalEmbedder{}).Embed(context.Background(), []string{"ok", " \n"}); KindOf(err) != KindInvalidInput {
		t.Fatalf("want InvalidInput, got %v", err)
	}
}

func TestTemplateQueryGenerator(t *testing.T) {
	gen := TemplateQueryGenerator{}
	req := QueryRequest{
		Tool: ToolSpec{
			Name:        "get_current_weather",
			Description: "Get the current weather conditions and the forecast for a city: temperature, wind and rain. Use it for travel planning.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"unit":{"type":"string"},"location":{"type":"string"}},"required":["location"]}`),
		},
		Count:    8,
		Existing: []string{"get current weather"},
	}
	a, err := gen.GenerateQueries(context.Background(), req)
	mustf(t, err, "GenerateQueries")
	b, err := gen.GenerateQueries(context.Background(), req)
	mustf(t, err, "GenerateQueries")
	if !slices.Equal(a, b) {
		t.Fatalf("not deterministic:\n%q\n%q", a, b)
	}
	if len(a) != 8 {
		t.Fatalf("got %d queries, want 8", len(a))
	}
	seen := map[string]bool{"get current weather": true}
	for _, q := range a {
		if strings.TrimSpace(q) != q || q == "" {
			t.Errorf("query %q is not trimmed or is empty", q)
		}
		if seen[normalizeQuery(q)] {
			t.Errorf("query %q repeats another or an existing one", q)
		}
		seen[normalizeQuery(q)] = true
	}
	joined := strings.Join(a, "\n")
	// A command, a question and a goal, arguments as placeholders, and
	// every clause.
	for _, s := range []string{
		"Get the current weather conditions and the forecast for a city\n",
		"Can you get the current weather conditions and the forecast for a city?",
		"I need to get the current weather conditions and the forecast for a city",
		"get current weather for location {location} and unit {unit}",
		"Use it for travel planning",
	} {
		if !strings.Contains(joined+"\n", s) {
			t.Errorf("queries do not use %q:\n%s", s, joined)
		}
	}

	// Example values in parameter descriptions fill the arguments;
	// third-person verbs become commands; a description that is no
	// action is asked for as a thing.
	got, err := gen.GenerateQueries(context.Background(), QueryRequest{Count: 8, Tool: ToolSpec{
		Name:        "bookFlight",
		Description: "Books a flight between two airports.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"origin":{"type":"string","description":"IATA code of the departure airport (e.g., OSL, LHR)"},"date":{"type":"string"}},"required":["origin"]}`),
	}})
	mustf(t, err, "GenerateQueries(bookFlight)")
	for _, want := range []string{"Book a flight between two airports", "Can you book a flight between two airports?", "book flight for origin OSL and date {date}"} {
		if !slices.Contains(got, want) {
			t.Errorf("bookFlight queries lack %q: %q", want, got)
		}
	}
	got, err = gen.GenerateQueries(context.Background(), QueryRequest{Count: 3, Tool: ToolSpec{Name: "fx_rates", Description: "Live currency exchange rates for 150 currencies."}})
	mustf(t, err, "GenerateQueries(fx_rates)")
	if !slices.Contains(got, "I'm looking for live currency exchange rates for 150 currencies") {
		t.Errorf("fx_rates queries %q, want the description asked for as a thing", got)
	}

	// A name's digits are split from its words, and an enum's first
	// value fills an argument without an example.
	got, err = gen.GenerateQueries(context.Background(), QueryRequest{Count: 8, Tool: ToolSpec{
		Name:        "convert2pdf",
		Description: "Converts a document.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"format":{"type":"string","enum":["docx","odt"]}},"required":["format"]}`),
	}})
	mustf(t, err, "GenerateQueries(convert2pdf)")
	if !slices.Contains(got, "convert 2 pdf for format docx") {
		t.Errorf("convert2pdf queries %q lack %q", got, "convert 2 pdf for format docx")
	}

	// Up to the maximum queriesPerTool for a tool with some text.
	many, err := gen.GenerateQueries(context.Background(), QueryRequest{Tool: req.Tool, Count: 50})
	mustf(t, err, "GenerateQueries(50)")
	if len(many) != 50 {
		t.Fatalf("got %d queries, want 50", len(many))
	}

	// Unicode tools work too.
	uni, err := gen.GenerateQueries(context.Background(), QueryRequest{Tool: ToolSpec{Name: "天気", Description: "東京の天気予報を取得する。 明日の降水確率も返す。"}, Count: 5})
	mustf(t, err, "GenerateQueries(unicode)")
	if len(uni) != 5 {
		t.Fatalf("got %q", uni)
	}
}

func TestCentroid(t *testing.T) {
	got, err := Centroid([][]float32{{1, 0, 0}, {0, 1, 0}, {1, 1, 0}})
	mustf(t, err, "Centroid")
	// Mean (2/3, 2/3, 0) normalised is (1/√2, 1/√2, 0).
	want := []float32{float32(1 / math.Sqrt2), float32(1 / math.Sqrt2), 0}
	for i := range want {
		if math.Abs(float64(got[i]-want[i])) > 1e-7 {
			t.Fatalf("centroid %v, want %v", got, want)
		}
	}
	got, err = Centroid([][]float32{{3, 4}})
	mustf(t, err, "Centroid")
	if math.Abs(float64(got[0])-0.6) > 1e-7 || math.Abs(float64(got[1])-0.8) > 1e-7 {
		t.Fatalf("centroid of one vector %v, want (0.6, 0.8)", got)
	}

	for name, vecs := range map[string][][]float32{
		"empty set":   nil,
		"all zero":    {{0, 0}, {0, 0}},
		"cancel out":  {{1, -1}, {-1, 1}},
		"ragged":      {{1, 0}, {1, 0, 0}},
		"not finite":  {{float32(math.NaN()), 1}},
		"zero-length": {{}},
		"infinite":    {{float32(math.Inf(1)), 0}},
	} {
		if v, err := Centroid(vecs); err == nil {
			t.Errorf("%s: got %v, want an error", name, v)
		}
	}
}

func TestCentroidOfEmbeddedQueries(t *testing.T) {
	queries := []string{"weather in Paris", "will it rain tomorrow", "forecast for Berlin"}
	vecs, err := LexicalEmbedder{}.Embed(context.Background(), queries)
	mustf(t, err, "Embed")
	c, err := Centroid(vecs)
	mustf(t, err, "Centroid")
	for i, v := range vecs {
		if Cosine(c, v) <= 0 {
			t.Errorf("centroid is not closer to query %d than orthogonal", i)
		}
	}
	if Cosine(c, embedOne(t, "weather forecast")) <= Cosine(c, embedOne(t, "create a pull request")) {
		t.Error("centroid of weather queries prefers an unrelated text")
	}
}

// countingEmbedder counts Embed calls and texts.
type countingEmbedder struct {
	LexicalEmbedder
	calls, texts int
}

func (c *countingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	c.calls++
	c.texts += len(texts)
	return c.LexicalEmbedder.Embed(ctx, texts)
}

func TestQueryCentroidsEmbedsAllToolsInOneCall(t *testing.T) {
	e := &countingEmbedder{}
	sets := [][]string{
		{"weather in Paris", "rain tomorrow"},
		{},
		{"open an issue", "file a bug", "report a defect"},
	}
	centroids, errs, err := QueryCentroids(context.Background(), e, sets)
	mustf(t, err, "QueryCentroids")
	if e.calls != 1 || e.texts != 5 {
		t.Fatalf("%d calls with %d texts, want 1 call with 5", e.calls, e.texts)
	}
	if errs[0] != nil || errs[2] != nil || errs[1] == nil || centroids[1] != nil {
		t.Fatalf("errs %v; want only the empty set to fail", errs)
	}
	for _, i := range []int{0, 2} {
		vecs, _ := LexicalEmbedder{}.Embed(context.Background(), sets[i])
		want, _ := Centroid(vecs)
		if !slices.Equal(centroids[i], want) {
			t.Errorf("centroid %d differs from Centroid of its own vectors", i)
		}
	}
}
