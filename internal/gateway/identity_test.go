package gateway

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/mcptest"
)

// A ToolSource's callerIdentity decides what an upstream learns of who
// calls: headers naming the caller, or the caller's own token, and that
// only when the token was issued for the upstream's audience.
func TestCallerIdentityReachesTheUpstreamOnlyAsConfigured(t *testing.T) {
	ns := newNamespace(t)
	// Each server keeps the HTTP headers of the calls it answers.
	var mu sync.Mutex
	seen := map[*mcptest.Server][]http.Header{}
	crm := func() *mcptest.Server {
		srv := mcptest.New(t, mcptest.Options{Name: "crm"})
		srv.AddTool(&mcp.Tool{Name: "find_contact", Description: "Find a contact in the CRM by name.", InputSchema: map[string]any{"type": "object"}},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				mu.Lock()
				seen[srv] = append(seen[srv], req.Extra.Header.Clone())
				mu.Unlock()
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Ana Lima"}}}, nil
			})
		return srv
	}
	headersSrv, passSrv := crm(), crm()
	calls := func(srv *mcptest.Server) []http.Header {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen[srv])
	}
	create(t,
		&v1alpha1.ToolSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crm-headers"}, Spec: v1alpha1.ToolSourceSpec{
			ToolNamePrefix: "h_", Labels: map[string]string{"catalog": "who"},
			MCP: v1alpha1.MCPServerSpec{URL: headersSrv.URL, CallerIdentity: &v1alpha1.CallerIdentitySpec{Mode: v1alpha1.CallerIdentityHeaders}},
		}},
		&v1alpha1.ToolSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crm-pass"}, Spec: v1alpha1.ToolSourceSpec{
			ToolNamePrefix: "p_", Labels: map[string]string{"catalog": "who"},
			MCP: v1alpha1.MCPServerSpec{URL: passSrv.URL, CallerIdentity: &v1alpha1.CallerIdentitySpec{Mode: v1alpha1.CallerIdentityPassthrough, Audience: "crm-api"}},
		}},
		testCatalog(ns, "who", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOff}),
	)
	published(t, ns, "who", 2)
	iss := newTestIssuer(t)
	_, base := ownGateway(t, Limits{}, func(o *Options) { o.Auth.Verifiers = append(o.Auth.Verifiers, iss.config(t, ",groups-prefix=")) })

	lastHeader := func(srv *mcptest.Server, name string) string {
		h := calls(srv)
		if len(h) == 0 {
			return ""
		}
		return h[len(h)-1].Get(name)
	}
	call := func(token, tool string) (string, bool) {
		t.Helper()
		return callTool(t, connectAt(t, base, ns, "who", token, "", nil), tool, map[string]any{"name": "Ana"})
	}

	// Headers: each caller's own name reaches the server, never another's.
	if out, isErr := call(aliceToken, "h_find_contact"); isErr {
		t.Fatalf("h_find_contact as alice: %s", out)
	}
	if u, g := lastHeader(headersSrv, "X-Toolcatalog-User"), lastHeader(headersSrv, "X-Toolcatalog-Groups"); u != "alice" || g != "staff" {
		t.Fatalf("the server saw user %q, groups %q; want alice, staff", u, g)
	}
	bob := iss.sign(t, iss.claims("bob", "toolcatalog"))
	if out, isErr := call(bob, "h_find_contact"); isErr {
		t.Fatalf("h_find_contact as bob: %s", out)
	}
	if u := lastHeader(headersSrv, "X-Toolcatalog-User"); u != iss.srv.URL+"#bob" {
		t.Fatalf("after bob's call the server saw user %q", u)
	}
	if n := len(calls(headersSrv)); n != 2 {
		t.Fatalf("%d calls reached the headers server; want alice's and bob's", n)
	}

	// Passthrough: refused unless the token was issued for crm-api, and
	// then the server sees exactly that token.
	for name, token := range map[string]string{
		"a static token":                aliceToken,
		"a token for the gateway alone": bob,
	} {
		out, isErr := call(token, "p_find_contact")
		if !isErr || !strings.Contains(out, `audience "crm-api"`) {
			t.Errorf("p_find_contact with %s: %q (error %v); want refused", name, out, isErr)
		}
	}
	if n := len(calls(passSrv)); n != 0 {
		t.Fatalf("refused callers reached the passthrough server: %d calls", n)
	}
	both := iss.claims("carol", "toolcatalog")
	both["aud"] = []string{"toolcatalog", "crm-api"}
	carol := iss.sign(t, both)
	if out, isErr := call(carol, "p_find_contact"); isErr {
		t.Fatalf("p_find_contact with a token for crm-api: %s", out)
	}
	if got := lastHeader(passSrv, "Authorization"); got != "Bearer "+carol {
		t.Fatalf("the passthrough server saw Authorization %.40q; want carol's token", got)
	}

	// Carol's next token is for the gateway alone. Her view, made with
	// the first, is the same, but the call is the new request's: it is
	// refused, not sent with the token the view was made with.
	gatewayOnly := iss.sign(t, iss.claims("carol", "toolcatalog"))
	out, isErr := call(gatewayOnly, "p_find_contact")
	if !isErr || !strings.Contains(out, `audience "crm-api"`) {
		t.Fatalf("p_find_contact with carol's token for the gateway alone: %q (error %v); want refused", out, isErr)
	}
	if n := len(calls(passSrv)); n != 1 {
		t.Fatalf("%d calls reached the passthrough server; want carol's first only", n)
	}
}

// The API refuses a callerIdentity that would leak or mislead: a
// passthrough without an audience, an identity header that overrides the
// transport's or the credentials.
func TestCallerIdentityValidation(t *testing.T) {
	ns := newNamespace(t)
	for name, mcp := range map[string]v1alpha1.MCPServerSpec{
		"passthrough without audience": {URL: "https://crm.example.com/mcp", CallerIdentity: &v1alpha1.CallerIdentitySpec{Mode: v1alpha1.CallerIdentityPassthrough}},
		"user header Authorization":    {URL: "https://crm.example.com/mcp", CallerIdentity: &v1alpha1.CallerIdentitySpec{Mode: v1alpha1.CallerIdentityHeaders, UserHeader: "Authorization"}},
		"unknown mode":                 {URL: "https://crm.example.com/mcp", CallerIdentity: &v1alpha1.CallerIdentitySpec{Mode: "Impersonate"}},
	} {
		ts := &v1alpha1.ToolSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "bad-"}, Spec: v1alpha1.ToolSourceSpec{MCP: mcp}}
		if err := kube.Create(context.Background(), ts); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	ok := &v1alpha1.ToolSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "good"}, Spec: v1alpha1.ToolSourceSpec{MCP: v1alpha1.MCPServerSpec{
		URL: "https://crm.example.com/mcp", CallerIdentity: &v1alpha1.CallerIdentitySpec{Mode: v1alpha1.CallerIdentityPassthrough, Audience: "crm-api"}}}}
	if err := kube.Create(context.Background(), ok); err != nil {
		t.Fatalf("a valid passthrough: %v", err)
	}
}
