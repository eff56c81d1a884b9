package catalog_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/reconcile"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/mcptest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/openaitest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/providertest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/redistest"
)

// everything is all a pass's result could carry into status, events and
// logs: its error and each tool's failure.
func everything(res catalog.PassResult) string {
	b := strings.Builder{}
	fmt.Fprintf(&b, "%v\n", res.Err)
	if res.Outcome != nil {
		for _, f := range res.Outcome.FailingTools() {
			b.WriteString(f.Message + "\n")
		}
		_, _, synced := res.Outcome.Synced()
		b.WriteString(synced)
	}
	return b.String()
}

// A provider endpoint outside the egress policy (the harness allows only
// 127.0.0.1; 127.0.0.2 stands for a metadata service) is never called,
// whichever of the three endpoints names it: the pass stops, Stalled with
// EgressDenied naming the field and the flag, and nothing the service
// would have answered reaches its result.
func TestProviderEndpointsOutsideTheEgressPolicyAreNotCalled(t *testing.T) {
	for field, point := range map[string]func(*v1alpha1.ToolCatalog, string){
		"spec.embedding.baseURL":       func(tc *v1alpha1.ToolCatalog, u string) { tc.Spec.Embedding.BaseURL = u },
		"spec.queryGeneration.baseURL": func(tc *v1alpha1.ToolCatalog, u string) { tc.Spec.QueryGeneration.BaseURL = u },
		"spec.queryGeneration.fallback.baseURL": func(tc *v1alpha1.ToolCatalog, u string) {
			tc.Spec.QueryGeneration.Fallback = &v1alpha1.QueryGenerationFallback{BaseURL: u, Model: providertest.ChatModel}
		},
	} {
		t.Run(field, func(t *testing.T) {
			internal := mcptest.NewTrap(t, "127.0.0.2", openaitest.Leak)
			srv := redistest.New(t)
			tc := providerCatalog("egress", srv, providertest.NewWire(t))
			point(tc, internal.URL+"/latest/meta-data?x=")
			h := newHarness(t, srv, tc, nil, tool("egress", "weather", "get_weather", "Get the weather."))
			res := h.run()
			e := reconcile.As(res.Err)
			if e == nil || e.Kind != reconcile.Stalled || e.Reason != v1alpha1.ReasonEgressDenied ||
				!strings.HasPrefix(e.Message, field+" "+internal.URL+"/ may not be reached") || !strings.Contains(e.Message, "--egress-allow") {
				t.Fatalf("the pass: %v", res.Err)
			}
			if n := internal.Requests(); n != 0 {
				t.Errorf("the denied endpoint was called %d times", n)
			}
			if strings.Contains(everything(res), "ASIAINTERNAL") {
				t.Error("the internal service's answer reached the result")
			}
		})
	}
}

// An allowed endpoint that redirects to a denied one is not followed: a
// 307 would carry the POST body and the API key there. The tool fails
// with a summary that says why, and the target saw nothing.
func TestProviderRedirectsAreNotFollowed(t *testing.T) {
	internal := mcptest.NewTrap(t, "127.0.0.2", openaitest.Leak)
	redirecting := mcptest.NewTrap(t, "127.0.0.1", mcptest.Redirect(internal.URL+"/latest/meta-data"))
	srv := redistest.New(t)
	tc := providerCatalog("redirect", srv, providertest.NewWire(t))
	tc.Spec.Embedding.BaseURL = redirecting.URL + "/v1"
	h := newHarness(t, srv, tc, nil, tool("redirect", "weather", "get_weather", "Get the weather."))
	res := h.run()
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	failing := res.Outcome.FailingTools()
	if len(failing) == 0 || !strings.Contains(failing[0].Message, "redirect, which is not followed") {
		t.Fatalf("failing tools %+v", failing)
	}
	if redirecting.Requests() == 0 || internal.Requests() != 0 {
		t.Errorf("the redirecting endpoint saw %d requests, its target %d", redirecting.Requests(), internal.Requests())
	}
	if strings.Contains(everything(res), "ASIAINTERNAL") {
		t.Error("the internal service's answer reached the result")
	}
}
