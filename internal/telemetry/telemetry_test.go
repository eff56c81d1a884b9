package telemetry

import (
	"context"
	"testing"
)

// A traceparent read from a peer is bounded; one written goes where the
// next hop reads it.
func TestMetaCarriesTheTraceContext(t *testing.T) {
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := ExtractMeta(context.Background(), map[string]any{"traceparent": parent})
	meta := InjectMeta(ctx, nil)
	if meta["traceparent"] != parent {
		t.Fatalf("_meta written: %v; want %s", meta, parent)
	}
	if got := InjectMeta(ExtractMeta(context.Background(), map[string]any{"traceparent": parent + string(make([]byte, 600))}), nil); got != nil {
		t.Fatalf("an oversized traceparent was accepted: %v", got)
	}
	if got := InjectMeta(context.Background(), nil); got != nil {
		t.Fatalf("no trace, yet _meta written: %v", got)
	}
}
