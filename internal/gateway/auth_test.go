package gateway

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
)

func TestParseTokenFile(t *testing.T) {
	tokens, err := ParseTokenFile(strings.NewReader("# comment\nt1,alice,1\n\nt2, bob ,2,\"finance, staff\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p := tokens[sha256.Sum256([]byte("t1"))]; p.User != "alice" || p.Groups != nil {
		t.Errorf("t1: %+v", p)
	}
	if p := tokens[sha256.Sum256([]byte("t2"))]; p.User != "bob" || !slices.Equal(p.Groups, []string{"finance", "staff"}) {
		t.Errorf("t2: %+v", p)
	}
	if _, err := ParseTokenFile(strings.NewReader("only-a-token\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("a short line: %v", err)
	}
}

// The static tokens file is optional (its Secret may not exist) and is
// read again when it changes.
func TestStaticTokensFollowTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.csv")
	a := &Authenticator{Verifiers: []Verifier{&StaticTokens{Path: path}}}
	ctx := context.Background()
	if _, err := a.Authenticate(ctx, "t1"); err != ErrUnauthenticated {
		t.Fatalf("no file: %v", err)
	}
	if err := os.WriteFile(path, []byte("t1,alice,1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if p, err := a.Authenticate(ctx, "t1"); err != nil || p.User != "alice" {
		t.Fatalf("after writing the file: %+v %v", p, err)
	}
	if err := os.WriteFile(path, []byte("t2,bob,2,\"ops\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(ctx, "t1"); err != ErrUnauthenticated {
		t.Fatalf("a removed token still works: %v", err)
	}
	if p, err := a.Authenticate(ctx, "t2"); err != nil || p.User != "bob" {
		t.Fatalf("the new token: %+v %v", p, err)
	}
}

// A service account's token, issued by the API server (TokenRequest) and
// checked by TokenReview, makes the pod's identity the principal, with its
// groups: a tool it may not use is never listed, found, described or
// called.
func TestServiceAccountTokenFiltersTools(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "planner"}}
	// Open to the namespace's service accounts, the default.
	tc := testCatalog(ns, "sa", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOn})
	tc.Spec.Gateway.AllowedPrincipals = nil
	create(t, sa, tc,
		testTool(ns, "sa", "web_search", "Search the web for recent information.", params(`{"type":"object","properties":{"query":{"type":"string"}}}`)),
		testTool(ns, "sa", "plan_trip", "Plan a trip itinerary with flights and hotels.", allowed("system:serviceaccount:"+ns+":planner")),
		testTool(ns, "sa", "book_flight", "Book a flight between two airports.", allowed("group:system:serviceaccounts:"+ns)),
		testTool(ns, "sa", "wire_money", "Wire money from the company account to a bank account.", allowed("group:finance")),
	)
	published(t, ns, "sa", 4)
	tr := serviceAccountToken(t, ns, "planner", DefaultTokenAudience)
	cs := connect(t, ns, "sa", tr.Status.Token, "", nil)
	got := search(t, cs, "wire money to a bank account, plan a trip, book a flight")
	if slices.Contains(got.names(), "wire_money") || got.TotalAvailable != 2 || !slices.Contains(got.names(), "plan_trip") || !slices.Contains(got.names(), "book_flight") {
		t.Fatalf("tool_search as the service account: %+v", got)
	}
	for _, bridge := range []string{"tool_describe", "tool_call"} {
		out, isErr := callTool(t, cs, bridge, map[string]any{"name": "wire_money"})
		if !isErr || !strings.Contains(out, `no tool named "wire_money"`) {
			t.Errorf("%s wire_money: %q", bridge, out)
		}
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "wire_money", Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Errorf("calling wire_money directly: %v", err)
	}
	out, isErr := callTool(t, cs, "tool_describe", map[string]any{"name": "plan_trip"})
	if isErr || !strings.Contains(out, "plan_trip") {
		t.Errorf("tool_describe plan_trip: %q", out)
	}
	// The same catalog with every tool listed: the account's two and the
	// open one, never wire_money.
	patch := []byte(`{"spec":{"disclosure":{"mode":"off"}}}`)
	if err := kube.Patch(ctx, testCatalog(ns, "sa", v1alpha1.DisclosureSpec{}), client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		names := listed(t, connect(t, ns, "sa", tr.Status.Token, "", nil))
		if slices.Equal(names, []string{"book_flight", "plan_trip", "web_search"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("listed %v with disclosure off", names)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Without a token, with a bad one or another scheme, a client gets 401,
// unless the catalog allows anonymous clients, who then see only the tools
// open to everyone. Unknown catalogs are 404 once authenticated, bad
// windows 400.
func TestMissingOrBadTokenIsUnauthorized(t *testing.T) {
	ns := newNamespace(t)
	open := testCatalog(ns, "open", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOff})
	open.Spec.Gateway.AllowAnonymous = true
	create(t, testCatalog(ns, "closed", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOff}), open)
	create(t, standardTools(ns, "closed")...)
	create(t, standardTools(ns, "open")...)
	published(t, ns, "closed", 5)
	published(t, ns, "open", 5)

	post := func(path, auth string) (int, http.Header, string) { return initialize(t, path, auth) }
	closed, openPath := fmt.Sprintf("/mcp/%s/closed", ns), fmt.Sprintf("/mcp/%s/open", ns)
	for _, tt := range []struct {
		path, auth string
		want       int
	}{
		{closed, "", http.StatusUnauthorized},
		{closed, "Bearer not-a-token", http.StatusUnauthorized},
		{closed, "Basic YWxpY2U6c2VjcmV0", http.StatusUnauthorized},
		{closed, "Bearer " + aliceToken, http.StatusOK},
		{openPath, "", http.StatusOK},
		{openPath, "Bearer not-a-token", http.StatusUnauthorized},
		{fmt.Sprintf("/mcp/%s/nope", ns), "Bearer " + aliceToken, http.StatusNotFound},
		{fmt.Sprintf("/mcp/%s/nope", ns), "", http.StatusUnauthorized},
		{closed + "?contextWindow=lots", "Bearer " + aliceToken, http.StatusBadRequest},
	} {
		code, header, body := post(tt.path, tt.auth)
		if code != tt.want {
			t.Errorf("%s with %q: %d %s, want %d", tt.path, tt.auth, code, body, tt.want)
		}
		if code == http.StatusUnauthorized && !strings.HasPrefix(header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s with %q: 401 without WWW-Authenticate: Bearer", tt.path, tt.auth)
		}
	}
	// A session belongs to the principal that opened it.
	code, header, _ := post(closed, "Bearer "+aliceToken)
	session := header.Get("Mcp-Session-Id")
	if code != http.StatusOK || session == "" {
		t.Fatalf("alice's initialize: %d, session %q", code, session)
	}
	list := func(token string) int {
		req, _ := http.NewRequest(http.MethodPost, gatewayURL+closed, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := list(finToken); code != http.StatusForbidden {
		t.Errorf("fin on alice's session: %d, want 403", code)
	}
	if code := list(aliceToken); code != http.StatusOK {
		t.Errorf("alice on her own session: %d, want 200", code)
	}

	// Anonymous clients are system:anonymous: run_sql is for finance.
	if names := listed(t, connect(t, ns, "open", "", "", nil)); slices.Contains(names, "run_sql") || len(names) != 4 {
		t.Errorf("anonymous list: %v", names)
	}
	// A deleted catalog is no longer served: without a token, it is like
	// every other catalog that is not open to anonymous clients.
	if err := kube.Delete(context.Background(), open); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, _, _ := post(openPath, "")
		if code == http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a deleted catalog still answers %d", code)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// serviceAccountToken issues a token of a service account for audience
// (the API server's own when empty), as a projected volume would.
func serviceAccountToken(t *testing.T, ns, name, audience string) *authenticationv1.TokenRequest {
	t.Helper()
	shared.Use(t)
	cset, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	if _, getErr := cset.CoreV1().ServiceAccounts(ns).Get(t.Context(), name, metav1.GetOptions{}); apierrors.IsNotFound(getErr) {
		create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	}
	req := &authenticationv1.TokenRequest{}
	if audience != "" {
		req.Spec.Audiences = []string{audience}
	}
	tr, err := cset.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), name, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest: %v", err)
	}
	return tr
}

// A user name that says it is a group is refused from every source, here
// a static token: a permission "group:admins" could not tell that user
// from the group's members.
func TestUsersNamedAsGroupsAreRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(path, []byte("posing-token,group:admins,1\nplain-token,mallory,2,\"users\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &Authenticator{Verifiers: []Verifier{&StaticTokens{Path: path}}}
	if p, err := a.Authenticate(t.Context(), "posing-token"); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("a user named group:admins: %+v, %v", p, err)
	}
	if p, err := a.Authenticate(t.Context(), "plain-token"); err != nil || p.User != "mallory" {
		t.Fatalf("a plain user: %+v, %v", p, err)
	}
}
