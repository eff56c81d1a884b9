package otlp

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/toolcatalog/tool-catalog-operator/internal/telemetry"
)

// collector is an OTLP/HTTP trace receiver on loopback: it decodes what
// the exporter sends as the collector's protobuf request.
type collector struct {
	srv      *httptest.Server
	mu       sync.Mutex
	requests []*collectortrace.ExportTraceServiceRequest
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := &collectortrace.ExportTraceServiceRequest{}
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(body, req) != nil {
			http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.requests = append(c.requests, req)
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// spans returns the exported spans' names and each resource's service.name.
func (c *collector) spans() (names, services []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, req := range c.requests {
		for _, rs := range req.ResourceSpans {
			for _, a := range rs.Resource.GetAttributes() {
				if a.Key == "service.name" {
					services = append(services, a.Value.GetStringValue())
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					names = append(names, s.Name)
				}
			}
		}
	}
	return names, services
}

func exportOneSpan(t *testing.T) {
	t.Helper()
	prev := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	shutdown, err := Setup(context.Background(), "toolcatalog-test", "v1")
	if err != nil {
		t.Fatal(err)
	}
	_, span := telemetry.Tracer().Start(context.Background(), "a pass")
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, spans reach the collector over
// OTLP/HTTP, named after the service unless OTEL_SERVICE_NAME says
// otherwise; without it, or with OTEL_SDK_DISABLED, nothing is sent.
func TestSetupExportsOnlyWhenAsked(t *testing.T) {
	c := newCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.srv.URL)
	exportOneSpan(t)
	names, services := c.spans()
	if len(names) != 1 || names[0] != "a pass" || len(services) != 1 || services[0] != "toolcatalog-test" {
		t.Fatalf("exported %v of %v; want one span \"a pass\" of toolcatalog-test", names, services)
	}

	t.Setenv("OTEL_SERVICE_NAME", "gateway-eu")
	exportOneSpan(t)
	if _, services := c.spans(); services[len(services)-1] != "gateway-eu" {
		t.Fatalf("OTEL_SERVICE_NAME ignored: %v", services)
	}

	for name, env := range map[string][2]string{
		"OTEL_SDK_DISABLED=true": {"OTEL_SDK_DISABLED", "true"},
		"no endpoint":            {"OTEL_EXPORTER_OTLP_ENDPOINT", ""},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(env[0], env[1])
			before, _ := c.spans()
			exportOneSpan(t)
			if after, _ := c.spans(); len(after) != len(before) {
				t.Fatalf("%d spans exported with %s", len(after)-len(before), name)
			}
		})
	}
}
