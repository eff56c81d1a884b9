// Package charts holds the operator's Helm chart. Its test runs Helm (built
// from hack/tools/go.mod) on the chart with the default values and each
// file of ci/, applies every rendering to a real API server with
// server-side dry-run, installs and removes the default release, and holds
// what the chart grants to what config/ grants.
package charts

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/toolcatalog/tool-catalog-operator/internal/testing/manifests"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/testenv"
)

const (
	chart     = "tool-catalog-operator"
	release   = "tool-catalog"
	namespace = "tool-catalog-system"
	// promOperator holds the ServiceMonitor and PodMonitor CRDs the chart
	// can render, fetched from the Go module proxy.
	promOperator = "github.com/prometheus-operator/prometheus-operator@v0.85.0"
)

// helmRun runs Helm and returns its standard output; Helm's own files
// (cache, config) stay in a temporary directory.
func helmRun(t *testing.T, helm string, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helm, args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), errors.New(strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// cases are the values files the chart is checked with: its defaults and
// each file of ci/.
func cases(t *testing.T) map[string][]string {
	files, err := filepath.Glob(filepath.Join(chart, "ci", "*-values.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no values files in %s/ci: %v", chart, err)
	}
	out := map[string][]string{"default": nil}
	for _, f := range files {
		out[strings.TrimSuffix(filepath.Base(f), "-values.yaml")] = []string{"--values", f}
	}
	return out
}

func TestMain(m *testing.M) {
	log.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// cluster builds Helm and starts a test API server with the project's
// CRDs; it returns Helm, a kubeconfig file for the API server, and an
// admin client.
func cluster(t *testing.T) (helm, kubeconfig string, admin client.Client) {
	t.Helper()
	helm = testenv.Tool(t, "..", "helm.sh/helm/v4/cmd/helm")
	env, cfg, err := testenv.Start("..", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if writeFileErr := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); writeFileErr != nil {
		t.Fatal(writeFileErr)
	}
	if admin, err = client.New(cfg, client.Options{Scheme: scheme()}); err != nil {
		t.Fatal(err)
	}
	return helm, kubeconfig, admin
}

func TestChart(t *testing.T) {
	helm, _, admin := cluster(t)
	ctx := t.Context()
	for _, ns := range []string{namespace, "team-a", "team-b"} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	installMonitoringCRDs(t, admin)

	rendered := map[string][]runtime.Object{}
	for name, values := range cases(t) {
		t.Run(name, func(t *testing.T) {
			if out, err := helmRun(t, helm, append([]string{"lint", "--strict", chart}, values...)...); err != nil {
				t.Fatalf("helm lint: %v\n%s", err, out)
			}
			out, err := helmRun(t, helm, append([]string{"template", release, chart, "--namespace", namespace}, values...)...)
			if err != nil {
				t.Fatalf("helm template: %v", err)
			}
			objs, err := manifests.Decode([]byte(out))
			if err != nil {
				t.Fatal(err)
			}
			rendered[name] = objs
			for _, o := range objs {
				if d, ok := o.(*appsv1.Deployment); ok {
					for _, p := range manifests.Hardened(d) {
						t.Error(p)
					}
				}
				u := &unstructured.Unstructured{}
				if u.Object, err = runtime.DefaultUnstructuredConverter.ToUnstructured(o); err != nil {
					t.Fatal(err)
				}
				if err := admin.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.DryRunAll, client.ForceOwnership, client.FieldOwner("helm")); err != nil {
					t.Errorf("server-side dry-run of %s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
				}
			}
		})
	}

	// The default chart grants what config/default grants, and the
	// namespaced one what config/namespaced grants, to the same components.
	for chartCase, dir := range map[string]string{"default": "default", "namespaced": "namespaced"} {
		if rendered[chartCase] == nil {
			t.Fatalf("the %s rendering failed", chartCase)
		}
		got, want := componentGrants(t, rendered[chartCase]), componentGrants(t, testenv.Kustomize(t, filepath.Join("..", "config", dir)))
		for _, g := range got {
			if !slices.Contains(want, g) {
				t.Errorf("the chart's %s install grants what config/%s does not: %s", chartCase, dir, g)
			}
		}
		for _, g := range want {
			if !slices.Contains(got, g) {
				t.Errorf("the chart's %s install lacks what config/%s grants: %s", chartCase, dir, g)
			}
		}
	}

	// The admission policy lets through the manager the chart runs.
	if err := manifests.CheckProvenancePolicy(rendered["default"]); err != nil {
		t.Error(err)
	}
	// Its rules are config/'s.
	if err := manifests.SamePolicyRules(rendered["default"], testenv.Kustomize(t, filepath.Join("..", "config", "default"))); err != nil {
		t.Error(err)
	}

	// The CRDs of crds/ are the project's, installed as they are.
	out, err := helmRun(t, helm, "show", "crds", chart)
	if err != nil {
		t.Fatal(err)
	}
	crds, err := manifests.Decode([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range crds {
		names = append(names, o.(*apiextensionsv1.CustomResourceDefinition).Name)
	}
	slices.Sort(names)
	if want := []string{"toolcatalogs.toolcatalog.dev", "tooldefinitions.toolcatalog.dev", "toolsourceapprovals.toolcatalog.dev", "toolsources.toolcatalog.dev", "toolsourcetemplates.toolcatalog.dev"}; !slices.Equal(names, want) {
		t.Errorf("helm show crds: %v, want %v", names, want)
	}
}

// Bad values are refused before anything is rendered, saying what to fix.
func TestChartRefusesBadValues(t *testing.T) {
	helm := testenv.Tool(t, "..", "helm.sh/helm/v4/cmd/helm")
	for _, tc := range []struct {
		set  []string
		want []string
	}{
		{[]string{"rbac.scope=everywhere"}, []string{"/rbac/scope", "cluster", "namespaced"}},
		{[]string{"managr.enabled=false"}, []string{"managr"}},
		{[]string{"rbac.scope=namespaced"}, []string{"watchNamespaces"}},
		{[]string{"watchNamespaces={Team_A}"}, []string{"/watchNamespaces/0"}},
		{[]string{"gateway.replicas=-1"}, []string{"/gateway/replicas"}},
		{[]string{"manager.logLevel=verbose"}, []string{"/manager/logLevel", "debug"}},
		{[]string{"gateway.oidcIssuers={url=http://insecure.example.com}"}, []string{"/gateway/oidcIssuers/0"}},
		{[]string{"gateway.oidcIssuers={url=https://login.example.com,audience=tools}"}, []string{"/gateway/publicURL", "minLength"}},
	} {
		args := []string{"template", release, chart}
		for _, s := range tc.set {
			args = append(args, "--set", s)
		}
		_, err := helmRun(t, helm, args...)
		if err == nil {
			t.Errorf("--set %v was rendered", tc.set)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("--set %v: error %q does not say %q", tc.set, err, w)
			}
		}
	}
	// The same command with good values renders: the refusals above are
	// the values' doing.
	if _, err := helmRun(t, helm, "template", release, chart, "--set", "rbac.scope=namespaced", "--set", "watchNamespaces={team-a}"); err != nil {
		t.Errorf("good values refused: %v", err)
	}
}

// The default release installs into a real API server (nothing runs: it
// has no nodes), prints how to reach the gateway, upgrades, and uninstalls
// leaving the CRDs, as Helm does.
func TestChartInstalls(t *testing.T) {
	helm, kubeconfig, admin := cluster(t)
	kc := []string{"--kubeconfig", kubeconfig, "--namespace", namespace}
	notes, err := helmRun(t, helm, append([]string{"install", release, chart, "--create-namespace"}, kc...)...)
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}
	fullname := release + "-" + chart
	for _, want := range []string{
		"http://" + fullname + "-gateway." + namespace + ".svc/mcp/<namespace>/<catalog>",
		"kubectl -n " + namespace + " port-forward service/" + fullname + "-gateway 8080:80",
		"--audience toolcatalog-gateway",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("the install notes do not say %q:\n%s", want, notes)
		}
	}
	deploys := &appsv1.DeploymentList{}
	if err := admin.List(t.Context(), deploys, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range deploys.Items {
		names = append(names, d.Name)
	}
	slices.Sort(names)
	if want := []string{fullname + "-gateway", fullname + "-manager"}; !slices.Equal(names, want) {
		t.Errorf("Deployments %v, want %v", names, want)
	}
	if _, err := helmRun(t, helm, append([]string{"upgrade", release, chart, "--set", "gateway.replicas=3"}, kc...)...); err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
	gw := &appsv1.Deployment{}
	if err := admin.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: fullname + "-gateway"}, gw); err != nil {
		t.Fatal(err)
	}
	if *gw.Spec.Replicas != 3 {
		t.Errorf("after the upgrade the gateway has %d replicas, want 3", *gw.Spec.Replicas)
	}
	if _, err := helmRun(t, helm, append([]string{"uninstall", release, "--wait"}, kc...)...); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	if err := admin.List(t.Context(), deploys, client.InNamespace(namespace)); err != nil || len(deploys.Items) != 0 {
		t.Errorf("after the uninstall: %d Deployments (%v)", len(deploys.Items), err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := admin.Get(t.Context(), client.ObjectKey{Name: "toolcatalogs.toolcatalog.dev"}, crd); err != nil {
		t.Errorf("the CRDs must outlive the release: %v", err)
	}
}

// scheme holds Kubernetes' own kinds and CRDs.
func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	return s
}

// componentGrants lists what a rendering grants, naming each ServiceAccount
// by the component of the Deployment that runs as it.
func componentGrants(t *testing.T, objs []runtime.Object) []string {
	t.Helper()
	component := map[string]string{}
	for _, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok {
			component[d.Spec.Template.Spec.ServiceAccountName] = d.Labels["app.kubernetes.io/component"]
		}
	}
	grants, err := manifests.Grants(objs)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range grants {
		c, ok := component[g.Account]
		if !ok {
			t.Errorf("%s: no Deployment runs as %s", g, g.Account)
		}
		g.Account = c
		out = append(out, g.String())
	}
	return out
}

// installMonitoringCRDs installs the Prometheus Operator's ServiceMonitor
// and PodMonitor CRDs, from its Go module.
func installMonitoringCRDs(t *testing.T, admin client.Client) {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", promOperator)
	cmd.Dir = t.TempDir()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s (the Go module proxy must be reachable): %v", promOperator, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"servicemonitors", "podmonitors"} {
		raw, err := os.ReadFile(filepath.Join(mod.Dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_"+kind+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := manifests.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			crd := o.(*apiextensionsv1.CustomResourceDefinition)
			if err := admin.Create(t.Context(), crd); err != nil {
				t.Fatal(err)
			}
			testenv.WaitFor(t, "the "+crd.Name+" CRD established", time.Minute, func() bool {
				got := &apiextensionsv1.CustomResourceDefinition{}
				if err := admin.Get(t.Context(), client.ObjectKeyFromObject(crd), got); err != nil {
					return false
				}
				for _, c := range got.Status.Conditions {
					if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
						return true
					}
				}
				return false
			})
		}
	}
}

// The chart's README is generated from values.yaml's comments by
// helm-docs (make chart-docs) and committed in step.
func TestChartReadme(t *testing.T) {
	helmDocs := testenv.Tool(t, "..", "github.com/norwoodj/helm-docs/cmd/helm-docs")
	cmd := exec.Command(helmDocs, "--chart-search-root", chart, "--dry-run", "--log-level", "warning")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm-docs: %v", err)
	}
	committed, err := os.ReadFile(filepath.Join(chart, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.TrimSpace(out), bytes.TrimSpace(committed)) {
		t.Errorf("%s/README.md is not what values.yaml says: run make chart-docs and commit it", chart)
	}
	for _, key := range []string{"rbac.scope", "watchNamespaces", "gateway.networkPolicy.egress", "manager.metrics.serviceMonitor.enabled"} {
		if !bytes.Contains(committed, []byte("| "+key+" |")) {
			t.Errorf("the README's values table has no row for %s", key)
		}
	}
}
