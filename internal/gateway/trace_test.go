package gateway

import (
	"context"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/telemetry"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/mcptest"
)

// recordSpans makes the global tracer provider record every span for the
// rest of the test.
func recordSpans(t *testing.T) (*tracetest.SpanRecorder, trace.TracerProvider) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	return rec, tp
}

// One tools/call is one trace, from the client's traceparent (in _meta)
// through the gateway's spans to the upstream server's own span, which
// gets the gateway's upstream span as its parent in both the HTTP headers
// and _meta.
func TestOneToolCallIsOneConnectedTrace(t *testing.T) {
	rec, tp := recordSpans(t)
	ns := newNamespace(t)
	srv := mcptest.New(t, mcptest.Options{Name: "weather"})
	var fromHeader, fromMeta trace.SpanContext
	srv.AddTool(&mcp.Tool{Name: "get_weather", Description: "Get the current weather and the forecast for a city.", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			fromHeader = trace.SpanContextFromContext(telemetry.ExtractHeader(context.Background(), req.Extra.Header))
			fromMeta = trace.SpanContextFromContext(telemetry.ExtractMeta(context.Background(), req.Params.Meta))
			_, span := tp.Tracer("upstream").Start(telemetry.ExtractMeta(ctx, req.Params.Meta), "upstream work")
			span.End()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sunny"}}}, nil
		})
	create(t,
		sourceFor(ns, "weather", srv.URL, "traced"),
		testCatalog(ns, "traced", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOff}),
	)
	published(t, ns, "traced", 1)
	cs := connect(t, ns, "traced", aliceToken, "", nil)

	const traceID, clientSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "get_weather", Arguments: map[string]any{},
		Meta: mcp.Meta{"traceparent": "00-" + traceID + "-" + clientSpan + "-01"}})
	if err != nil || res.IsError {
		t.Fatalf("get_weather: %v %+v", err, res)
	}
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID().String() == traceID {
			byName[s.Name()] = s
		}
	}
	var names []string
	for name := range byName {
		names = append(names, name)
	}
	slices.Sort(names)
	want := []string{"check arguments", "tools/call get_weather", "upstream tools/call get_weather", "upstream work"}
	if !slices.Equal(names, want) {
		t.Fatalf("spans of the client's trace: %v, want %v", names, want)
	}
	parent := func(name string) string { return byName[name].Parent().SpanID().String() }
	id := func(name string) string { return byName[name].SpanContext().SpanID().String() }
	switch {
	case parent("tools/call get_weather") != clientSpan:
		t.Errorf("the gateway's span has parent %s, want the client's %s", parent("tools/call get_weather"), clientSpan)
	case parent("upstream tools/call get_weather") != id("tools/call get_weather"):
		t.Error("the upstream call's span is not a child of the gateway's call span")
	case parent("upstream work") != id("upstream tools/call get_weather"):
		t.Error("the upstream server's span is not a child of the gateway's upstream span")
	case fromHeader.SpanID().String() != id("upstream tools/call get_weather") || fromMeta.SpanID() != fromHeader.SpanID():
		t.Errorf("traceparent upstream: header %v, _meta %v; want the gateway's upstream span in both", fromHeader.SpanID(), fromMeta.SpanID())
	}
}
