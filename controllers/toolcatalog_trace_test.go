package controllers

import (
	"context"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
)

// recordSpans records the spans the process ends until the test ends.
func recordSpans(t *testing.T) *tracetest.SpanRecorder {
	rec := tracetest.NewSpanRecorder()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	return rec
}

// A pass that publishes is one trace: a "ToolCatalog pass" span for the
// catalog, with a child span for each step. The ToolDefinitions' records
// and the grading of the version follow, each in a trace of its own, off
// the pass.
func TestPassIsOneTraceWithItsSteps(t *testing.T) {
	rec := recordSpans(t)

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

// The pass after an edit selects from the ToolDefinition the watch named
// alone, not from every one of the namespace; after a ToolSource of the
// namespace changed (its record decides which tools naming it are
// valid), the next pass selects whole again. The first pass, which
// selects whole, shows the span says so.
func TestAnEditsPassSelectsFromTheEditedToolAlone(t *testing.T) {
	rec := recordSpans(t)

	c := newCatalogCase(t)
	g, ns := c.g, c.ns
	catalog := attribute.String("toolcatalog.catalog", ns+"/tools")
	// selectOf is the select span's attributes of the pass that
	// published version.
	selectOf := func(g Gomega, version int64) map[attribute.Key]attribute.Value {
		ended := rec.Ended()
		for _, pass := range ended {
			if pass.Name() != "ToolCatalog pass" || !slices.Contains(pass.Attributes(), catalog) {
				continue
			}
			var sel sdktrace.ReadOnlySpan
			published := false
			for _, s := range ended {
				if s.Parent().SpanID() != pass.SpanContext().SpanID() {
					continue
				}
				switch s.Name() {
				case "select":
					sel = s
				case "publish":
					published = slices.Contains(s.Attributes(), attribute.Int64("toolcatalog.version", version))
				}
			}
			if published && sel != nil {
				attrs := map[attribute.Key]attribute.Value{}
				for _, kv := range sel.Attributes() {
					attrs[kv.Key] = kv.Value
				}
				return attrs
			}
		}
		g.Expect(version).To(BeZero(), "no pass published version %d", version)
		return nil
	}
	expectSelect := func(version int64, whole bool, changed int) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			attrs := selectOf(g, version)
			g.Expect(attrs["toolcatalog.select.whole"].AsBool()).To(Equal(whole), "version %d selected whole", version)
			g.Expect(attrs["toolcatalog.select.changed"].AsInt64()).To(BeEquivalentTo(changed))
		}).Should(Succeed())
	}
	expectSelect(1, true, 0)

	editTD(g, ns, "weather", func(td *v1alpha1.ToolDefinition) {
		td.Spec.Description = "Get the current weather and a three-day forecast for a city."
	})
	waitVersion(g, ns, "tools", 2)
	expectSelect(2, false, 1)

	// A ToolSource whose tools the catalog would select: its creation
	// queues the catalog, whose pass selects whole.
	wholePasses := func() int {
		n := 0
		for _, s := range rec.Ended() {
			if s.Name() == "select" && slices.Contains(s.Attributes(), attribute.Bool("toolcatalog.select.whole", true)) {
				for _, pass := range rec.Ended() {
					if pass.SpanContext().SpanID() == s.Parent().SpanID() && slices.Contains(pass.Attributes(), catalog) {
						n++
					}
				}
			}
		}
		return n
	}
	before := wholePasses()
	ts := &v1alpha1.ToolSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crm"},
		Spec: v1alpha1.ToolSourceSpec{MCP: v1alpha1.MCPServerSpec{URL: "http://127.0.0.1:1/mcp"}, Labels: map[string]string{catalogLabel: "tools"}}}
	g.Expect(k8sClient.Create(context.Background(), ts)).To(Succeed())
	g.Eventually(wholePasses).Should(BeNumerically(">", before))
}
