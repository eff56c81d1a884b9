package serverref

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/internal/testing/testenv"
)

var kube client.Client

func TestMain(m *testing.M) {
	root := filepath.Join("..", "..")
	crds, err := testenv.SharedCRDs(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	env, cfg, err := testenv.Start(root, "", crds...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	if kube, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// specs are specs each kind's CRD admits.
var specs = map[schema.GroupKind]map[string]any{
	{Group: "mcp.x-k8s.io", Kind: "MCPServer"}: {
		"source": map[string]any{"type": "ContainerImage", "containerImage": map[string]any{"ref": "registry.example/mcp/fetch:1"}},
		"config": map[string]any{"port": int64(8080)},
	},
	{Group: "toolhive.stacklok.dev", Kind: "MCPServer"}:        {"image": "registry.example/mcp/fetch:1"},
	{Group: "toolhive.stacklok.dev", Kind: "MCPRemoteProxy"}:   {"remoteUrl": "https://mcp.example.com/mcp"},
	{Group: "toolhive.stacklok.dev", Kind: "VirtualMCPServer"}: {"groupRef": map[string]any{"name": "tools"}, "incomingAuth": map[string]any{"type": "anonymous"}},
	{Group: "kagent.dev", Kind: "RemoteMCPServer"}:             {"url": "http://fetch.tools.svc:8080/mcp", "description": "fetch"},
}

// readyConditions are the conditions that say each kind's server is ready,
// as each project documents them (../shared/crds/SOURCE.md), by version.
var readyConditions = map[schema.GroupKind]map[string]string{
	{Group: "mcp.x-k8s.io", Kind: "MCPServer"}:                 {"v1alpha1": "Ready", "v1beta1": "Verified"},
	{Group: "toolhive.stacklok.dev", Kind: "MCPServer"}:        {"v1alpha1": "Ready", "v1beta1": "Ready"},
	{Group: "toolhive.stacklok.dev", Kind: "MCPRemoteProxy"}:   {"v1alpha1": "Ready", "v1beta1": "Ready"},
	{Group: "toolhive.stacklok.dev", Kind: "VirtualMCPServer"}: {"v1alpha1": "Ready", "v1beta1": "Ready"},
	{Group: "kagent.dev", Kind: "RemoteMCPServer"}:             {"v1alpha2": "Accepted", "v1alpha3": "Accepted"},
}

// Every kind of server at every version it is served at is read where its
// own CRD keeps the address and the ready condition: what Kinds names is
// written through the real API server, which prunes a field its schema
// does not define, and read back.
func TestEachKindIsReadWhereItsCRDKeepsTheServer(t *testing.T) {
	ctx := t.Context()
	for i, k := range Kinds {
		for _, version := range k.Versions {
			t.Run(k.Kind+"."+k.Group+"/"+version, func(t *testing.T) {
				u := &unstructured.Unstructured{Object: map[string]any{"spec": specs[k.GroupKind]}}
				u.SetGroupVersionKind(k.WithVersion(version))
				u.SetNamespace("default")
				u.SetName(fmt.Sprintf("server-%d-%s", i, version))
				if err := kube.Create(ctx, u); err != nil {
					t.Fatalf("creating a %s the CRD admits: %v", k.Kind, err)
				}
				url := fmt.Sprintf("http://%s.default.svc.cluster.local:8080/mcp", u.GetName())
				if k.URL[0] == "spec" {
					url, _, _ = unstructured.NestedString(u.Object, k.URL...)
				}
				if err := unstructured.SetNestedField(u.Object, url, k.URL...); err != nil {
					t.Fatal(err)
				}
				ready := readyConditions[k.GroupKind][version]
				if got := k.ReadyCondition(version); got != ready {
					t.Fatalf("the ready condition is read as %q; %s documents %q", got, k.Project, ready)
				}
				condition := map[string]any{"type": ready, "status": "False", "reason": "Starting",
					"message": "waiting for\x1b[31m the pod" + strings.Repeat(" and more", 100), "lastTransitionTime": metav1.Now().UTC().Format("2006-01-02T15:04:05Z"),
					"observedGeneration": u.GetGeneration()}
				other := map[string]any{"type": "Unrelated", "status": "True", "reason": "Fine", "message": "", "lastTransitionTime": condition["lastTransitionTime"]}
				if err := unstructured.SetNestedSlice(u.Object, []any{other, condition}, "status", "conditions"); err != nil {
					t.Fatal(err)
				}
				if err := kube.Status().Update(ctx, u); err != nil {
					t.Fatalf("writing the status: %v", err)
				}
				got := &unstructured.Unstructured{}
				got.SetGroupVersionKind(k.WithVersion(version))
				if err := kube.Get(ctx, client.ObjectKeyFromObject(u), got); err != nil {
					t.Fatal(err)
				}
				s, readErr := Read(got)
				if readErr != nil {
					t.Fatal(readErr)
				}
				if s.URL != url || s.Ready || s.Status != "False" || s.Reason != "Starting" {
					t.Fatalf("read %+v; want the URL %s, not ready (False, Starting)", s, url)
				}
				if strings.ContainsAny(s.Message, "\x1b") || len([]rune(s.Message)) > MaxMessage+1 || !strings.HasPrefix(s.Message, "waiting for [31m the pod") {
					t.Fatalf("the message is carried as %q", s.Message)
				}
				if w := s.Waiting(k, "default", u.GetName()); !strings.Contains(w, "its "+ready+" condition is False (Starting)") {
					t.Fatalf("waiting says %q", w)
				}

				condition["status"] = "True"
				if err := unstructured.SetNestedSlice(got.Object, []any{other, condition}, "status", "conditions"); err != nil {
					t.Fatal(err)
				}
				if err := kube.Status().Update(ctx, got); err != nil {
					t.Fatal(err)
				}
				if err := kube.Get(ctx, client.ObjectKeyFromObject(u), got); err != nil {
					t.Fatal(err)
				}
				if s, readErr = Read(got); readErr != nil || !s.Ready || s.URL != url {
					t.Fatalf("read %+v, %v; want ready at %s", s, readErr, url)
				}

				// A spec changed since the condition was written: its
				// generation moves on, and the condition no longer says
				// the server is ready.
				value, path := specChange(k)
				if err := unstructured.SetNestedField(got.Object, value, append([]string{"spec"}, path...)...); err != nil {
					t.Fatal(err)
				}
				if err := kube.Update(ctx, got); err != nil {
					t.Fatal(err)
				}
				if got.GetGeneration() == u.GetGeneration() {
					t.Fatalf("the spec's change did not move %s's generation", k.Kind)
				}
				if s, readErr = Read(got); readErr != nil || s.Ready {
					t.Fatalf("read %+v, %v; want not ready after the spec moved on", s, readErr)
				}
			})
		}
	}
}

// specChange is a change of a spec field of the kind: a value and its
// path under spec.
func specChange(k Kind) (any, []string) {
	switch k.GroupKind {
	case schema.GroupKind{Group: "mcp.x-k8s.io", Kind: "MCPServer"}:
		return int64(9090), []string{"config", "port"}
	case schema.GroupKind{Group: "toolhive.stacklok.dev", Kind: "MCPServer"}:
		return "registry.example/mcp/fetch:2", []string{"image"}
	case schema.GroupKind{Group: "toolhive.stacklok.dev", Kind: "MCPRemoteProxy"}:
		return "https://other.example.com/mcp", []string{"remoteUrl"}
	case schema.GroupKind{Group: "toolhive.stacklok.dev", Kind: "VirtualMCPServer"}:
		return "other-tools", []string{"groupRef", "name"}
	}
	return "fetch, changed", []string{"description"}
}

// Kinds and versions a ToolSource may not name, and fields of the wrong
// type, are refused, saying what is read.
func TestReadRefusesWhatItDoesNotKnow(t *testing.T) {
	for _, tc := range []struct {
		name string
		gvk  schema.GroupVersionKind
		obj  map[string]any
		want string
	}{
		{"another kind", schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, nil, "is not a kind of MCP server"},
		{"another version", schema.GroupVersionKind{Group: "mcp.x-k8s.io", Version: "v2", Kind: "MCPServer"}, nil, "it reads v1alpha1, v1beta1"},
		{"a URL that is not a string", schema.GroupVersionKind{Group: "toolhive.stacklok.dev", Version: "v1beta1", Kind: "MCPServer"},
			map[string]any{"status": map[string]any{"url": int64(5)}}, ".status.url"},
		{"conditions that are not a list", schema.GroupVersionKind{Group: "kagent.dev", Version: "v1alpha2", Kind: "RemoteMCPServer"},
			map[string]any{"status": map[string]any{"conditions": "Accepted"}}, ".status.conditions"},
	} {
		u := &unstructured.Unstructured{Object: tc.obj}
		if u.Object == nil {
			u.Object = map[string]any{}
		}
		u.SetGroupVersionKind(tc.gvk)
		u.SetNamespace("tools")
		u.SetName("fetch")
		if _, err := Read(u); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error saying %q", tc.name, err, tc.want)
		}
	}
}
