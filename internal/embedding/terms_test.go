package embedding

import (
	"context"
	"math"
	"testing"
)

// A word few tools use relates two texts more than words most tools use.
func TestTermsWeighTheWordsThatTellToolsApart(t *testing.T) {
	var docs [][]string
	for range 50 {
		docs = append(docs, []string{"get the data of a record"})
	}
	docs = append(docs, []string{"convert a currency amount"})
	terms, err := FitTerms(docs, 1, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	if terms.DF["data"] != 50 || terms.DF["currenc"] != 1 || terms.DF["the"] != 0 {
		t.Fatalf("document frequencies %v", terms.DF)
	}
	e := TermsEmbedder{Base: LexicalEmbedder{}, Terms: terms}
	vecs, err := e.Embed(context.Background(), []string{"get currency data", "convert currency", "get the data"})
	if err != nil {
		t.Fatal(err)
	}
	termCos := func(a, b []float32) float64 {
		return Cosine(a[len(a)-TermDimensions:], b[len(b)-TermDimensions:])
	}
	if rare, common := termCos(vecs[0], vecs[1]), termCos(vecs[0], vecs[2]); rare <= common {
		t.Fatalf("term similarity through the rare word %.3f should exceed through the common ones %.3f", rare, common)
	}
}

// A cosine of the candidate is (base + w·terms) / (1 + w), of unit
// vectors; a text of stopwords only is its base half at unit length.
func TestTermsEmbedderBlendsItsHalves(t *testing.T) {
	terms, err := FitTerms([][]string{{"send an email"}, {"get the weather"}}, 0.25, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	e := TermsEmbedder{Base: LexicalEmbedder{}, Terms: terms}
	if e.Dimensions() != BuiltinLexicalDimensions+TermDimensions || e.Model() != BuiltinLexicalModel+"-terms-"+terms.ID() {
		t.Fatalf("model %s, %d dimensions", e.Model(), e.Dimensions())
	}
	texts := []string{"send the weekly email", "email the weekly report", "what is it"}
	vecs, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	base, err := LexicalEmbedder{}.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vecs {
		var n float64
		for _, x := range v {
			n += float64(x) * float64(x)
		}
		if math.Abs(n-1) > 1e-5 {
			t.Fatalf("vector %d: norm² %f", i, n)
		}
	}
	half := func(v []float32) []float32 { return v[len(v)-TermDimensions:] }
	unitHalf := func(v []float32) []float32 {
		h := half(v)
		n := math.Sqrt(float64(Cosine(h, h)))
		out := make([]float32, len(h))
		for i, x := range h {
			out[i] = float32(float64(x) / n)
		}
		return out
	}
	want := (float64(Cosine(base[0], base[1])) + 0.25*float64(Cosine(unitHalf(vecs[0]), unitHalf(vecs[1])))) / 1.25
	if got := float64(Cosine(vecs[0], vecs[1])); math.Abs(got-want) > 1e-5 {
		t.Fatalf("cosine %.6f, want %.6f", got, want)
	}
	for j, x := range half(vecs[2]) {
		if x != 0 {
			t.Fatalf("stopwords only: term half %d is %f", j, x)
		}
	}
	if got := float64(Cosine(vecs[2][:BuiltinLexicalDimensions], base[2])); math.Abs(got-1) > 1e-5 {
		t.Fatalf("stopwords only: base half's cosine with the base vector %.6f", got)
	}
}

// Terms are named by what they hold: the same corpus and weight give the
// same name, another weight or corpus another.
func TestTermsAreNamedByWhatTheyHold(t *testing.T) {
	fit := func(w float64, docs ...string) string {
		terms, err := FitTerms([][]string{docs}, w, "test", nil)
		if err != nil {
			t.Fatal(err)
		}
		return terms.ID()
	}
	a := fit(0.25, "send an email")
	if a != fit(0.25, "send an email") || a == fit(0.5, "send an email") || a == fit(0.25, "send a message") || len(a) != 8 {
		t.Fatal("terms are not named by their corpus and weight")
	}
	for _, w := range []float64{-1, math.NaN(), math.Inf(1)} {
		if _, err := FitTerms(nil, w, "test", nil); err == nil {
			t.Errorf("weight %v fitted", w)
		}
	}
}

type zeroEmbedder struct{ LexicalEmbedder }

func (zeroEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	return [][]float32{make([]float32, BuiltinLexicalDimensions)}, nil
}

func TestTermsEmbedderRefusesAZeroBaseVector(t *testing.T) {
	terms, err := FitTerms(nil, 1, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (TermsEmbedder{Base: zeroEmbedder{}, Terms: terms}).Embed(context.Background(), []string{"send"}); err == nil {
		t.Fatal("a zero base vector embedded")
	}
}

// BenchmarkTermHalf measures what the term half adds to a query's
// embedding: a request of 8 words and one of 40.
func BenchmarkTermHalf(b *testing.B) {
	terms, err := FitTerms([][]string{{"will it rain in Lisbon"}, {"book a flight to Oslo"}}, 0.25, "bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	for name, text := range map[string]string{
		"words=8":  "will it rain in Lisbon tomorrow afternoon please",
		"words=40": "I need to book a flight from Oslo to Lisbon next Tuesday morning, then find a hotel near the old town for three nights, and finally send the itinerary by email to my manager so she can approve the travel budget before Friday",
	} {
		b.Run(name, func(b *testing.B) {
			out := make([]float32, TermDimensions)
			b.ReportAllocs()
			for b.Loop() {
				terms.vector(text, 0.5, out)
			}
		})
	}
}
