package check

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/toolcatalog/tool-catalog-operator/config/crd"
)

// Exit codes of the command.
const (
	ExitClean  = 0
	ExitFailed = 1
	ExitMisuse = 2
)

// MisuseError is a command used wrongly, or an input of which nothing
// could be read: exit code 2.
type MisuseError struct{ Err error }

func (e *MisuseError) Error() string { return e.Err.Error() }
func (e *MisuseError) Unwrap() error { return e.Err }

// FailedError is a check that found what its --fail-on fails on: exit
// code 1. The report says what.
type FailedError struct{ Worst, FailOn Severity }

func (e *FailedError) Error() string {
	return fmt.Sprintf("findings at %s or above (--fail-on %s)", e.Worst, e.FailOn)
}

// ExitCode is the exit code of the command's error.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return ExitClean
	case errors.As(err, new(*FailedError)):
		return ExitFailed
	}
	return ExitMisuse
}

// NewCommand is the check as a command: cmd/toolcatalog-check's, and
// kubectl toolcatalog check's.
func NewCommand(name string, stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var (
		files                []string
		output, failOn, conf string
		colour               string
		base, baseDir        string
		namespace            string
		grade, listRules     bool
		lim                  Limits
	)
	cmd := &cobra.Command{
		Use:   name + " [-f FILE|DIR|-]... [FILE|DIR]...",
		Short: "Check ToolDefinition, ToolCatalog and ToolSource manifests offline, as the cluster would",
		Long: `Check reads ToolDefinition, ToolCatalog and ToolSource manifests (multi-document
YAML or JSON, directories recursively, "-" for kustomize build or helm template
output on stdin) and reports what the cluster would refuse (the CRDs' schemas
and CEL rules, the operator's own checks, word for word), what the lint rules
find, the operator's grading of each catalog with the builtin model, and with
--base what the change costs. No cluster, no kubeconfig, no network.

Exit codes: 0 clean, 1 a finding at or above --fail-on, 2 misuse or nothing read.
Rules, configuration and CI examples: docs/ci.md.`,
		Args:          cobra.ArbitraryArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if listRules {
				return writeRules(stdout)
			}
			paths := append(slices.Clone(files), args...)
			if len(paths) == 0 {
				return &MisuseError{errors.New("nothing to check: give files or directories, or -f - for standard input")}
			}
			if base != "" && baseDir != "" {
				return &MisuseError{errors.New("--base and --base-dir cannot be given together")}
			}
			if !slices.Contains(Formats, output) {
				return &MisuseError{fmt.Errorf("-o %s: use one of %s", output, strings.Join(Formats, ", "))}
			}
			cfg, err := LoadConfig(conf, !cmd.Flags().Changed("config"))
			if err != nil {
				return &MisuseError{err}
			}
			if namespace != "" {
				cfg.Namespace = namespace
			}
			if failOn != "" {
				cfg.FailOn = failOn
			}
			if compileErr := cfg.Compile(); compileErr != nil {
				return &MisuseError{compileErr}
			}
			schemas, err := LoadSchemas(crd.Bases)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			opts := Options{Config: cfg, Grade: grade}
			// The base is read on another core while the input is.
			type read struct {
				in    *Input
				label string
				err   error
			}
			based := make(chan read, 1)
			if base != "" || baseDir != "" {
				go func() {
					in, label, err := readBase(ctx, base, baseDir, paths, lim)
					based <- read{in, label, err}
				}()
			} else {
				based <- read{}
			}
			in := Read(paths, stdin, lim)
			b := <-based
			if b.err != nil {
				return &MisuseError{b.err}
			}
			opts.Base, opts.BaseLabel = b.in, b.label
			if len(in.Objects) == 0 {
				for _, f := range in.Findings {
					fmt.Fprintf(stderr, "%s: %s\n", location(f), f.Message)
				}
				return &MisuseError{fmt.Errorf("no object could be read from %s", strings.Join(paths, ", "))}
			}
			report := Run(ctx, in, schemas, opts)
			fail := cfg.FailSeverity()
			if err := Write(stdout, output, report, fail, output == "text" && useColour(colour, stdout)); err != nil {
				return err
			}
			if worst := report.Worst(); worst >= fail {
				return &FailedError{Worst: worst, FailOn: fail}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&files, "filename", "f", nil, "a file or directory to check (recursively), or - for standard input; repeatable")
	f.StringVarP(&output, "output", "o", "text", "output format: "+strings.Join(Formats, ", "))
	f.StringVar(&failOn, "fail-on", "", "the least severity that fails the check: error (default), warning or info")
	f.StringVar(&conf, "config", ConfigFile, "the rule configuration")
	f.StringVar(&colour, "color", "auto", "colour the text output: auto, always or never")
	f.StringVar(&base, "base", "", "a git ref of this repository to compare with: what the change costs")
	f.StringVar(&baseDir, "base-dir", "", "a directory holding the base version of the paths given (relative to the working directory)")
	f.StringVarP(&namespace, "namespace", "n", "", `the namespace of objects that name none ("default" unless configured)`)
	f.BoolVar(&grade, "grade", true, "grade each catalog with the builtin model, as the operator does")
	f.BoolVar(&listRules, "list-rules", false, "list the rules and exit")
	f.Int64Var(&lim.FileBytes, "max-file-size", DefaultFileBytes, "the largest file read, in bytes")
	f.IntVar(&lim.Objects, "max-objects", DefaultObjects, "the most objects read")
	return cmd
}

// readBase reads the base of a change: a git ref or a directory.
func readBase(ctx context.Context, ref, dir string, paths []string, lim Limits) (*Input, string, error) {
	var mapped []string
	var err error
	label := dir
	if ref != "" {
		var cleanup func()
		if mapped, cleanup, err = GitBase(ctx, ref, paths, lim); err != nil {
			return nil, "", err
		}
		defer cleanup()
		label = ref
	} else if mapped, err = BaseDir(dir, paths); err != nil {
		return nil, "", err
	}
	var present []string
	for _, p := range mapped {
		if _, err := os.Stat(p); err == nil {
			present = append(present, p)
		}
	}
	return Read(present, nil, lim), label, nil
}

func useColour(mode string, w io.Writer) bool {
	switch mode {
	case "always":
		return true
	case "never":
		return false
	}
	f, ok := w.(*os.File)
	return ok && os.Getenv("NO_COLOR") == "" && term.IsTerminal(int(f.Fd()))
}

func writeRules(w io.Writer) error {
	for _, r := range Rules {
		cluster := ""
		if r.Cluster {
			cluster = " (the cluster refuses it: cannot be changed or silenced)"
		}
		if _, err := fmt.Fprintf(w, "%s %-32s %-7s %s%s\n    fix: %s\n", r.ID, r.Name, r.Severity, r.Why, cluster, r.Fix); err != nil {
			return err
		}
	}
	return nil
}
