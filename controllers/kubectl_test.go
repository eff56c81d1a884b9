package controllers

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
)

// runKubectl runs the kubectl built beside the test API server.
func runKubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := tryKubectl(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func tryKubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cluster.Use(t)
	bin := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("kubectl not found in KUBEBUILDER_ASSETS: run `bash hack/build-controlplane.sh` (it builds kubectl with the API server): %v", err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

func TestKubectlExplainShowsFieldDocs(t *testing.T) {
	tests := []struct {
		resource string
		want     []string
	}{
		{"tooldefinition.spec", []string{"function name the model sees", "description", "only prose the model reads", "parameters", "JSON Schema", "exampleQueries", "alwaysInclude"}},
		{"td.status", []string{"specHash", "sha256", "catalogs", "conditions"}},
		{"toolcatalog.spec.redis", []string{"addresses", "hash tag", "passwordSecretRef"}},
		{"tc.spec.search.method", []string{"semantic, bm25, hybrid or rrf"}},
	}
	for _, tt := range tests {
		t.Run(tt.resource, func(t *testing.T) {
			// The API server publishes a new CRD's OpenAPI schema shortly
			// after the CRD is established.
			var out string
			gomegaFor(t).Eventually(func() (err error) {
				out, err = tryKubectl(t, "explain", tt.resource)
				return err
			}).Should(Succeed())
			t.Logf("kubectl explain %s:\n%s", tt.resource, out)
			for _, s := range tt.want {
				if !strings.Contains(out, s) {
					t.Errorf("kubectl explain %s does not mention %q:\n%s", tt.resource, s, out)
				}
			}
		})
	}
}

func TestKubectlGetUsesShortNamesCategoryAndColumns(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	g.Expect(k8sClient.Create(context.Background(), weatherTool(ns, "weather"))).To(Succeed())
	catalog := decodeYAML(t, validCatalogYAML)
	catalog.SetNamespace(ns)
	g.Expect(k8sClient.Create(context.Background(), catalog)).To(Succeed())
	g.Eventually(func(g Gomega) {
		expectCondition(g, getTD(g, ns, "weather"), v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSpecValid)
	}).Should(Succeed())

	// Short name td, and the columns Tool, Ready and Status.
	out := runKubectl(t, "get", "td", "-n", ns)
	g.Expect(strings.Fields(firstLine(out))).To(Equal([]string{"NAME", "TOOL", "READY", "STATUS", "AGE"}))
	g.Expect(out).To(MatchRegexp(`weather\s+get_weather\s+True\s+tool spec is valid`))

	// Short name tc, and the columns Version, Tools and Pinned.
	out = runKubectl(t, "get", "tc", "-n", ns)
	g.Expect(strings.Fields(firstLine(out))).To(Equal([]string{"NAME", "READY", "STATUS", "VERSION", "TOOLS", "PINNED", "AGE"}))

	// The category lists both kinds.
	out = runKubectl(t, "get", "toolcatalog", "-n", ns, "-o", "name")
	g.Expect(out).To(ContainSubstring("tooldefinition.toolcatalog.dev/weather"))
	g.Expect(out).To(ContainSubstring("toolcatalog.toolcatalog.dev/probe"))
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func TestKubectlDescribeShowsCatalogAndToolState(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	p := newProvider(t, ns)
	threeTools(t, g, ns, p)
	g.Eventually(func(g Gomega) {
		expectCondition(g, getTD(g, ns, "weather"), v1alpha1.ConditionEmbedded, metav1.ConditionTrue, v1alpha1.ReasonEmbedded)
	}).Should(Succeed())

	out := runKubectl(t, "get", "tc", "-n", ns, "-o", "wide")
	t.Logf("kubectl get tc -o wide:\n%s", out)
	g.Expect(out).To(MatchRegexp(`tools\s+True\s+version 1 serves 3 tools\s+1\s+3\s+0\s+0`))

	out = runKubectl(t, "describe", "tc", "-n", ns, "tools")
	t.Logf("kubectl describe tc:\n%s", out)
	for _, re := range []string{`Version:\s+1`, `Schema Hash:\s+[0-9a-f]{64}`, `Embedded:\s+3`, `Stale:\s+0`, `Type:\s+EmbeddingsSynced`,
		`Normal\s+VersionPublished\s+.*published version 1: 3 tools`} {
		g.Expect(out).To(MatchRegexp(re))
	}

	out = runKubectl(t, "describe", "td", "-n", ns, "weather")
	t.Logf("kubectl describe td:\n%s", out)
	for _, re := range []string{`Spec Hash:\s+[0-9a-f]{64}`, `Catalog:\s+tools`, `Catalog Version:\s+1`, `Query Count:\s+3`,
		`Message:\s+embedded in tools \(version 1\)`, `Type:\s+Embedded`} {
		g.Expect(out).To(MatchRegexp(re))
	}
}
