package check

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// Formats are the output formats Write knows.
var Formats = []string{"text", "json", "sarif", "github", "junit"}

// SchemaVersion names the version of the JSON output's schema
// (docs/ci.md): fields are only ever added within a version.
const SchemaVersion = "toolcatalog.dev/check/v1"

// Write writes the report in a format; colour applies to text.
func Write(w io.Writer, format string, r *Report, failOn Severity, colour bool) error {
	switch format {
	case "", "text":
		return writeText(w, r, failOn, colour)
	case "json":
		return writeJSON(w, r, failOn)
	case "sarif":
		return writeSARIF(w, r)
	case "github":
		return writeGitHub(w, r)
	case "junit":
		return writeJUnit(w, r)
	}
	return fmt.Errorf("unknown output format %q: use %s", format, strings.Join(Formats, ", "))
}

func location(f Finding) string {
	switch {
	case f.File == "":
		return ""
	case f.Line == 0:
		return f.File
	}
	return fmt.Sprintf("%s:%d:%d", f.File, f.Line, f.Column)
}

func writeText(w io.Writer, r *Report, failOn Severity, colour bool) error {
	paint := func(s Severity, text string) string {
		if !colour {
			return text
		}
		code := map[Severity]string{Error: "31", Warning: "33", Info: "36"}[s]
		return "\x1b[" + code + "m" + text + "\x1b[0m"
	}
	for _, f := range r.Findings {
		if f.Suppressed != "" {
			continue
		}
		where := location(f)
		if where != "" {
			where += ": "
		}
		fmt.Fprintf(w, "%s%s %s: %s\n", where, paint(f.Severity, f.Severity.String()), f.Rule, f.Message)
	}
	for _, g := range r.Catalogs {
		fmt.Fprintf(w, "%s: self-recall@5 %.3f (%d queries of %d tools, %s), %d confusable pairs, %d tools outranked\n",
			g.Catalog, g.SelfRecallAt5, g.GradedQueries, g.GradedTools, g.Model, len(g.Confusable), len(g.Outranked))
	}
	if ch := r.Change; ch != nil {
		writeChangeText(w, ch)
	}
	suppressed := len(r.Findings) - r.Count(Error) - r.Count(Warning) - r.Count(Info)
	verdict := "passed"
	if r.Worst() >= failOn {
		verdict = "failed"
	}
	_, err := fmt.Fprintf(w, "checked %d ToolDefinitions, %d ToolCatalogs, %d ToolSources: %d errors, %d warnings, %d info, %d suppressed; %s (fails on %s)\n",
		r.ToolDefinitions, r.ToolCatalogs, r.ToolSources, r.Count(Error), r.Count(Warning), r.Count(Info), suppressed, verdict, failOn)
	return err
}

// jsonReport is the JSON output (SchemaVersion).
type jsonReport struct {
	SchemaVersion string         `json:"schemaVersion"`
	Passed        bool           `json:"passed"`
	FailOn        string         `json:"failOn"`
	Counts        jsonCounts     `json:"counts"`
	Findings      []jsonFinding  `json:"findings"`
	Catalogs      []CatalogGrade `json:"catalogs,omitempty"`
	Change        *Change        `json:"change,omitempty"`
}

type jsonCounts struct {
	ToolDefinitions int `json:"toolDefinitions"`
	ToolCatalogs    int `json:"toolCatalogs"`
	ToolSources     int `json:"toolSources"`
	Errors          int `json:"errors"`
	Warnings        int `json:"warnings"`
	Info            int `json:"info"`
}

type jsonFinding struct {
	Finding
	Severity string `json:"severity"`
	RuleName string `json:"ruleName"`
}

func writeJSON(w io.Writer, r *Report, failOn Severity) error {
	out := jsonReport{
		SchemaVersion: SchemaVersion, Passed: r.Worst() < failOn, FailOn: failOn.String(),
		Counts:   jsonCounts{r.ToolDefinitions, r.ToolCatalogs, r.ToolSources, r.Count(Error), r.Count(Warning), r.Count(Info)},
		Findings: make([]jsonFinding, 0, len(r.Findings)), Catalogs: r.Catalogs, Change: r.Change,
	}
	for _, f := range r.Findings {
		out.Findings = append(out.Findings, jsonFinding{Finding: f, Severity: f.Severity.String(), RuleName: mustRule(f.Rule).Name})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// SARIF 2.1.0, the parts code scanning reads.
type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool    sarifTool     `json:"tool"`
	Results []sarifResult `json:"results"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	InformationURI string      `json:"informationUri"`
	Rules          []sarifRule `json:"rules"`
}

type sarifRule struct {
	ID                   string       `json:"id"`
	Name                 string       `json:"name"`
	ShortDescription     sarifMessage `json:"shortDescription"`
	FullDescription      sarifMessage `json:"fullDescription"`
	Help                 sarifMessage `json:"help"`
	DefaultConfiguration sarifConfig  `json:"defaultConfiguration"`
}

type sarifConfig struct {
	Level string `json:"level"`
}

type sarifMessage struct {
	Text string `json:"text"`
}

type sarifResult struct {
	RuleID       string              `json:"ruleId"`
	RuleIndex    int                 `json:"ruleIndex"`
	Level        string              `json:"level"`
	Message      sarifMessage        `json:"message"`
	Locations    []sarifLocation     `json:"locations,omitempty"`
	Suppressions []sarifSuppressions `json:"suppressions,omitempty"`
}

type sarifSuppressions struct {
	Kind          string `json:"kind"`
	Justification string `json:"justification"`
}

type sarifLocation struct {
	PhysicalLocation sarifPhysical `json:"physicalLocation"`
}

type sarifPhysical struct {
	ArtifactLocation sarifArtifact `json:"artifactLocation"`
	Region           *sarifRegion  `json:"region,omitempty"`
}

type sarifArtifact struct {
	URI string `json:"uri"`
}

type sarifRegion struct {
	StartLine   int `json:"startLine"`
	StartColumn int `json:"startColumn,omitempty"`
}

func sarifLevel(s Severity) string {
	switch s {
	case Error:
		return "error"
	case Warning:
		return "warning"
	}
	return "note"
}

func writeSARIF(w io.Writer, r *Report) error {
	driver := sarifDriver{Name: "toolcatalog-check", InformationURI: "https://github.com/toolcatalog/tool-catalog-operator/blob/main/docs/ci.md"}
	index := map[string]int{}
	for i, rule := range Rules {
		index[rule.ID] = i
		driver.Rules = append(driver.Rules, sarifRule{
			ID: rule.ID, Name: rule.Name, ShortDescription: sarifMessage{rule.Name}, FullDescription: sarifMessage{rule.Why},
			Help: sarifMessage{rule.Fix}, DefaultConfiguration: sarifConfig{sarifLevel(rule.Severity)},
		})
	}
	run := sarifRun{Tool: sarifTool{driver}, Results: []sarifResult{}}
	for _, f := range r.Findings {
		res := sarifResult{RuleID: f.Rule, RuleIndex: index[f.Rule], Level: sarifLevel(f.Severity), Message: sarifMessage{f.Message}}
		if f.File != "" && f.File != Stdin {
			loc := sarifLocation{PhysicalLocation: sarifPhysical{ArtifactLocation: sarifArtifact{URI: filepath.ToSlash(f.File)}}}
			if f.Line > 0 {
				loc.PhysicalLocation.Region = &sarifRegion{StartLine: f.Line, StartColumn: f.Column}
			}
			res.Locations = []sarifLocation{loc}
		}
		if f.Suppressed != "" {
			res.Suppressions = []sarifSuppressions{{Kind: "inSource", Justification: f.Suppressed}}
		}
		run.Results = append(run.Results, res)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(sarifLog{Schema: "https://json.schemastore.org/sarif-2.1.0.json", Version: "2.1.0", Runs: []sarifRun{run}})
}

// writeGitHub writes GitHub Actions workflow commands, which annotate the
// lines of the pull request.
func writeGitHub(w io.Writer, r *Report) error {
	for _, f := range r.Findings {
		if f.Suppressed != "" {
			continue
		}
		command := map[Severity]string{Error: "error", Warning: "warning", Info: "notice"}[f.Severity]
		var props []string
		if f.File != "" && f.File != Stdin {
			props = append(props, "file="+githubProperty(filepath.ToSlash(f.File)))
			if f.Line > 0 {
				props = append(props, fmt.Sprintf("line=%d", f.Line), fmt.Sprintf("col=%d", f.Column))
			}
		}
		props = append(props, "title="+githubProperty(f.Rule+" "+mustRule(f.Rule).Name))
		if _, err := fmt.Fprintf(w, "::%s %s::%s\n", command, strings.Join(props, ","), githubData(f.Message)); err != nil {
			return err
		}
	}
	return nil
}

// githubData escapes a workflow command's message.
func githubData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

// githubProperty escapes a workflow command's property value.
func githubProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

// writeJUnit writes a test suite per file, a test case per finding of an
// error or warning (failures) and per info (passed).
func writeJUnit(w io.Writer, r *Report) error {
	suites := junitSuites{Name: "toolcatalog-check"}
	byFile := map[string]*junitSuite{}
	var order []string
	for _, f := range r.Findings {
		file := f.File
		if file == "" {
			file = "(input)"
		}
		s := byFile[file]
		if s == nil {
			s = &junitSuite{Name: file}
			byFile[file] = s
			order = append(order, file)
		}
		c := junitCase{Name: fmt.Sprintf("%s %s %s", f.Rule, mustRule(f.Rule).Name, f.Object), Classname: file}
		switch {
		case f.Suppressed != "":
			c.Skipped = &junitSkipped{Message: "suppressed: " + f.Suppressed}
		case f.Severity >= Warning:
			c.Failure = &junitFailure{Message: f.Message, Type: f.Severity.String(), Text: fmt.Sprintf("%s: %s", location(f), f.Message)}
			s.Failures++
			suites.Failures++
		}
		s.Tests++
		suites.Tests++
		s.Cases = append(s.Cases, c)
	}
	for _, file := range order {
		suites.Suites = append(suites.Suites, *byFile[file])
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(suites); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
