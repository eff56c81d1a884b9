// Package linked holds the tests that keep each binary from linking what
// makes it large and that it has no use for, and within its size budget;
// `make build` prints the sizes.
package linked

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/toolcatalog/tool-catalog-operator"

// heavy are packages that cost a binary megabytes, with what each costs
// and why it is not needed.
var heavy = map[string]string{
	"github.com/openai/openai-go/v3":            "the OpenAI SDK's package init keeps all of it (16 MB); providers speak the wire format with net/http",
	"html/template":                             "executing a template keeps every exported method in the binary (18 MB in the plugin); pages are node trees",
	"gonum.org/v1/plot":                         "a plotting stack with fonts (7 MB) for two charts drawn as plain SVG",
	"k8s.io/client-go/kubernetes":               "a clientset links a client of every API group; use the typed client of the group",
	"k8s.io/client-go/kubernetes/scheme":        "registers every built-in API group (16 MB); the plugin's client (internal/kube) registers its kinds only",
	"sigs.k8s.io/controller-runtime/pkg/client": "imports client-go's kubernetes/scheme",
	module + "/internal/check":                  "the offline check links the API server's validation (OpenAPI, CEL) and the grading, 53 MB on its own: the plugin runs toolcatalog-check",
}

func TestBinariesLinkOnlyWhatTheyUse(t *testing.T) {
	for cmd, refused := range map[string][]string{
		"manager":             {"github.com/openai/openai-go/v3", "html/template", "gonum.org/v1/plot"},
		"toolcatalog-gateway": {"github.com/openai/openai-go/v3", "html/template", "gonum.org/v1/plot"},
		// The console's pages link html/template (gomponents names its
		// types) but never execute a template.
		"kubectl-toolcatalog": {"github.com/openai/openai-go/v3", "gonum.org/v1/plot", "k8s.io/client-go/kubernetes", "k8s.io/client-go/kubernetes/scheme", "sigs.k8s.io/controller-runtime/pkg/client", module + "/internal/check"},
		"toolcatalog-check":   {"github.com/openai/openai-go/v3", "html/template", "gonum.org/v1/plot"},
	} {
		t.Run(cmd, func(t *testing.T) {
			// The tags of release builds: grpcnotrace keeps gRPC from
			// linking html/template through golang.org/x/net/trace.
			out, err := exec.Command("go", "list", "-tags", "grpcnotrace", "-deps", module+"/cmd/"+cmd).CombinedOutput()
			if err != nil {
				t.Fatalf("go list -deps: %v\n%s", err, out)
			}
			linked := map[string]bool{}
			for _, p := range strings.Fields(string(out)) {
				linked[p] = true
			}
			for _, p := range refused {
				if linked[p] {
					t.Errorf("%s links %s: %s", cmd, p, heavy[p])
				}
			}
		})
	}
}

// budgets are the sizes, in MB (10^6 bytes), a release build of each
// binary may reach: the plugin is downloaded by every user of kubectl,
// the images are pulled on every node that runs them.
var budgets = map[string]float64{
	"manager":             60,
	"toolcatalog-gateway": 55,
	"kubectl-toolcatalog": 45,
	// The offline check runs in CI images: the API server's validation
	// libraries, the grading and the builtin model.
	"toolcatalog-check": 60,
}

// A release build (the flags of make build) of each binary stays within
// its budget.
func TestReleaseBuildsStayWithinTheirBudgets(t *testing.T) {
	dir := t.TempDir()
	for cmd, budget := range budgets {
		t.Run(cmd, func(t *testing.T) {
			bin := filepath.Join(dir, cmd)
			out, err := exec.Command("go", "build", "-trimpath", "-tags", "grpcnotrace", "-ldflags=-s -w", "-o", bin, module+"/cmd/"+cmd).CombinedOutput()
			if err != nil {
				t.Fatalf("go build: %v\n%s", err, out)
			}
			st, err := os.Stat(bin)
			if err != nil {
				t.Fatal(err)
			}
			size := float64(st.Size()) / 1e6
			t.Logf("%s: %.1f MB (budget %.0f MB)", cmd, size, budget)
			if size > budget {
				t.Errorf("a release build of %s is %.1f MB, past its budget of %.0f MB: see what it links with go list -deps, and TestBinariesLinkOnlyWhatTheyUse", cmd, size, budget)
			}
		})
	}
}

// grading names the self-grading's code, which lives beside the search
// index it reaches into (pkg/toolcatalog/internal/index) but is reached
// only through package selfgrade: its types and their methods.
var grading = []string{
	"pkg/toolcatalog/internal/index.(*grader)",
	"pkg/toolcatalog/internal/index.(*indexGrader)",
	"pkg/toolcatalog/internal/index.blendWatch",
	"pkg/toolcatalog/internal/index.(*intentWatch)",
	"pkg/toolcatalog/internal/index.(*Catalog).gradedTool",
}

// The grading is linked where it is used (the manager grades each version
// it publishes) and nowhere else: the gateway and the plugin search
// catalogs with pkg/toolcatalog and never grade, so they link none of it.
func TestOnlyWhatGradesLinksTheGrading(t *testing.T) {
	dir := t.TempDir()
	for cmd, grades := range map[string]bool{"manager": true, "toolcatalog-gateway": false, "kubectl-toolcatalog": false} {
		t.Run(cmd, func(t *testing.T) {
			bin := filepath.Join(dir, cmd)
			if out, err := exec.Command("go", "build", "-tags", "grpcnotrace", "-o", bin, module+"/cmd/"+cmd).CombinedOutput(); err != nil {
				t.Fatalf("go build: %v\n%s", err, out)
			}
			out, err := exec.Command("go", "tool", "nm", bin).CombinedOutput()
			if err != nil {
				t.Fatalf("go tool nm: %v\n%s", err, out)
			}
			var linked []string
			for _, sym := range grading {
				if strings.Contains(string(out), sym) {
					linked = append(linked, sym)
				}
			}
			switch {
			case grades && len(linked) == 0:
				t.Errorf("%s links none of the grading (%s): has it moved?", cmd, strings.Join(grading, ", "))
			case !grades && len(linked) > 0:
				t.Errorf("%s links the grading (%s): only package selfgrade may refer to it", cmd, strings.Join(linked, ", "))
			}
		})
	}
}
