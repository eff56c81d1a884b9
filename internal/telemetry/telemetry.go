// Package telemetry is the project's OpenTelemetry tracer and carries the
// W3C trace context across the hops of a call: HTTP headers and MCP's
// _meta. It links only the OpenTelemetry API: spans go nowhere until a
// binary installs a provider (package telemetry/otlp does, from the
// standard OTEL_* settings), and the trace context is propagated either
// way, so a gateway without tracing still passes its caller's trace on.
package telemetry

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// instrumentation names the project's tracer.
const instrumentation = "github.com/toolcatalog/tool-catalog-operator"

// propagator reads and writes the W3C trace context and baggage, whatever
// the global propagator is.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Tracer is the project's tracer, from the global provider.
func Tracer() trace.Tracer { return otel.Tracer(instrumentation) }

// Propagator is the W3C trace-context and baggage propagator the
// exporting setup (package otlp) installs globally too.
func Propagator() propagation.TextMapPropagator { return propagator }

// metaCarrier carries the trace context in an MCP _meta object.
type metaCarrier map[string]any

func (m metaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	return s
}

func (m metaCarrier) Set(key, value string) { m[key] = value }

func (m metaCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// maxTraceValue bounds a propagated value read from a peer.
const maxTraceValue = 512

// ExtractMeta returns ctx with the trace context an MCP request's _meta
// carries (traceparent, tracestate), if any.
func ExtractMeta(ctx context.Context, meta map[string]any) context.Context {
	if len(meta) == 0 {
		return ctx
	}
	bounded := metaCarrier{}
	for _, k := range []string{"traceparent", "tracestate", "baggage"} {
		if s, ok := meta[k].(string); ok && len(s) <= maxTraceValue {
			bounded[k] = s
		}
	}
	return propagator.Extract(ctx, bounded)
}

// InjectMeta writes ctx's trace context into an MCP request's _meta,
// making it when nil; it returns the _meta.
func InjectMeta(ctx context.Context, meta map[string]any) map[string]any {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return meta
	}
	if meta == nil {
		meta = map[string]any{}
	}
	propagator.Inject(ctx, metaCarrier(meta))
	return meta
}

// ExtractHeader returns ctx with the trace context of HTTP headers.
func ExtractHeader(ctx context.Context, h map[string][]string) context.Context {
	if len(h) == 0 {
		return ctx
	}
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// InjectHeader writes ctx's trace context into HTTP headers.
func InjectHeader(ctx context.Context, h map[string][]string) {
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}
