// Package hack holds the scripts and tools that build, run and release the
// project; its test lints the GitHub workflows of .github/workflows, and
// the one docs/ci.md gives users, with actionlint, built from
// hack/tools/go.mod.
package hack

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/internal/testing/testenv"
)

func TestWorkflowsLint(t *testing.T) {
	actionlint := testenv.Tool(t, "..", "github.com/rhysd/actionlint/cmd/actionlint")
	files, err := filepath.Glob(filepath.Join("..", ".github", "workflows", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no workflows in .github/workflows: %v", err)
	}
	// The workflow docs/ci.md gives users for their tool repositories.
	files = append(files, filepath.Join("..", "docs", "ci", "github-workflow.yaml"))
	lint := func(files ...string) ([]byte, error) {
		return exec.Command(actionlint, append([]string{"-no-color", "-shellcheck=", "-pyflakes="}, files...)...).CombinedOutput()
	}
	if out, err := lint(files...); err != nil {
		t.Fatalf("actionlint: %v\n%s", err, out)
	}
	// A workflow with a job that needs one that does not exist is
	// refused: the lint above could have failed.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("on: push\njobs:\n  a:\n    needs: nope\n    runs-on: ubuntu-latest\n    steps:\n    - run: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := lint(bad); err == nil || !strings.Contains(string(out), "nope") {
		t.Errorf("actionlint passed a broken workflow: %v\n%s", err, out)
	}
}
