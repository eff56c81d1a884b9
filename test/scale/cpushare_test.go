package scale

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// The components an edit's manager CPU is attributed to, from a CPU
// profile of the manager taken over the edit: each sample goes to the
// first component, in this order, that a frame of its stack belongs to.
var components = []struct {
	name string
	in   func(fn string) bool
}{
	// The collector: its background workers, and the marking an
	// allocation is made to assist with.
	{"collector", func(fn string) bool {
		switch fn {
		case "runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep", "runtime.bgscavenge":
			return true
		}
		return false
	}},
	// Status writes: a reconciler's patch, and the client's writes.
	{"status writes", func(fn string) bool {
		return strings.Contains(fn, "/internal/reconcile.writeStatus") ||
			strings.Contains(fn, "controller-runtime/pkg/client.") && (strings.Contains(fn, ").Patch") || strings.Contains(fn, ").Update"))
	}},
	// The grading of the version published.
	{"grading", func(fn string) bool {
		return strings.Contains(fn, "/internal/grading.") || strings.Contains(fn, "/pkg/toolcatalog/selfgrade") ||
			strings.Contains(fn, "/pkg/toolcatalog/internal/index.(*grader)") || strings.Contains(fn, "/pkg/toolcatalog/internal/index.(*indexGrader)")
	}},
	// The records: the records writer and the ToolDefinition reconciler
	// that writes them.
	{"records", func(fn string) bool {
		return strings.Contains(fn, "/internal/records.") || strings.Contains(fn, "/controllers/tooldefinition.")
	}},
	// The pass and the reconcile around it.
	{"pass", func(fn string) bool {
		return strings.Contains(fn, "/internal/catalog.") || strings.Contains(fn, "/internal/published.") ||
			strings.Contains(fn, "/controllers/toolcatalog.")
	}},
}

// other is the component of the samples no other claims: the watches,
// the informers' decoding, metrics, the runtime's own work.
const other = "the rest"

// componentNames are the components in the order a table shows them.
func componentNames() []string {
	names := make([]string, 0, len(components)+1)
	for _, c := range components {
		names = append(names, c.name)
	}
	return append(names, other)
}

// cpuByComponent reads a CPU profile and sums its samples' CPU time by
// component.
func cpuByComponent(path string) (map[string]time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	cpu := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			cpu = i
		}
	}
	if cpu < 0 {
		return nil, fmt.Errorf("%s is not a CPU profile", path)
	}
	out := map[string]time.Duration{}
	for _, s := range p.Sample {
		out[componentOf(s)] += time.Duration(s.Value[cpu])
	}
	return out, nil
}

// componentOf is the component a sample's stack belongs to.
func componentOf(s *profile.Sample) string {
	for _, c := range components {
		for _, loc := range s.Location {
			for _, line := range loc.Line {
				if line.Function != nil && c.in(line.Function.Name) {
					return c.name
				}
			}
		}
	}
	return other
}
