package config

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/gateway"
	"github.com/toolcatalog/tool-catalog-operator/internal/manager"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/mcptest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/testenv"
)

const (
	system        = "tool-catalog-system"
	managerSA     = "tool-catalog-controller-manager"
	gatewaySA     = "tool-catalog-gateway"
	watchNSPrefix = "--watch-namespaces="
)

// The namespaced install applied to a real API server (with RBAC): the
// manager and the gateway, each running with only the rights it grants,
// work in a watched namespace; neither may read a Secret, or list
// anything, elsewhere.
func TestNamespacedInstallGrantsOnlyItsNamespaces(t *testing.T) {
	objs := render(t, "namespaced")
	watched, _ := namespacedInstall(t, objs)
	cfg, admin := apiServer(t)
	ctx := t.Context()
	namespaces := append([]string{system, "team-c"}, watched[managerSA]...)
	for _, ns := range namespaces {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range objs {
		switch o.(type) {
		case *corev1.ServiceAccount, *rbacv1.Role, *rbacv1.RoleBinding, *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding:
			if err := admin.Create(ctx, o.(client.Object)); err != nil {
				t.Fatal(err)
			}
		}
	}

	may := func(sa, verb, group, resource, ns string) bool {
		t.Helper()
		r := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:" + system + ":" + sa,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + system, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Namespace: ns},
		}}
		if err := admin.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		return r.Status.Allowed
	}
	for _, sa := range []string{managerSA, gatewaySA} {
		for _, c := range []struct {
			verb, group, resource, ns string
			want                      bool
		}{
			{"get", "", "secrets", "team-a", true},
			{"get", "", "secrets", "team-c", false},
			{"get", "", "secrets", system, false},
			{"list", "", "secrets", "", false},
			{"get", "toolcatalog.dev", "toolcatalogs", "team-b", true},
			{"list", "toolcatalog.dev", "toolcatalogs", "", false},
			{"get", "toolcatalog.dev", "toolsources", "team-c", false},
		} {
			if got := may(sa, c.verb, c.group, c.resource, c.ns); got != c.want {
				t.Errorf("%s may %s %s in %q: %v, want %v", sa, c.verb, c.resource, c.ns, got, c.want)
			}
		}
	}
	if !may(gatewaySA, "create", "authentication.k8s.io", "tokenreviews", "") {
		t.Error("the gateway may not create TokenReviews")
	}

	// The manager, as its service account, imports a source's tools in
	// team-a with the source's (opted-in) Secret, past the admission
	// policies that let only it make a source the owner of a tool. The
	// source in team-c, created first, is not its to reconcile and is
	// left alone.
	createAdmission(t, admin, objs, "team-a")
	srv := mcptest.New(t, mcptest.Options{Token: "team-a-token"})
	srv.Tool("ping", "Answer pong.", nil, nil)
	source := func(ns string) *v1alpha1.ToolSource {
		return &v1alpha1.ToolSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ping"}, Spec: v1alpha1.ToolSourceSpec{
			MCP: v1alpha1.MCPServerSpec{URL: srv.URL, BearerTokenSecretRef: &v1alpha1.SecretKeySelector{Name: "mcp-token", Key: "token"}}}}
	}
	for _, o := range []client.Object{
		source("team-c"),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "mcp-token", Labels: map[string]string{v1alpha1.LabelSecret: v1alpha1.LabelSecretValue}},
			StringData: map[string]string{"token": "team-a-token"}},
		source("team-a"),
	} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	managerDone, gatewayDone := make(chan error, 1), make(chan error, 1)
	t.Cleanup(func() {
		stop()
		<-managerDone
		<-gatewayDone
	})
	go func() {
		managerDone <- manager.Run(runCtx, as(cfg, managerSA), manager.Config{MetricsAddr: "0", ProbeAddr: "0",
			WatchNamespaces: watched[managerSA], EgressAllow: []string{"127.0.0.1/32"}})
	}()
	testenv.WaitFor(t, "the manager to import team-a's tools", time.Minute, func() bool {
		ts := &v1alpha1.ToolSource{}
		return admin.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "ping"}, ts) == nil &&
			meta.IsStatusConditionTrue(ts.Status.Conditions, v1alpha1.ConditionReady) && ts.Status.ToolCount == 1
	})
	other := &v1alpha1.ToolSource{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: "team-c", Name: "ping"}, other); err != nil || len(other.Status.Conditions) != 0 {
		t.Errorf("the manager reconciled a source outside its namespaces: %v %+v", err, other.Status)
	}

	// The gateway, as its service account, syncs its cache with only
	// these rights and answers for a catalog elsewhere as for none.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokens, []byte("ops-token,ops,1,\"ops\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		gatewayDone <- gateway.Run(runCtx, as(cfg, gatewaySA), gateway.Config{Listener: l, MetricsAddr: "0", StaticTokens: tokens,
			Namespaces: watched[gatewaySA], Log: logr.Discard()})
	}()
	base := "http://" + l.Addr().String()
	testenv.WaitFor(t, "the gateway to be ready", time.Minute, func() bool { return status(t, base+"/readyz", "") == http.StatusOK })
	for _, path := range []string{"/mcp/team-c/tools", "/mcp/team-a/missing"} {
		if code := status(t, base+path, "ops-token"); code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", path, code)
		}
	}
}

// as is cfg acting as a service account of the operator's namespace.
func as(cfg *rest.Config, sa string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + system + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + system, "system:authenticated"}}
	return c
}

// status is the HTTP status of a POST of an MCP initialize to url (a GET
// for probes), with a bearer token when given.
func status(t *testing.T, url, token string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
		req, err = http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
