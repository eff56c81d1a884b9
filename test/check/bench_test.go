package check_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// benchRepo writes a repository of n ToolDefinitions in files of 100,
// over three catalogs (by the toolset of each tool), with the descriptions
// of a real company's tools: many verbs over many nouns in several
// systems, so tools share words. edited, when set, changes that many
// descriptions.
func benchRepo(b *testing.B, dir string, n, edited int) {
	b.Helper()
	verbs := []string{"list", "get", "create", "update", "delete", "search", "export", "import", "archive", "restore", "assign", "approve", "reject", "close", "reopen", "merge", "tag", "share", "sync", "audit"}
	nouns := []string{"invoice", "ticket", "order", "customer", "contract", "shipment", "refund", "lead", "campaign", "report", "user", "team", "project", "task", "document", "payment", "subscription", "product", "vendor", "asset", "incident", "release", "build", "alert", "meeting"}
	systems := []string{"Salesforce", "Zendesk", "SAP", "Jira", "GitHub", "Stripe", "HubSpot", "Workday", "ServiceNow", "Shopify", "Slack", "Notion", "Asana", "Okta", "Datadog", "PagerDuty", "Confluence", "Box", "Xero", "Twilio"}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	var catalogs strings.Builder
	for c := range 3 {
		fmt.Fprintf(&catalogs, "---\napiVersion: toolcatalog.dev/v1alpha1\nkind: ToolCatalog\nmetadata:\n  name: catalog-%d\n  namespace: tools\nspec:\n  selector:\n    matchLabels:\n      toolcatalog.dev/catalog: c%d\n  redis:\n    addresses: [\"redis:6379\"]\n", c, c)
	}
	if err := os.WriteFile(filepath.Join(dir, "catalogs.yaml"), []byte(catalogs.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	var file strings.Builder
	for i := range n {
		verb, noun, system := verbs[i%len(verbs)], nouns[(i/len(verbs))%len(nouns)], systems[(i/7)%len(systems)]
		extra := ""
		if i < edited {
			extra = " Also supports bulk mode."
		}
		fmt.Fprintf(&file, `---
apiVersion: toolcatalog.dev/v1alpha1
kind: ToolDefinition
metadata:
  name: %[1]s-%[2]s-%[4]d
  namespace: tools
  labels:
    toolcatalog.dev/catalog: c%[5]d
spec:
  name: %[1]s_%[2]s_%[4]d
  toolset: %[1]s
  description: "%[6]s %[2]s records in %[3]s for workspace %[7]d. Accepts filters such as date range, owner and status, and returns matching %[2]ss with ids, timestamps and links. Use when the user asks to %[1]s a %[2]s.%[8]s"
  parameters:
    type: object
    properties:
      id:
        type: string
        description: The %[2]s's id in %[3]s.
      limit:
        type: integer
        minimum: 1
        maximum: 100
        description: The most %[2]ss to return, 1 to 100.
      region:
        type: string
        enum: [eu, us, apac]
        description: The region of the workspace - eu, us or apac.
    required: [id]
`, verb, noun, system, i, i%3, strings.ToUpper(verb[:1])+verb[1:], i%97, extra)
		if (i+1)%100 == 0 || i == n-1 {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("tools-%05d.yaml", i/100)), []byte(file.String()), 0o644); err != nil {
				b.Fatal(err)
			}
			file.Reset()
		}
	}
}

// benchRun runs the binary once per iteration and reports its peak RSS.
func benchRun(b *testing.B, dir string, args ...string) {
	b.Helper()
	var peak int64
	b.ResetTimer()
	for b.Loop() {
		cmd := exec.Command(binary, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if exit := (*exec.ExitError)(nil); err != nil && (!errors.As(err, &exit) || exit.ExitCode() != 0) {
			b.Fatalf("%v: %v\n%s", args, err, out)
		}
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			peak = max(peak, ru.Maxrss*1024)
		}
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
}

// BenchmarkCheck is a full check, the grading included, of 1,000 and
// 10,000 tools over three catalogs (targets: 10 s and 60 s, 1 GiB).
func BenchmarkCheck(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			benchRepo(b, dir, n, 0)
			benchRun(b, dir, "--fail-on", "error", "-o", "json", ".")
		})
	}
}

// BenchmarkCheckBase is the change report of 3 edited tools of 10,000
// against a base directory, without the grading (target: 10 s), and with
// it.
func BenchmarkCheckBase(b *testing.B) {
	root := b.TempDir()
	base, head := filepath.Join(root, "base"), filepath.Join(root, "head")
	benchRepo(b, base, 10000, 0)
	benchRepo(b, head, 10000, 3)
	b.Run("grade=false", func(b *testing.B) {
		benchRun(b, head, "--grade=false", "-o", "json", "--base-dir", base, ".")
	})
	b.Run("grade=true", func(b *testing.B) {
		benchRun(b, head, "-o", "json", "--base-dir", base, ".")
	})
}
