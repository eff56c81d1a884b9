// Package config holds the operator's Kubernetes manifests; its test renders
// them as `make deploy` does and checks what a cluster would receive.
package config

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/toolcatalog/tool-catalog-operator/internal/testing/manifests"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/testenv"
)

// render renders a directory of config/ as `make deploy` does.
func render(t *testing.T, dir string) []runtime.Object { return testenv.Kustomize(t, dir) }

func TestDefaultKustomizationRenders(t *testing.T) {
	objs := render(t, "default")
	count := map[string]int{}
	deploys := map[string]*appsv1.Deployment{}
	roles := map[string]*rbacv1.ClusterRole{}
	for _, o := range objs {
		kind := o.GetObjectKind().GroupVersionKind().Kind
		count[kind]++
		switch v := o.(type) {
		case *appsv1.Deployment:
			deploys[v.Name] = v
		case *rbacv1.ClusterRole:
			roles[v.Name] = v
		}
		if m, ok := o.(interface{ GetNamespace() string }); ok {
			switch kind {
			case "Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			default:
				if m.GetNamespace() != "tool-catalog-system" {
					t.Errorf("%s in namespace %q, want tool-catalog-system", kind, m.GetNamespace())
				}
			}
		}
	}
	want := map[string]int{"Namespace": 1, "CustomResourceDefinition": 5, "ServiceAccount": 2, "ClusterRole": 6, "ClusterRoleBinding": 4, "Role": 1, "RoleBinding": 1, "Deployment": 2, "Service": 2,
		"ValidatingAdmissionPolicy": 2, "ValidatingAdmissionPolicyBinding": 2}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("%d %s, want %d", count[k], k, n)
		}
	}

	for _, name := range []string{"tool-catalog-controller-manager", "tool-catalog-gateway"} {
		deploy := deploys[name]
		if deploy == nil {
			t.Fatalf("no Deployment %s", name)
		}
		checkHardened(t, deploy)
	}
	if err := manifests.CheckProvenancePolicy(objs); err != nil {
		t.Error(err)
	}
	manager := deploys["tool-catalog-controller-manager"].Spec.Template.Spec
	if c := manager.Containers[0]; !slices.Contains(c.Args, "--leader-elect") {
		t.Errorf("args %v: leader election is not on", c.Args)
	}
	if c := manager.Containers[0]; c.Image != "tool-catalog-operator:dev" || manager.ServiceAccountName != "tool-catalog-controller-manager" {
		t.Errorf("manager image %s, service account %s", c.Image, manager.ServiceAccountName)
	}
	gw := deploys["tool-catalog-gateway"].Spec.Template.Spec
	if c := gw.Containers[0]; c.Image != "tool-catalog-operator:dev" || !slices.Equal(c.Command, []string{"/toolcatalog-gateway"}) || gw.ServiceAccountName != "tool-catalog-gateway" {
		t.Errorf("gateway image %s, command %v, service account %s", c.Image, c.Command, gw.ServiceAccountName)
	}
	if v := gw.Volumes; len(v) != 1 || v[0].Secret == nil || v[0].Secret.Optional == nil || !*v[0].Secret.Optional {
		t.Errorf("gateway volumes %+v: the static tokens Secret must be optional", v)
	}

	// The gateway reads catalogs, sources and Secrets and reviews tokens;
	// it writes nothing.
	allowedGateway := map[string][]string{"toolcatalogs": {"get", "list", "watch"}, "toolsources": {"get", "list", "watch"}, "secrets": {"get"},
		"tokenreviews": {"create"}, "subjectaccessreviews": {"create"},
		// Following a ToolSource's serverRef to the Pods a call goes to.
		"services": {"get"}, "pods": {"get"}, "endpointslices": {"list"}, "referencegrants": {"list"},
		"mcpservers": {"get"}, "mcpremoteproxies": {"get"}, "virtualmcpservers": {"get"}, "remotemcpservers": {"get"}}
	for _, name := range []string{"tool-catalog-gateway-role", "tool-catalog-gateway-tokenreview-role"} {
		for _, r := range roles[name].Rules {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if !slices.Contains(allowedGateway[res], v) {
						t.Errorf("the gateway may %s %s", v, res)
					}
				}
			}
		}
	}
	role := roles["tool-catalog-manager-role"]
	if role == nil {
		t.Fatalf("no manager ClusterRole among %v", roles)
	}

	// Least privilege: no wildcards, read-only Secrets; ToolDefinitions
	// are created, patched (server-side apply) and deleted only for the
	// ToolSources that own them, never updated; nothing else is created
	// or deleted but events, spent approvals deleted, and the ToolSources
	// of the servers ToolSourceTemplates discover.
	for _, r := range role.Rules {
		for _, v := range append(append([]string{}, r.Verbs...), append(r.Resources, r.APIGroups...)...) {
			if v == "*" {
				t.Errorf("wildcard in rule %+v", r)
			}
		}
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				if res == "secrets" && v != "get" && v != "list" && v != "watch" {
					t.Errorf("%s may %s %s; it only reads them", role.Name, v, res)
				}
				if res == "tooldefinitions" && v == "update" {
					t.Errorf("%s may update %s; ToolSources apply them", role.Name, res)
				}
				if (v == "delete" || v == "create") && res != "events" && res != "tooldefinitions" && res != "toolsources" && (v != "delete" || res != "toolsourceapprovals") {
					t.Errorf("%s may %s %s", role.Name, v, res)
				}
			}
		}
	}
}

// The namespaced install agrees with itself: each binary watches exactly
// the namespaces where it is granted rights, and nothing but reviews
// (TokenReviews, and SubjectAccessReviews for /metrics) is granted
// cluster-wide.
func TestNamespacedInstallRenders(t *testing.T) {
	watched, bound := namespacedInstall(t, render(t, "namespaced"))
	for _, sa := range []string{managerSA, gatewaySA} {
		if len(watched[sa]) == 0 || !slices.Equal(watched[sa], bound[sa]) {
			t.Errorf("%s watches %v but is bound in %v", sa, watched[sa], bound[sa])
		}
	}
}

// namespacedInstall returns, per service account, the namespaces of its
// Deployment's --watch-namespaces and those where a RoleBinding grants it
// its ClusterRole, each sorted; it fails the test on a ClusterRoleBinding
// that grants more than reviews.
func namespacedInstall(t *testing.T, objs []runtime.Object) (watched, bound map[string][]string) {
	t.Helper()
	watched, bound = map[string][]string{}, map[string][]string{}
	roles := map[string]*rbacv1.ClusterRole{}
	for _, o := range objs {
		if r, ok := o.(*rbacv1.ClusterRole); ok {
			roles[r.Name] = r
		}
	}
	for _, o := range objs {
		switch v := o.(type) {
		case *appsv1.Deployment:
			spec := v.Spec.Template.Spec
			for _, a := range spec.Containers[0].Args {
				if list, ok := strings.CutPrefix(a, watchNSPrefix); ok {
					watched[spec.ServiceAccountName] = strings.Split(list, ",")
				}
			}
		case *rbacv1.RoleBinding:
			if v.RoleRef.Kind != "ClusterRole" {
				continue
			}
			for _, s := range v.Subjects {
				bound[s.Name] = append(bound[s.Name], v.Namespace)
			}
		case *rbacv1.ClusterRoleBinding:
			for _, r := range roles[v.RoleRef.Name].Rules {
				if !slices.Equal(r.Resources, []string{"tokenreviews"}) && !slices.Equal(r.Resources, []string{"subjectaccessreviews"}) || !slices.Equal(r.Verbs, []string{"create"}) {
					t.Errorf("ClusterRoleBinding %s grants %v %v cluster-wide", v.Name, r.Verbs, r.Resources)
				}
			}
		}
	}
	for _, m := range []map[string][]string{watched, bound} {
		for k := range m {
			slices.Sort(m[k])
		}
	}
	return watched, bound
}

// checkHardened holds a Deployment to the restricted pod security
// standard, with requests, a memory limit and probes.
func checkHardened(t *testing.T, deploy *appsv1.Deployment) {
	t.Helper()
	for _, p := range manifests.Hardened(deploy) {
		t.Error(p)
	}
}
