// Package telemetry sets up OpenTelemetry tracing from the standard OTEL_*
// settings and carries the W3C trace context across the hops of a call:
// HTTP headers and MCP's _meta.
//
// Tracing is off unless an OTLP endpoint is configured
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) and
// OTEL_SDK_DISABLED is not true; spans are then exported over OTLP/HTTP,
// with OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER and
// the exporter's other OTEL_EXPORTER_OTLP_* settings honoured. The trace
// context is propagated either way, so a gateway without tracing still
// passes its caller's trace on.
package telemetry

import (
	"context"
	"errors"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// instrumentation names the project's tracer.
const instrumentation = "github.com/toolcatalog/tool-catalog-operator"

// propagator reads and writes the W3C trace context and baggage, whatever
// the global propagator is.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Tracer is the project's tracer, from the global provider.
func Tracer() trace.Tracer { return otel.Tracer(instrumentation) }

// Enabled says whether the environment asks for traces to be exported.
func Enabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup installs the W3C trace-context propagator and, when Enabled, a
// tracer provider exporting to the configured OTLP endpoint. shutdown
// flushes what is buffered; call it before exiting.
func Setup(ctx context.Context, service, version string) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(propagator)
	if !Enabled() {
		return func(context.Context) error { return nil }, nil
	}
	exporter, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, err
	}
	// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override these.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service), attribute.String("service.version", version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

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
