package toolcatalog

import (
	"os/exec"
	"strings"
	"testing"
)

// Consumers import this package into agent runtimes: it must not drag in
// controller-runtime or the Kubernetes client.
func TestNoControllerRuntimeDependency(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "sigs.k8s.io/controller-runtime") || strings.HasPrefix(dep, "k8s.io/client-go") || strings.HasPrefix(dep, "k8s.io/api/") {
			t.Errorf("pkg/toolcatalog depends on %s", dep)
		}
	}
}
