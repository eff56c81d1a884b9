package toolcatalog

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/toolcatalog/tool-catalog-operator"

// deps lists the full dependency closure of the packages.
func deps(t *testing.T, pkgs ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-deps"}, pkgs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	return strings.Fields(string(out))
}

// Agent runtimes import pkg/: nothing under it may drag in Kubernetes
// libraries or the operator's internals.
func TestPkgHasNoKubernetesOrInternalDependency(t *testing.T) {
	for _, dep := range deps(t, module+"/pkg/...") {
		if strings.HasPrefix(dep, "k8s.io/") || strings.HasPrefix(dep, "sigs.k8s.io/") || strings.HasPrefix(dep, module+"/internal/") {
			t.Errorf("pkg/... depends on %s", dep)
		}
	}
}

// The contract and the consumer package carry no provider SDK and no model
// weights: those are opt-in subpackages (builtin, openai).
func TestConsumerPackageCarriesNoModelOrSDK(t *testing.T) {
	for _, dep := range deps(t, module+"/pkg/contract", module+"/pkg/toolcatalog") {
		if strings.HasPrefix(dep, "github.com/openai/") || strings.HasPrefix(dep, module+"/pkg/toolcatalog/builtin") ||
			strings.HasPrefix(dep, module+"/pkg/toolcatalog/openai") {
			t.Errorf("pkg/contract or pkg/toolcatalog depends on %s", dep)
		}
	}
}
