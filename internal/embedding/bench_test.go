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
