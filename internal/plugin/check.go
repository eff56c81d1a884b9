package plugin

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/spf13/cobra"
)

// CheckBinary is the offline check the check command runs: a binary of
// its own, since the API server's validation libraries and the grading it
// links would more than double the plugin's size.
const CheckBinary = "toolcatalog-check"

// ExitError is a command that ran and exited with Code, having said why.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// checkCommand runs toolcatalog-check, installed beside the plugin or on
// PATH, with the arguments as given: `kubectl toolcatalog check -f tools/`.
func (o *Options) checkCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "check [-f FILE|DIR|-]... [flags]",
		Short: "Check tool manifests offline, as the cluster would (runs " + CheckBinary + ")",
		Long: `check runs ` + CheckBinary + `, installed beside the plugin or on PATH, with the
arguments given: the CRDs' schemas and CEL rules, the operator's own checks,
lint rules, the grading with the builtin model and, with --base, what a change
costs; no cluster needed. See ` + CheckBinary + ` --help and docs/ci.md.`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			bin, err := findCheck()
			if err != nil {
				return err
			}
			c := exec.CommandContext(cmd.Context(), bin, args...)
			c.Stdin, c.Stdout, c.Stderr = cmd.InOrStdin(), o.Out, o.Err
			err = c.Run()
			if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
				return &ExitError{Code: exit.ExitCode()}
			}
			return err
		},
	}
}

// findCheck finds toolcatalog-check beside the plugin, then on PATH.
func findCheck() (string, error) {
	if self, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(self), CheckBinary)
		if st, err := os.Stat(beside); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return beside, nil
		}
	}
	if bin, err := exec.LookPath(CheckBinary); err == nil {
		return bin, nil
	}
	return "", fmt.Errorf("%s is not installed beside the plugin or on PATH: install it with go install github.com/toolcatalog/tool-catalog-operator/cmd/%s@latest, or take it from a release", CheckBinary, CheckBinary)
}
