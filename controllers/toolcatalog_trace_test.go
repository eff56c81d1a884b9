package controllers

import (
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// A pass that publishes is one trace: a "ToolCatalog pass" span for the
// catalog, with a child span for each step. The ToolDefinitions' records
// and the grading of the version follow, each in a trace of its own, off
// the pass.
func TestPassIsOneTraceWithItsSteps(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	c := newCatalogCase(t)
	catalog := attribute.String("toolcatalog.catalog", c.ns+"/tools")
	c.g.Eventually(func(g Gomega) {
		var steps []string
		for _, pass := range rec.Ended() {
			if pass.Name() != "ToolCatalog pass" || !slices.Contains(pass.Attributes(), catalog) {
				continue
			}
			steps = steps[:0]
			for _, s := range rec.Ended() {
				if s.Parent().SpanID() == pass.SpanContext().SpanID() {
					steps = append(steps, s.Name())
				}
			}
			if slices.Contains(steps, "publish") {
				break
			}
		}
		g.Expect(steps).To(ContainElements("select", "read", "plan", "generate and embed", "build", "publish"))
		g.Expect(steps).NotTo(ContainElements("records", "grade"))
		graded, recorded := false, false
		for _, s := range rec.Ended() {
			graded = graded || s.Name() == "ToolCatalog grade" && slices.Contains(s.Attributes(), catalog) && !s.Parent().IsValid()
			recorded = recorded || s.Name() == "ToolCatalog records" && slices.Contains(s.Attributes(), catalog) && !s.Parent().IsValid()
		}
		g.Expect(graded).To(BeTrue(), "no grading trace")
		g.Expect(recorded).To(BeTrue(), "no records trace")
	}).Should(Succeed())
}
