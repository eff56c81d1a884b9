package scale

import (
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/testenv"
)

// The many-catalogs shape: an organisation's catalogs, a few per
// namespace, over tools they share. In each namespace of k catalogs the
// tools come in k blocks of half a catalog's size; catalog c selects
// blocks c and c+1 (mod k), so every selected tool is selected by two
// catalogs, and as many tools again are selected by none (tools nobody
// has put in a catalog yet, which the manager still validates and
// caches).
var (
	catalogsFlag    = flag.Int("scale.catalogs", 4, "catalogs of the many-catalogs shape (0 skips it)")
	catalogToolsArg = flag.Int("scale.catalog-tools", 20, "tools each catalog of the many-catalogs shape selects (even)")
	namespacesFlag  = flag.Int("scale.namespaces", 2, "namespaces the many-catalogs shape spreads its catalogs over")
	idleWindow      = flag.Duration("scale.idle-window", 10*time.Second, "how long the idle manager's CPU is measured")
	shardsFlag      = flag.Int("scale.shards", 1, "managers the many-catalogs shape's namespaces are split over, each with its own --watch-namespaces (docs/deploy.md, shards by namespace); 1 is one manager watching every namespace")
)

const blockLabel = "scale.toolcatalog.dev/block"

// layout is the many-catalogs shape's arithmetic.
type layout struct {
	catalogs, tools, namespaces int
}

// perNamespace is how many catalogs each namespace holds.
func (l layout) perNamespace() int { return l.catalogs / l.namespaces }

// block is how many tools a block holds: half a catalog.
func (l layout) block() int { return l.tools / 2 }

// toolsPerNamespace is every tool of a namespace, the unselected included.
func (l layout) toolsPerNamespace() int { return 2 * l.perNamespace() * l.block() }

func (l layout) check(t *testing.T) {
	if l.namespaces < 1 || l.catalogs%l.namespaces != 0 || l.perNamespace() < 2 || l.tools < 2 || l.tools%2 != 0 {
		t.Fatalf("-scale.catalogs=%d -scale.namespaces=%d -scale.catalog-tools=%d: want at least two catalogs per namespace, as many in each, and an even number of tools", l.catalogs, l.namespaces, l.tools)
	}
}

// blockOf is the block of a namespace's tool i: "none" for the tools no
// catalog selects.
func (l layout) blockOf(i int) string {
	if b := i / l.block(); b < l.perNamespace() {
		return strconv.Itoa(b)
	}
	return "none"
}

// selecting are the catalogs that select block b.
func (l layout) selecting(b int) []string {
	k := l.perNamespace()
	return []string{catalogName(b), catalogName((b - 1 + k) % k)}
}

func catalogName(c int) string { return fmt.Sprintf("team-%03d", c) }

// TestScaleManyCatalogs measures the many-catalogs shape: the bulk apply
// until every catalog is published and graded, the idle manager, edits of
// shared tools and the manager's memory.
func TestScaleManyCatalogs(t *testing.T) {
	l := layout{catalogs: *catalogsFlag, tools: *catalogToolsArg, namespaces: *namespacesFlag}
	if l.catalogs == 0 {
		t.Log("-scale.catalogs=0: the many-catalogs shape is not measured")
		return
	}
	l.check(t)
	ctx := t.Context()
	tab := &table{}
	col := fmt.Sprintf("%d catalogs × %d tools, %d namespaces", l.catalogs, l.tools, l.namespaces)
	if *shardsFlag > 1 {
		col += fmt.Sprintf(", %d shards", *shardsFlag)
	}
	p := newProvider(t, 0, distinct)

	namespaces := make([]string, l.namespaces)
	for i := range namespaces {
		namespaces[i] = namespace(t, fmt.Sprintf("c%d", i))
	}
	mgr := startFleet(t, namespaces, *shardsFlag)
	for _, ns := range namespaces {
		for c := range l.perNamespace() {
			tc := catalogObject(ns, catalogName(c), p)
			k := l.perNamespace()
			tc.Spec.Selector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: blockLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{strconv.Itoa(c), strconv.Itoa((c + 1) % k)},
			}}}
			if err := kube.Create(ctx, tc); err != nil {
				t.Fatal(err)
			}
		}
	}

	troubles0 := mgr.troubles(t)
	start := time.Now()
	applyShared(t, l, namespaces)
	applied := time.Since(start)
	testenv.WaitEvery(t, "every catalog published with all its tools", 60*time.Minute, 2*time.Second, func() bool {
		return publishedCatalogs(t, l, namespaces) == l.catalogs
	})
	tab.set("ToolDefinitions (selected by two catalogs / by none)", col, fmt.Sprintf("%d (%d / %d)", l.namespaces*l.toolsPerNamespace(), l.catalogs*l.block(), l.catalogs*l.block()))
	tab.set("bulk apply: applied / → every catalog published", col, fmt.Sprintf("%v / %v", applied.Round(time.Second), time.Since(start).Round(time.Second)))
	t.Logf("%d catalogs published in %v", l.catalogs, time.Since(start).Round(time.Second))
	testenv.WaitEvery(t, "every catalog graded and the manager idle", 60*time.Minute, 2*time.Second, func() bool {
		return gradedCatalogs(t, l, namespaces) == l.catalogs && mgr.idle(t)
	})
	tab.set("bulk apply: → every catalog graded, manager idle", col, time.Since(start).Round(time.Second).String())
	tab.set("bulk apply: API conflicts (409) / error-level log lines", col, mgr.troubles(t).since(troubles0).String())
	waitAPIServerIdle(t, 10*time.Minute)
	mgr.heapProfile(t)

	// The idle manager: nothing changes, and the resyncs come as they do.
	cpu0, at := mgr.cpu(t), time.Now()
	time.Sleep(*idleWindow) // a measurement window, not a wait for a condition
	idle := float64(mgr.cpu(t)-cpu0) / float64(time.Since(at))
	tab.set(fmt.Sprintf("idle manager: CPU over %v", *idleWindow), col, fmt.Sprintf("%.1f%% of a core", 100*idle))

	// Edits of a tool two catalogs select, in different namespaces.
	watchRate := mgr.watchingCost(t)
	var toStatus, cpu, netCPU []time.Duration
	var conflicts, errorLines []int64
	for i := range *editsFlag {
		ns := namespaces[(i*37)%len(namespaces)]
		b := i % l.perNamespace()
		name := sharedToolName(b*l.block() + (i*7919)%l.block())
		before := map[string]int64{}
		for _, c := range l.selecting(b) {
			before[c] = getCatalog(t, ns, c).Status.Version
		}
		cpu0, tr0 := mgr.cpu(t), mgr.troubles(t)
		editStart := time.Now()
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"description": fmt.Sprintf("Tool %s of %s, edited %d times: it does one thing better.", name, ns, i+1)}})
		if err := kube.Patch(ctx, &v1alpha1.ToolDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, client.RawPatch("application/merge-patch+json", patch)); err != nil {
			t.Fatal(err)
		}
		testenv.WaitEvery(t, "both catalogs' status to show a new version", time.Minute, 10*time.Millisecond, func() bool {
			for c, v := range before {
				if getCatalog(t, ns, c).Status.Version <= v {
					return false
				}
			}
			return true
		})
		toStatus = append(toStatus, time.Since(editStart))
		waitIdle(t, "both catalogs graded and the manager idle", 5*time.Minute, func() bool {
			for c, v := range before {
				if q := getCatalog(t, ns, c).Status.Quality; q == nil || q.Version <= v {
					return false
				}
			}
			return mgr.idle(t)
		})
		cpu = append(cpu, mgr.cpu(t)-cpu0)
		netCPU = append(netCPU, cpu[len(cpu)-1]-time.Duration(watchRate*float64(time.Since(editStart))))
		tr := mgr.troubles(t).since(tr0)
		conflicts, errorLines = append(conflicts, tr.conflicts), append(errorLines, tr.errorLines)
		waitAPIServerIdle(t, time.Minute)
	}
	if len(cpu) > 0 {
		tab.set(fmt.Sprintf("one edit of a shared tool: apply → status of both catalogs (median of %d)", len(cpu)), col, medianDuration(toStatus).Round(time.Millisecond).String())
		tab.set("one edit: manager CPU until idle / less the watching's", col, fmt.Sprintf("%v / %v", medianDuration(cpu).Round(10*time.Millisecond), medianDuration(netCPU).Round(10*time.Millisecond)))
		tab.set("one edit: API conflicts (409) / error-level log lines", col, troubles{conflicts: slices.Max(conflicts), errorLines: slices.Max(errorLines)}.String()+" (most of one edit)")
	}
	mgr.setMemory(t, tab, col)
	for _, ns := range namespaces {
		cleanup(t, ns)
	}
	t.Logf("\n%s", tab)
	fmt.Printf("\n%s\n", tab)
}

func sharedToolName(i int) string { return fmt.Sprintf("tool-%06d", i) }

// applyShared creates every namespace's tools at once, 16 at a time.
func applyShared(t *testing.T, l layout, namespaces []string) {
	createAll(t, l.toolsPerNamespace()*len(namespaces), func(k int) client.Object {
		ns, i := namespaces[k%len(namespaces)], k/len(namespaces)
		name := sharedToolName(i)
		return &v1alpha1.ToolDefinition{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{blockLabel: l.blockOf(i)}},
			Spec: v1alpha1.ToolDefinitionSpec{
				Name:        "tool_" + strconv.Itoa(i),
				Description: fmt.Sprintf("Tool %s of %s does one specific thing, number %d, for the users who ask for it.", name, ns, i),
				Parameters:  &apiextensionsv1.JSON{Raw: []byte(toolParameters)},
			},
		}
	})
}

// publishedCatalogs counts the catalogs whose published version holds
// every tool they select.
func publishedCatalogs(t *testing.T, l layout, namespaces []string) int {
	return countCatalogs(t, namespaces, func(tc *v1alpha1.ToolCatalog) bool {
		return tc.Status.Version > 0 && tc.Status.Counts != nil && tc.Status.Counts.Embedded == int32(l.tools)
	})
}

// gradedCatalogs counts the catalogs whose newest version is graded.
func gradedCatalogs(t *testing.T, l layout, namespaces []string) int {
	return countCatalogs(t, namespaces, func(tc *v1alpha1.ToolCatalog) bool {
		return tc.Status.Version > 0 && tc.Status.Counts != nil && tc.Status.Counts.Embedded == int32(l.tools) &&
			tc.Status.Quality != nil && tc.Status.Quality.Version >= tc.Status.Version
	})
}

// countCatalogs counts the catalogs of the namespaces that are ok, with
// one list of every namespace's.
func countCatalogs(t *testing.T, namespaces []string, ok func(*v1alpha1.ToolCatalog) bool) int {
	list := &v1alpha1.ToolCatalogList{}
	if err := kube.List(t.Context(), list); err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range list.Items {
		if slices.Contains(namespaces, list.Items[i].Namespace) && ok(&list.Items[i]) {
			n++
		}
	}
	return n
}

// fleet is the managers of the many-catalogs shape: one, or one per shard
// of its namespaces.
type fleet []*managerProcess

// startFleet starts one manager watching every namespace, or shards
// managers each watching every shards-th namespace.
func startFleet(t *testing.T, namespaces []string, shards int) fleet {
	bin := buildManager(t)
	if shards <= 1 {
		m := startManager(t, bin)
		m.watchPeak(t, fmt.Sprintf("%scatalogs.peak.heap.pprof", *heapFlag))
		return fleet{m}
	}
	f := make(fleet, shards)
	for i := range f {
		var mine []string
		for j := i; j < len(namespaces); j += shards {
			mine = append(mine, namespaces[j])
		}
		f[i] = startManager(t, bin, "--watch-namespaces="+strings.Join(mine, ","), fmt.Sprintf("--leader-election-id=shard-%d", i))
		f[i].watchPeak(t, fmt.Sprintf("%scatalogs-shard%d.peak.heap.pprof", *heapFlag, i))
	}
	return f
}

// cpu is the managers' CPU time so far, together.
func (f fleet) cpu(t *testing.T) time.Duration {
	var sum time.Duration
	for _, m := range f {
		sum += m.cpu(t)
	}
	return sum
}

// troubles are the managers', together.
func (f fleet) troubles(t *testing.T) troubles {
	var sum troubles
	for _, m := range f {
		tr := m.troubles(t)
		sum.conflicts, sum.errorLines = sum.conflicts+tr.conflicts, sum.errorLines+tr.errorLines
	}
	return sum
}

// idle reports whether every manager is idle; each is asked, so each
// keeps its own count of how long it has looked idle.
func (f fleet) idle(t *testing.T) bool {
	all := true
	for _, m := range f {
		all = m.idle(t) && all
	}
	return all
}

// watchingCost is what watching the managers costs them, together.
func (f fleet) watchingCost(t *testing.T) float64 {
	var sum float64
	for _, m := range f {
		sum += m.watchingCost(t)
	}
	return sum
}

func (f fleet) heapProfile(t *testing.T) {
	for i, m := range f {
		m.heapProfile(t, fmt.Sprintf("%scatalogs-%d.heap.pprof", *heapFlag, i))
	}
}

// setMemory reports the one manager's memory, or the largest shard's and
// all shards' together.
func (f fleet) setMemory(t *testing.T, tab *table, col string) {
	if len(f) == 1 {
		f[0].setMemory(t, tab, col)
		return
	}
	var most, sum int64
	for _, m := range f {
		peak, _, _ := m.memory(t)
		most, sum = max(most, peak), sum+peak
	}
	tab.set("manager peak RSS", col, fmt.Sprintf("%s (largest shard; %s all shards)", mib(most), mib(sum)))
}
