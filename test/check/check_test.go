// Package check_test runs the built toolcatalog-check binary on fixture
// repositories, as a CI job would, and asserts what it says and its exit
// code.
package check_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// binary is the toolcatalog-check built for the tests, and plugin the
// kubectl plugin beside it.
var binary, plugin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "toolcatalog-check-bin-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "toolcatalog-check")
	plugin = filepath.Join(dir, "kubectl-toolcatalog")
	for bin, pkg := range map[string]string{binary: "toolcatalog-check", plugin: "kubectl-toolcatalog"} {
		build := exec.Command("go", "build", "-o", bin, "github.com/toolcatalog/tool-catalog-operator/cmd/"+pkg)
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			panic(fmt.Sprintf("building %s: %v", pkg, err))
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is one run of the binary.
type result struct {
	stdout, stderr string
	code           int
}

// run runs the binary in dir (the test's package directory when empty).
func run(t *testing.T, dir, stdin string, args ...string) result {
	t.Helper()
	return runBinary(t, binary, dir, stdin, args...)
}

func runBinary(t *testing.T, bin, dir, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	return capture(t, cmd)
}

// capture runs a command and keeps what it wrote and its exit code.
func capture(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errOut.String()}
	if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
		r.code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("running %v: %v", cmd.Args, err)
	}
	return r
}

// jsonOutput is the JSON output, as docs/ci.md documents it.
type jsonOutput struct {
	SchemaVersion string `json:"schemaVersion"`
	Passed        bool   `json:"passed"`
	Counts        struct {
		ToolDefinitions, ToolCatalogs, Errors, Warnings, Info int
	} `json:"counts"`
	Findings []struct {
		Rule, Severity, Message, File, Object, Tool, Suppressed string
		Line, Column                                            int
	} `json:"findings"`
	Catalogs []struct {
		Catalog       string
		SelfRecallAt5 float64
		GradedTools   int
		Confusable    []struct{ A, B string }
	} `json:"catalogs"`
	Change *struct {
		Base     string
		Catalogs []struct {
			Catalog                               string
			Added, Removed, Changed               []string
			QueriesToGenerate, TextsToEmbed       int
			GenerationRequests, EmbeddingRequests int
			ConfusableAdded, ConfusableRemoved    []struct{ A, B string }
		}
	} `json:"change"`
}

func decodeJSON(t *testing.T, r result) jsonOutput {
	t.Helper()
	var out jsonOutput
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("the JSON output does not parse: %v\n%s\n%s", err, r.stdout, r.stderr)
	}
	if out.SchemaVersion != "toolcatalog.dev/check/v1" {
		t.Errorf("schemaVersion %q", out.SchemaVersion)
	}
	return out
}

// ruleLines lists each finding as "RULE:LINE", in order.
func ruleLines(out jsonOutput) []string {
	var got []string
	for _, f := range out.Findings {
		got = append(got, fmt.Sprintf("%s:%d", f.Rule, f.Line))
	}
	return got
}

func TestValidRepositoryPasses(t *testing.T) {
	r := run(t, "", "", "-o", "json", "testdata/valid")
	if r.code != 0 {
		t.Fatalf("exit %d, want 0:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	out := decodeJSON(t, r)
	if !out.Passed || out.Counts.ToolDefinitions != 3 || out.Counts.ToolCatalogs != 1 || out.Counts.Errors+out.Counts.Warnings != 0 {
		t.Errorf("output %+v, want 3 tools and 1 catalog passing clean", out)
	}
	if len(out.Catalogs) != 1 || out.Catalogs[0].GradedTools != 3 || out.Catalogs[0].SelfRecallAt5 <= 0.5 {
		t.Errorf("catalogs %+v, want the 3 tools graded, found by their own queries", out.Catalogs)
	}

	// The same manifests from standard input, as kustomize build | would
	// give them.
	var all strings.Builder
	for _, f := range []string{"testdata/valid/catalog.yaml", "testdata/valid/tools.yaml"} {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all.WriteString("---\n")
		all.Write(raw)
	}
	if r := run(t, "", all.String(), "-f", "-"); r.code != 0 || !strings.Contains(r.stdout, "checked 3 ToolDefinitions, 1 ToolCatalogs") {
		t.Errorf("stdin: exit %d:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// What the cluster refuses fails the check, each finding at the line of
// the field at fault, in every output format.
func TestInvalidRepositoryFailsAtTheLines(t *testing.T) {
	r := run(t, "", "", "-o", "json", "testdata/invalid")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	out := decodeJSON(t, r)
	want := []string{"TC003:22", "TC003:24", "TC003:32", "TC004:46", "TC006:59", "TC004:73", "TC005:85", "TC005:96"}
	if got := ruleLines(out); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("findings %v, want %v:\n%s", got, want, r.stdout)
	}

	sarif := run(t, "", "", "-o", "sarif", "testdata/invalid")
	if sarif.code != 1 {
		t.Fatalf("sarif: exit %d", sarif.code)
	}
	validateSARIF(t, sarif.stdout)
	var log struct {
		Runs []struct {
			Results []struct {
				RuleID    string `json:"ruleId"`
				Level     string `json:"level"`
				Locations []struct {
					PhysicalLocation struct {
						ArtifactLocation struct{ URI string } `json:"artifactLocation"`
						Region           struct{ StartLine, StartColumn int }
					} `json:"physicalLocation"`
				} `json:"locations"`
			} `json:"results"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(sarif.stdout), &log); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, res := range log.Runs[0].Results {
		loc := res.Locations[0].PhysicalLocation
		if loc.ArtifactLocation.URI != "testdata/invalid/tools.yaml" || res.Level != "error" {
			t.Errorf("result %+v", res)
		}
		got = append(got, fmt.Sprintf("%s:%d", res.RuleID, loc.Region.StartLine))
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("SARIF results %v, want %v", got, want)
	}

	gh := run(t, "", "", "-o", "github", "testdata/invalid")
	lines := strings.Split(strings.TrimSpace(gh.stdout), "\n")
	if gh.code != 1 || len(lines) != len(want) {
		t.Fatalf("github: exit %d, %d lines, want 1 and %d:\n%s", gh.code, len(lines), len(want), gh.stdout)
	}
	annotation := regexp.MustCompile(`^::error file=testdata/invalid/tools\.yaml,line=(\d+),col=\d+,title=(TC\d+) [a-z-]+::\S`)
	for i, line := range lines {
		m := annotation.FindStringSubmatch(line)
		if m == nil || m[2]+":"+m[1] != want[i] {
			t.Errorf("annotation %q, want %s", line, want[i])
		}
	}

	junit := run(t, "", "", "-o", "junit", "testdata/invalid")
	var suites struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
	}
	if err := xml.Unmarshal([]byte(junit.stdout), &suites); err != nil || suites.Failures != len(want) {
		t.Errorf("junit: %v, %+v, want %d failures:\n%s", err, suites, len(want), junit.stdout)
	}
}

// validateSARIF validates a log against the SARIF 2.1.0 JSON schema (the
// copy in gosec's module, which the lint tools module requires).
func validateSARIF(t *testing.T, log string) {
	t.Helper()
	list := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/securego/gosec/v2")
	list.Dir = "../../hack/tools/lint"
	dir, err := list.Output()
	if err != nil || strings.TrimSpace(string(dir)) == "" {
		download := exec.Command("go", "mod", "download", "github.com/securego/gosec/v2")
		download.Dir = list.Dir
		if out, downloadErr := download.CombinedOutput(); downloadErr != nil {
			t.Fatalf("the SARIF schema comes with github.com/securego/gosec/v2 (hack/tools/lint): go mod download: %v: %s", downloadErr, out)
		}
		if dir, err = list.Output(); err != nil {
			t.Fatal(err)
		}
	}
	schemaFile := filepath.Join(strings.TrimSpace(string(dir)), "report", "sarif", "testdata", "sarif-schema-2.1.0.json")
	c := jsonschema.NewCompiler()
	schema, err := c.Compile(schemaFile)
	if err != nil {
		t.Fatalf("compiling the SARIF schema: %v", err)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(doc); err != nil {
		t.Errorf("the SARIF output is not SARIF 2.1.0: %v", err)
	}
}

// Confusable tools and names alike are warnings: the check passes by
// default and fails with --fail-on warning.
func TestConfusableToolsAreFoundByTheGrading(t *testing.T) {
	r := run(t, "", "", "-o", "json", "testdata/confusable")
	if r.code != 0 {
		t.Fatalf("exit %d, want 0 (warnings only):\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	out := decodeJSON(t, r)
	rules := map[string]int{}
	for _, f := range out.Findings {
		rules[f.Rule]++
	}
	if rules["TC201"] < 2 || rules["TC108"] != 2 {
		t.Errorf("findings %v, want a confusable pair (TC201 on both tools) and names alike (TC108 on both)", ruleLines(out))
	}
	if len(out.Catalogs) != 1 || len(out.Catalogs[0].Confusable) == 0 {
		t.Errorf("catalogs %+v, want the confusable pair", out.Catalogs)
	}
	if r := run(t, "", "", "--fail-on", "warning", "testdata/confusable"); r.code != 1 {
		t.Errorf("--fail-on warning: exit %d, want 1", r.code)
	}
	// A configuration turns a rule off.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ".toolcatalog-check.yaml"), []byte("failOn: warning\nrules:\n  TC201: off\n  TC108: info\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("testdata/confusable")
	if r := run(t, dir, "", abs); r.code != 0 || strings.Contains(r.stdout, "TC201") || !strings.Contains(r.stdout, "info TC108") {
		t.Errorf("configured: exit %d, want 0 without TC201 and with TC108 as info:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// Nor can a configuration turn down what the cluster refuses.
	if err := os.WriteFile(filepath.Join(dir, ".toolcatalog-check.yaml"), []byte("rules:\n  TC003: warning\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run(t, dir, "", abs); r.code != 2 || !strings.Contains(r.stderr, "cannot be changed") {
		t.Errorf("TC003 turned down: exit %d, want 2:\n%s", r.code, r.stderr)
	}
}

// A description that steers the model is an error; an annotation
// silences a rule for one tool only with a reason.
func TestPoisonedDescriptionFails(t *testing.T) {
	r := run(t, "", "", "-o", "json", "testdata/poisoned")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", r.code, r.stdout)
	}
	out := decodeJSON(t, r)
	got := map[string]string{}
	for _, f := range out.Findings {
		got[f.Rule] = f.Suppressed
	}
	if _, ok := got["TC107"]; !ok {
		t.Errorf("findings %v, want TC107 for the poisoned description", ruleLines(out))
	}
	if got["TC102"] == "" {
		t.Errorf("TC102 not suppressed by the annotation with a reason: %v", out.Findings)
	}
	if _, ok := got["TC007"]; !ok || got["TC104"] != "" {
		t.Errorf("an ignore without a reason must not silence TC104 and must be reported (TC007): %+v", out.Findings)
	}
}

// Misuse and input of which nothing can be read exit 2.
func TestMisuseExitsTwo(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "blob.yaml"), []byte{0x7f, 'E', 'L', 'F', 0, 1, 2}, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{},
		{"-o", "xml", "testdata/valid"},
		{"--fail-on", "fatal", "testdata/valid"},
		{"--base", "main", "--base-dir", "x", "testdata/valid"},
		// A ref that git would read as an option (--upload-pack runs a
		// command) is refused before git sees it.
		{"--base=--upload-pack=touch pwned", "testdata/valid"},
		{dir},
		{filepath.Join(dir, "absent")},
	} {
		if r := run(t, "", "", args...); r.code != 2 || r.stderr == "" {
			t.Errorf("%v: exit %d, want 2 with a message:\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	if r := run(t, "", "", dir); !strings.Contains(r.stderr, "binary data") {
		t.Errorf("the binary file is not named: %s", r.stderr)
	}
}

// --base reports what the change costs: the tools added, changed and
// removed, the provider work, and the confusable pairs introduced.
func TestBaseReportsWhatTheChangeCosts(t *testing.T) {
	repo := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=ci", "-c", "user.email=ci@example.com"}, args...)...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	copyFile := func(from, to string) {
		raw, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(repo, to)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, to), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q", "-b", "main")
	copyFile("testdata/valid/catalog.yaml", "tools/catalog.yaml")
	copyFile("testdata/valid/tools.yaml", "tools/tools.yaml")
	git("add", ".")
	git("commit", "-q", "-m", "base")

	// The change: one description edited, one tool removed, two added
	// that search cannot tell apart.
	tools, _ := os.ReadFile(filepath.Join(repo, "tools/tools.yaml"))
	edited := strings.Replace(string(tools), "Use when the user names a ticket.", "Use when the user names a ticket or pastes its link.", 1)
	if edited == string(tools) {
		t.Fatal("the fixture changed: no description to edit")
	}
	edited = edited[:strings.Index(edited, "apiVersion: toolcatalog.dev/v1alpha1\nkind: ToolDefinition\nmetadata:\n  name: check-shipping")] +
		edited[strings.Index(edited, "apiVersion: v1\nkind: ConfigMap"):]
	if err := os.WriteFile(filepath.Join(repo, "tools/tools.yaml"), []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	confusable, _ := os.ReadFile("testdata/confusable/tools.yaml")
	docs := strings.Split(string(confusable), "---\n")
	if err := os.WriteFile(filepath.Join(repo, "tools/customers.yaml"), []byte(strings.Join(docs[1:3], "---\n")), 0o644); err != nil {
		t.Fatal(err)
	}

	r := run(t, repo, "", "-o", "json", "--base", "main", "tools")
	if r.code != 0 {
		t.Fatalf("exit %d, want 0:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	out := decodeJSON(t, r)
	if out.Change == nil || len(out.Change.Catalogs) != 1 {
		t.Fatalf("change %+v, want one catalog's", out.Change)
	}
	cc := out.Change.Catalogs[0]
	if strings.Join(cc.Changed, ",") != "get_ticket" || strings.Join(cc.Added, ",") != "find_customer,lookup_customer" || strings.Join(cc.Removed, ",") != "check_shipping" {
		t.Errorf("change %+v, want get_ticket changed, find_customer and lookup_customer added, check_shipping removed", cc)
	}
	// Builtin providers: 5 queries a tool, one of them an example for
	// get_ticket.
	if cc.QueriesToGenerate != 4+5+5 || cc.TextsToEmbed != 15 || cc.GenerationRequests != 0 {
		t.Errorf("cost %+v, want 14 queries to generate, 15 texts to embed, no provider requests", cc)
	}
	if out.Change.Base != "main" {
		t.Errorf("base %q", out.Change.Base)
	}
	// The version after the change is graded from the base's, as the
	// operator grades a new version: what it finds is what a grading of
	// the version alone finds.
	alone := decodeJSON(t, run(t, repo, "", "-o", "json", "tools"))
	if len(out.Catalogs) != 1 || len(alone.Catalogs) != 1 || out.Catalogs[0].GradedTools != alone.Catalogs[0].GradedTools ||
		fmt.Sprint(out.Catalogs[0].Confusable) != fmt.Sprint(alone.Catalogs[0].Confusable) {
		t.Errorf("graded from the base %+v, alone %+v", out.Catalogs, alone.Catalogs)
	}
	// The same from a checkout of the base, and from a subdirectory.
	base := t.TempDir()
	for _, f := range []string{"catalog.yaml", "tools.yaml"} {
		raw, _ := os.ReadFile(filepath.Join("testdata/valid", f))
		if err := os.WriteFile(filepath.Join(base, f), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r2 := run(t, filepath.Join(repo, "tools"), "", "-o", "json", "--base-dir", base, ".")
	out2 := decodeJSON(t, r2)
	if out2.Change == nil || strings.Join(out2.Change.Catalogs[0].Changed, ",") != "get_ticket" {
		t.Errorf("--base-dir: %+v\n%s", out2.Change, r2.stderr)
	}
	r3 := run(t, filepath.Join(repo, "tools"), "", "-o", "json", "--base", "HEAD", ".")
	out3 := decodeJSON(t, r3)
	if out3.Change == nil || len(out3.Change.Catalogs[0].Added) != 2 {
		t.Errorf("--base from a subdirectory: %+v\n%s", out3.Change, r3.stderr)
	}
	if r := run(t, repo, "", "--base", "no-such-ref", "tools"); r.code != 2 {
		t.Errorf("an unknown ref: exit %d, want 2", r.code)
	}
}

// kubectl toolcatalog check runs the toolcatalog-check installed beside
// the plugin, with the arguments and exit code as they are; without one
// it says how to install it.
func TestPluginRunsTheCheckBesideIt(t *testing.T) {
	r := runBinary(t, plugin, "", "", "check", "-o", "github", "-n", "support", "testdata/invalid")
	if r.code != 1 || !strings.Contains(r.stdout, "::error file=testdata/invalid/tools.yaml,line=22") || r.stderr == "" {
		t.Errorf("kubectl toolcatalog check: exit %d, want 1 with the annotations:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := runBinary(t, plugin, "", "", "check", "testdata/valid"); r.code != 0 {
		t.Errorf("kubectl toolcatalog check of a valid repository: exit %d:\n%s", r.code, r.stderr)
	}
	alone := filepath.Join(t.TempDir(), "kubectl-toolcatalog")
	raw, err := os.ReadFile(plugin)
	if err != nil {
		t.Fatal(err)
	}
	if writeErr := os.WriteFile(alone, raw, 0o755); writeErr != nil {
		t.Fatal(writeErr)
	}
	cmd := exec.Command(alone, "check", "testdata/valid")
	cmd.Env = append(os.Environ(), "PATH=/nonexistent")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "go install github.com/toolcatalog/tool-catalog-operator/cmd/toolcatalog-check") {
		t.Errorf("without toolcatalog-check: %v\n%s", err, out)
	}
}

// What cannot be read is an error at its file and line, and the rest is
// still checked.
func TestUnreadableInputIsReportedAndTheRestChecked(t *testing.T) {
	r := run(t, "", "", "-o", "json", "testdata/unreadable")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	out := decodeJSON(t, r)
	got := map[string]string{}
	for _, f := range out.Findings {
		got[fmt.Sprintf("%s %s:%d", f.Rule, filepath.Base(f.File), f.Line)] = f.Message
	}
	for where, says := range map[string]string{
		"TC001 blob.yaml:2":   "binary data",
		"TC001 tools.yaml:16": "not valid YAML",
		"TC002 tools.yaml:18": `ToolDefinition is not served in version "v2" of group "toolcatalog.dev": use toolcatalog.dev/v1alpha1`,
	} {
		if !strings.Contains(got[where], says) {
			t.Errorf("%s: %q, want %q; all: %v", where, got[where], says, got)
		}
	}
	if out.Counts.ToolDefinitions != 1 {
		t.Errorf("checked %d ToolDefinitions, want the readable one", out.Counts.ToolDefinitions)
	}
}
