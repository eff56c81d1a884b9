package embedding

import (
	"context"
	"strings"
	"testing"
)

func BenchmarkLexicalEmbedShort(b *testing.B) {
	texts := []string{"will it rain in Lisbon tomorrow"}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = LexicalEmbedder{}.Embed(context.Background(), texts)
	}
}

func BenchmarkLexicalEmbed100Words(b *testing.B) {
	texts := []string{strings.Repeat("open a new issue in the repository with labels ", 12)}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = LexicalEmbedder{}.Embed(context.Background(), texts)
	}
}

func BenchmarkCentroid5x512(b *testing.B) {
	vecs, _ := LexicalEmbedder{}.Embed(context.Background(), []string{"a b", "c d", "e f", "g h", "i j"})
	b.ReportAllocs()
	for b.Loop() {
		_, _ = Centroid(vecs)
	}
}

func BenchmarkTemplateQueries(b *testing.B) {
	req := QueryRequest{Tool: weatherSpec, Count: 5}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = TemplateQueryGenerator{}.GenerateQueries(context.Background(), req)
	}
}

func benchmarkSentence(b *testing.B, text string, goroutines int) {
	e := SentenceEmbedder{}
	if _, err := e.Embed(context.Background(), []string{text}); err != nil {
		b.Fatal(err)
	}
	texts := make([]string, goroutines)
	for i := range texts {
		texts[i] = text
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := e.Embed(context.Background(), texts); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*goroutines)/b.Elapsed().Seconds(), "texts/s")
}

const hundredTokens = "The operator keeps tool catalogs true: when a description changes, its embedding is recomputed, the catalog is republished as a new version and every consumer is told, so agents can search hundreds of tools and send only the few relevant ones to the model, which saves tokens and improves selection accuracy for everyone."

func BenchmarkSentenceShort1(b *testing.B) {
	benchmarkSentence(b, "will it rain in Lisbon tomorrow", 1)
}
func BenchmarkSentenceShort2(b *testing.B) {
	benchmarkSentence(b, "will it rain in Lisbon tomorrow", 2)
}
func BenchmarkSentence100Tok1(b *testing.B) { benchmarkSentence(b, hundredTokens, 1) }
func BenchmarkSentence100Tok2(b *testing.B) { benchmarkSentence(b, hundredTokens, 2) }
