// Package scale measures the operator on large catalogs, black-box: the
// manager runs as its own process (cmd/manager) against a real API server,
// etcd and redis-server, with an OpenAI-compatible provider in this process
// whose chat latency is configurable. It prints one table per run.
//
// make test runs it at a small size as a functional check; make bench-scale
// runs it at full size:
//
//	go test ./test/scale -run TestScale -v -timeout 90m -args \
//	  -scale.sizes=1000,10000 -scale.slow-tools=1000 -scale.chat-latency=2s -scale.pass-budget=20s -scale.edits=5
package scale

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/metrics"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/manager"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/openaitest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/redistest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/shapes"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/testenv"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
	openaiquery "github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/openai"
)

var (
	sizesFlag   = flag.String("scale.sizes", "100", "catalog sizes to measure, comma-separated")
	shapesFlag  = flag.String("scale.shapes", "distinct,alike,shared", "how each size's tools look, comma-separated: distinct (each its own words and vector), alike (families from templates, near one another in words and vectors) or shared (long templated descriptions, three parameters with an enum, a toolset per verb, and generated requests drawn from 20 that many tools share)")
	editsFlag   = flag.Int("scale.edits", 3, "description edits measured, the median reported (TestScale makes one more first, reported on its own)")
	slowFlag    = flag.Int("scale.slow-tools", 40, "tools applied before their catalog for the slow first build (0 skips it)")
	latencyFlag = flag.Duration("scale.chat-latency", 200*time.Millisecond, "latency of every chat request in the slow first build")
	budgetFlag  = flag.Duration("scale.pass-budget", time.Second, "the manager's -pass-budget")
	dimsFlag    = flag.Int("scale.dimensions", 256, "embedding dimensions")
	readyFlag   = flag.Duration("scale.ready-timeout", 30*time.Minute, "how long the bulk apply's ToolDefinitions may take to become Ready once published; 100,000 of them on two cores take longer than the default")
	qpsFlag     = flag.Float64("scale.kube-api-qps", 0, "the manager's --kube-api-qps (and twice it as --kube-api-burst); its default when 0. At 100,000 tools the ToolDefinitions' status writes at the default 50 take over half an hour before the edits can be measured")
	profileFlag = flag.String("scale.cpuprofile", "", "write the manager's CPU and allocation profiles during the edits of each size to this file prefix (SIZE-SHAPE.pprof and SIZE-SHAPE.allocs.pprof are added)")
	heapFlag    = flag.String("scale.heapprofile", "", "write the manager's heap profile, once the bulk apply is graded and the manager idle, to this file prefix (SIZE-SHAPE.heap.pprof is added), and at its highest resident set (SIZE-SHAPE.peak.heap.pprof)")
)

const (
	queriesPerTool = 5
	label          = "scale.toolcatalog.dev/catalog"
)

var (
	restCfg    *rest.Config
	kubeconfig []byte
	kube       client.WithWatch
	redisSrv   *redistest.Server
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	env, cfg, err := testenv.Start(filepath.Join("..", ".."), "")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Stop()
	restCfg, kubeconfig = rest.CopyConfig(cfg), env.KubeConfig
	cfg.QPS, cfg.Burst = 2000, 4000
	if kube, err = client.NewWithWatch(cfg, client.Options{Scheme: manager.Scheme()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if redisSrv, err = redistest.Start(""); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer redisSrv.Stop()
	return m.Run()
}

// row is one line of the table: what was measured, per column.
type row struct {
	name   string
	values map[string]string
}

type table struct {
	columns []string
	rows    []*row
}

func (t *table) set(name, column, value string) {
	if !slices.Contains(t.columns, column) {
		t.columns = append(t.columns, column)
	}
	for _, r := range t.rows {
		if r.name == name {
			r.values[column] = value
			return
		}
	}
	t.rows = append(t.rows, &row{name: name, values: map[string]string{column: value}})
}

func (t *table) String() string {
	var b strings.Builder
	b.WriteString("| |")
	for _, c := range t.columns {
		b.WriteString(" " + c + " |")
	}
	b.WriteString("\n|---|")
	for range t.columns {
		b.WriteString("---|")
	}
	for _, r := range t.rows {
		b.WriteString("\n| " + r.name + " |")
		for _, c := range t.columns {
			v := r.values[c]
			if v == "" {
				v = "–"
			}
			b.WriteString(" " + v + " |")
		}
	}
	return b.String()
}

func TestScale(t *testing.T) {
	bin := buildManager(t)
	tab := &table{}
	if *slowFlag > 0 {
		t.Run("slow-first-build", func(t *testing.T) { slowFirstBuild(t, bin, tab) })
	}
	for _, s := range strings.Split(*sizesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 2 {
			t.Fatalf("-scale.sizes: %q is not a size", s)
		}
		for _, sh := range strings.Split(*shapesFlag, ",") {
			sh := shape(strings.TrimSpace(sh))
			if sh != distinct && sh != alike && sh != shared {
				t.Fatalf("-scale.shapes: %q is not distinct, alike or shared", sh)
			}
			t.Run(fmt.Sprintf("%d-%s-tools", n, sh), func(t *testing.T) { measureSize(t, bin, n, sh, tab) })
		}
	}
	t.Logf("\n%s", tab)
	fmt.Printf("\n%s\n", tab)
}

// ---- the slow first build ----

// slowFirstBuild applies the tools before their catalog, with a chat
// provider that takes latency per request: the catalog publishes its first
// tools within about one pass budget, keeps publishing as it goes, shows
// progress, and never asks for a tool's queries twice.
func slowFirstBuild(t *testing.T, bin string, tab *table) {
	ctx := t.Context()
	n := *slowFlag
	col := fmt.Sprintf("%d tools, chat %v", n, *latencyFlag)
	ns := namespace(t, "slow")
	p := newProvider(t, *latencyFlag, distinct)
	mgr := startManager(t, bin)
	applyTools(t, ns, "slow", n, distinct)
	waitHashed(t, ns, n)

	sub := redisSrv.Client().Subscribe(ctx, channel(ns))
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := kube.Create(ctx, catalogObject(ns, "slow", p)); err != nil {
		t.Fatal(err)
	}
	var (
		first, all time.Duration
		versions   int64
		progress   []string
		reasons    = map[string]bool{}
	)
	deadline := time.Now().Add(max(30*time.Minute, time.Duration(n)*(*latencyFlag)))
	for all == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("not every tool published after %v; reasons seen %v", time.Since(start), reasons)
		}
		tc := &v1alpha1.ToolCatalog{}
		if err := kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "slow"}, tc); err != nil {
			t.Fatal(err)
		}
		if c := meta.FindStatusCondition(tc.Status.Conditions, v1alpha1.ConditionReady); c != nil {
			reasons[c.Reason] = true
		}
		if c := meta.FindStatusCondition(tc.Status.Conditions, v1alpha1.ConditionReconciling); c != nil && (len(progress) == 0 || progress[len(progress)-1] != c.Message) {
			progress = append(progress, c.Message)
		}
		if tc.Status.Version > 0 && first == 0 {
			first = time.Since(start)
		}
		versions = tc.Status.Version
		if tc.Status.Counts != nil && tc.Status.Counts.Embedded == int32(n) && docTools(t, ns, "slow") == n {
			all = time.Since(start)
		}
		time.Sleep(200 * time.Millisecond)
	}
	chats := p.ChatRequests()
	prompts := map[string]int{}
	for _, c := range chats {
		prompts[c.Messages[len(c.Messages)-1].Content]++
	}
	repeated := 0
	for _, k := range prompts {
		repeated += k - 1
	}
	tab.set("first tools published after", col, first.Round(100*time.Millisecond).String())
	tab.set("all tools published after", col, all.Round(100*time.Millisecond).String())
	tab.set("versions published on the way", col, strconv.FormatInt(versions, 10))
	tab.set("chat requests (repeated)", col, fmt.Sprintf("%d (%d)", len(chats), repeated))
	tab.set("Ready reasons seen", col, strings.Join(sortedKeys(reasons), ", "))
	mgr.setMemory(t, tab, col)
	if len(progress) > 0 {
		t.Logf("progress seen: first %q, last %q", progress[0], progress[len(progress)-1])
	}

	if repeated != 0 {
		t.Errorf("%d chat requests repeated a prompt already answered", repeated)
	}
	if reasons[v1alpha1.ReasonRedisUnavailable] {
		t.Errorf("a slow provider was reported as a Redis outage")
	}
	// Functional: the build went out in several versions, with progress
	// shown, when it takes more than one pass budget.
	if time.Duration(n/3)*(*latencyFlag) > 3*(*budgetFlag) {
		if versions < 2 {
			t.Errorf("the slow build was published as %d version; want one per pass budget", versions)
		}
		if len(progress) == 0 || !strings.Contains(progress[0], "refreshing: ") {
			t.Errorf("no progress shown while the build went on: %q", progress)
		}
	}
	cleanup(t, ns)
}

// ---- one size ----

func measureSize(t *testing.T, bin string, n int, sh shape, tab *table) {
	ctx := t.Context()
	col := fmt.Sprintf("%d %s tools", n, sh)
	ns := namespace(t, fmt.Sprintf("n%d%s", n, sh))
	p := newProvider(t, 0, sh)
	mgr := startManager(t, bin)
	mgr.watchPeak(t, fmt.Sprintf("%s%d-%s.peak.heap.pprof", *heapFlag, n, sh))
	rc := redisSrv.Client()
	keys := contract.Keys{Prefix: contract.DefaultPrefix(ns, "scale")}

	// Bulk apply with the catalog present, counting ToolDefinition status
	// writes until every tool is Ready.
	writes := watchStatusWrites(t, ns, n)
	bulkNotices := noticeTimes(t, ns)
	if err := kube.Create(ctx, catalogObject(ns, "scale", p)); err != nil {
		t.Fatal(err)
	}
	// When the status first shows each version, watched from before the
	// tools are applied.
	shown := map[int64]time.Time{}
	var shownMu sync.Mutex
	stopWatching := make(chan struct{})
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		for {
			select {
			case <-stopWatching:
				return
			case <-time.After(20 * time.Millisecond):
			}
			tc := &v1alpha1.ToolCatalog{}
			if kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "scale"}, tc) != nil {
				continue
			}
			shownMu.Lock()
			if _, seen := shown[tc.Status.Version]; !seen {
				shown[tc.Status.Version] = time.Now()
			}
			shownMu.Unlock()
		}
	}()
	start := time.Now()
	bulk0 := mgr.troubles(t)
	applyTools(t, ns, "scale", n, sh)
	waitFor(t, "every tool published", 30*time.Minute, func() bool {
		tc := getCatalog(t, ns, "scale")
		return tc.Status.Counts != nil && tc.Status.Counts.Embedded == int32(n) && docTools(t, ns, "scale") == n
	})
	close(stopWatching)
	<-watching
	t.Logf("%d tools applied and published in %v", n, time.Since(start).Round(time.Second))
	w := writes.wait(t)
	tab.set("bulk apply: ToolDefinition status writes per tool", col, fmt.Sprintf("%.1f", float64(w)/float64(n)))
	// Two real changes per tool: validated, then embedded. A few more
	// happen when the catalog's cache has not seen the validation yet
	// (it then writes the record alone); a write per condition update
	// as before would give 2.5 and more.
	if perTool := float64(w) / float64(n); perTool > 2.3 {
		t.Errorf("%.2f ToolDefinition status writes per tool during a bulk apply; want one per change (2)", perTool)
	}
	tab.set("bulk apply: versions, worst notice → status lag", col, bulkNotices.worstLag(shown))
	tab.set("bulk apply: API conflicts (409) / error-level log lines", col, mgr.troubles(t).since(bulk0).String())

	tab.set("stored catalog: tools / change records or version documents", col, storedSize(t, keys))
	tab.set("query store of the namespace: entries / bytes", col, storeSize(t, ns))

	// The consumer's load and searches are measured with the manager
	// idle, its grading of the version done: at 50,000 tools that grading
	// takes the machine's cores for a while.
	waitFor(t, "the version graded and the manager idle", 10*time.Minute, func() bool {
		tc := getCatalog(t, ns, "scale")
		return tc.Status.Quality != nil && tc.Status.Quality.Version >= tc.Status.Version && mgr.idle(t)
	})
	q := getCatalog(t, ns, "scale").Status.Quality
	tab.set("graded: self recall@5 / outranked tools / confusable pairs listed", col, fmt.Sprintf("%s / %d / %d", q.SelfRecallAt5, q.OutrankedCount, len(q.ConfusablePairs)))
	waitAPIServerIdle(t, 10*time.Minute)
	mgr.heapProfile(t, fmt.Sprintf("%s%d-%s.heap.pprof", *heapFlag, n, sh))

	// A consumer's full load.
	cc, counted := redisSrv.CountingClient()
	var before, after runtimeAlloc
	runtime.GC()
	before.read()
	loadStart := time.Now()
	cat, err := toolcatalog.Load(ctx, cc, keys)
	loadTime := time.Since(loadStart)
	after.read()
	if err != nil {
		t.Fatal(err)
	}
	tab.set("consumer Load: time / allocated / read", col, fmt.Sprintf("%v / %s / %s", loadTime.Round(time.Millisecond), mib(after.total-before.total), mib(counted.Swap(0))))
	tab.set("consumer Load: retained", col, mib(retained(before, cat)))
	tab.set("consumer Load: collections / their CPU", col,
		fmt.Sprintf("%d / %v", after.gcs-before.gcs, time.Duration((after.gcCPU-before.gcCPU)*float64(time.Second)).Round(time.Millisecond)))
	tab.set("hybrid search p50 / p99, query embedded", col, searchLatency(t, cat, p))

	// A follower, to measure what a reload after one edit transfers.
	fc, followed := redisSrv.CountingClient()
	updates := make(chan int64, 16)
	followCtx, stopFollowing := context.WithCancel(ctx)
	defer stopFollowing()
	f, err := toolcatalog.Follow(followCtx, fc, keys, toolcatalog.FollowOptions{Channel: channel(ns), OnUpdate: func(c *toolcatalog.Catalog) { updates <- c.Version() }})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f, cat

	sub := rc.Subscribe(ctx, channel(ns))
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	notices := sub.Channel()

	// Edits: one description each. The first comes after the quiet the
	// bulk's status writes leave, which at 50,000 tools outlasts the
	// stored snapshot's resync. It is reported on its own, and the
	// medians are of the edits after it, which the profile covers.
	watchRate := mgr.watchingCost(t)
	stopProfile := func() {}
	var applyToVersion, statusLag, applyToStatus, editCPU, editNetCPU []time.Duration
	var allocated, collections []int64
	var chatPerEdit, embPerEdit, redisIn, redisOut, reload, tdReconciles, conflicts, errorLines, searches, scans []int64
	var gradingTook, gradingCPU []time.Duration
	var reverted, original string
	// componentCPU holds each measured edit's CPU by component (ns).
	componentCPU := map[string][]int64{}
	profilePrefix := *profileFlag
	if profilePrefix == "" {
		profilePrefix = t.TempDir() + "/"
	}
	for i := range *editsFlag + 1 {
		if i == 1 {
			stopProfile = mgr.profile(t, fmt.Sprintf("%s%d-%s.allocs.pprof", *profileFlag, n, sh))
		}
		// Each measured edit's CPU profile, for its components.
		waitCPUProfile := func() error { return nil }
		cpuProfile := fmt.Sprintf("%s%d-%s-edit%d.pprof", profilePrefix, n, sh, i)
		if i > 0 {
			waitCPUProfile = mgr.cpuProfile(editProfileSeconds(n), cpuProfile)
		}
		waitAPIServerIdle(t, time.Minute)
		version := getCatalog(t, ns, "scale").Status.Version
		chat0, emb0 := len(p.ChatRequests()), len(p.EmbeddingRequests())
		in0, out0 := netBytes(t)
		followed.Store(0)
		name := fmt.Sprintf("tool-%05d", (i*7919)%n)
		if i == 0 {
			td := &v1alpha1.ToolDefinition{}
			if err := kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, td); err != nil {
				t.Fatal(err)
			}
			reverted, original = name, td.Spec.Description
		}
		cpu0, td0, troubles0 := mgr.cpu(t), mgr.reconciles(t, "tooldefinition"), mgr.troubles(t)
		heap0 := mgr.heapWork(t)
		grading0 := mgr.gradingWork(t)
		editStart := time.Now()
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"description": sh.edited(name, (i*7919)%n, i+1)}})
		if err := kube.Patch(ctx, &v1alpha1.ToolDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, client.RawPatch("application/merge-patch+json", patch)); err != nil {
			t.Fatal(err)
		}
		got := waitNotice(t, notices, version)
		noticeAt := time.Now()
		applyToVersion = append(applyToVersion, noticeAt.Sub(editStart))
		waitFor(t, "the catalog status to show the new version", time.Minute, func() bool { return getCatalog(t, ns, "scale").Status.Version >= got })
		statusLag = append(statusLag, time.Since(noticeAt))
		applyToStatus = append(applyToStatus, time.Since(editStart))
		waitUpdate(t, updates, got)
		// The manager's CPU for the edit: the pass, the records and the
		// grading of the version, until nothing is left to do.
		waitIdle(t, "the version graded and the manager idle", time.Minute, func() bool {
			q := getCatalog(t, ns, "scale").Status.Quality
			return q != nil && q.Version >= got && mgr.idle(t)
		})
		editCPU = append(editCPU, mgr.cpu(t)-cpu0)
		editNetCPU = append(editNetCPU, editCPU[len(editCPU)-1]-time.Duration(watchRate*float64(time.Since(editStart))))
		hw := mgr.heapWork(t).since(heap0)
		allocated, collections = append(allocated, hw.allocated), append(collections, hw.collections)
		took := time.Since(editStart)
		tr := mgr.troubles(t).since(troubles0)
		conflicts, errorLines = append(conflicts, tr.conflicts), append(errorLines, tr.errorLines)
		tdReconciles = append(tdReconciles, int64(mgr.reconciles(t, "tooldefinition")-td0))
		w := mgr.gradingWork(t).since(grading0)
		searches, scans = append(searches, w.searched), append(scans, w.scanned)
		gradingTook, gradingCPU = append(gradingTook, w.took), append(gradingCPU, w.cpu)
		in1, out1 := netBytes(t)
		chatPerEdit = append(chatPerEdit, int64(len(p.ChatRequests())-chat0))
		embPerEdit = append(embPerEdit, int64(len(p.EmbeddingRequests())-emb0))
		reload = append(reload, followed.Load())
		// Redis's totals include the follower's reload, the notice to
		// both subscribers and the two INFO replies.
		redisIn = append(redisIn, in1-in0)
		redisOut = append(redisOut, out1-out0-followed.Load())
		// The profile ends after the edit's measures are taken.
		if window := time.Duration(editProfileSeconds(n)) * time.Second; i > 0 && took > window {
			t.Logf("edit %d took %v, longer than its profile (%v): its components are of its start", i, took.Round(time.Millisecond), window)
		}
		if err := waitCPUProfile(); err != nil {
			t.Fatalf("edit %d's CPU profile: %v", i, err)
		}
		if i > 0 {
			by, err := cpuByComponent(cpuProfile)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range componentNames() {
				componentCPU[c] = append(componentCPU[c], int64(by[c]))
			}
		}
	}
	stopProfile()
	for i, c := range chatPerEdit {
		// A shared tool's new requests are other tools' too: the query
		// store has their vectors.
		if c != 1 || embPerEdit[i] != 1 && (sh != shared || embPerEdit[i] != 0) {
			t.Errorf("edit %d made %d chat and %d embeddings requests, want 1 and 1", i+1, c, embPerEdit[i])
		}
	}
	tab.set("first edit after the bulk apply: manager CPU until idle / queries the grading searched / of them scanning every vector", col,
		fmt.Sprintf("%v / %d / %d", editCPU[0].Round(10*time.Millisecond), searches[0], scans[0]))
	applyToVersion, statusLag, applyToStatus, editCPU, editNetCPU = applyToVersion[1:], statusLag[1:], applyToStatus[1:], editCPU[1:], editNetCPU[1:]
	allocated, collections = allocated[1:], collections[1:]
	// Conflicts and error lines are the worst of every edit, the first too.
	worst := troubles{conflicts: slices.Max(conflicts), errorLines: slices.Max(errorLines)}
	chatPerEdit, embPerEdit, redisIn, redisOut, reload, tdReconciles = chatPerEdit[1:], embPerEdit[1:], redisIn[1:], redisOut[1:], reload[1:], tdReconciles[1:]
	searches, scans, gradingTook, gradingCPU = searches[1:], scans[1:], gradingTook[1:], gradingCPU[1:]
	tab.set("one edit: provider requests (chat + embeddings)", col, fmt.Sprintf("%d + %d", median(chatPerEdit), median(embPerEdit)))
	tab.set(fmt.Sprintf("one edit: apply → notice (median of %d)", *editsFlag), col, medianDuration(applyToVersion).Round(time.Millisecond).String())
	tab.set("one edit: notice → status shows the version", col, medianDuration(statusLag).Round(time.Millisecond).String())
	tab.set("one edit: apply → status shows the version", col, medianDuration(applyToStatus).Round(time.Millisecond).String())
	tab.set("one edit: manager CPU until idle, grading included / less the watching's", col,
		fmt.Sprintf("%v / %v", medianDuration(editCPU).Round(10*time.Millisecond), medianDuration(editNetCPU).Round(10*time.Millisecond)))
	// What the edit allocates sets off the collections whose marking of
	// the whole heap the component "collector" counts.
	tab.set("one edit: manager heap allocated until idle / collections (each the median)", col,
		fmt.Sprintf("%.1f MiB / %d", float64(median(allocated))/(1<<20), median(collections)))
	var parts []string
	for _, c := range componentNames() {
		parts = append(parts, time.Duration(median(componentCPU[c])).Round(time.Millisecond).String())
	}
	tab.set("one edit: manager CPU by component, from a profile of the edit and the quiet after it (each the median): "+strings.Join(componentNames(), " / "), col, strings.Join(parts, " / "))
	tab.set("idle manager watched as the edits are: CPU", col, fmt.Sprintf("%.1f%% of a core", 100*watchRate))
	tab.set("one edit: ToolDefinition reconciles", col, strconv.FormatInt(median(tdReconciles), 10))
	tab.set("one edit: queries the grading searched / of them scanning every vector / the grading's time / its CPU (as the manager exports them)", col,
		fmt.Sprintf("%d / %d / %v / %v", median(searches), median(scans), medianDuration(gradingTook).Round(time.Millisecond), medianDuration(gradingCPU).Round(time.Millisecond)))
	tab.set("one edit: API conflicts (409) / error-level log lines", col, worst.String()+" (most of one edit)")
	tab.set("one edit: Redis bytes the manager writes / reads", col, fmt.Sprintf("%s / %s", mib(median(redisIn)), mib(median(redisOut))))
	tab.set("one edit: follower reload reads", col, mib(median(reload)))

	// The first edit reverted (A → B → A): what A cost is in the query
	// store, so the version comes without asking the provider.
	{
		waitAPIServerIdle(t, time.Minute)
		version := getCatalog(t, ns, "scale").Status.Version
		chat0, emb0 := len(p.ChatRequests()), len(p.EmbeddingRequests())
		start := time.Now()
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"description": original}})
		if err := kube.Patch(ctx, &v1alpha1.ToolDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: reverted}}, client.RawPatch("application/merge-patch+json", patch)); err != nil {
			t.Fatal(err)
		}
		got := waitNotice(t, notices, version)
		toNotice := time.Since(start)
		waitFor(t, "the catalog status to show the reverted version", time.Minute, func() bool { return getCatalog(t, ns, "scale").Status.Version >= got })
		tab.set("a reverted edit (A → B → A): provider requests (chat + embeddings)", col, fmt.Sprintf("%d + %d", len(p.ChatRequests())-chat0, len(p.EmbeddingRequests())-emb0))
		tab.set("a reverted edit: apply → notice / → status", col, fmt.Sprintf("%v / %v", toNotice.Round(time.Millisecond), time.Since(start).Round(time.Millisecond)))
		waitIdle(t, "the reverted version graded and the manager idle", time.Minute, func() bool {
			q := getCatalog(t, ns, "scale").Status.Quality
			return q != nil && q.Version >= got && mgr.idle(t)
		})
		if chat, emb := len(p.ChatRequests())-chat0, len(p.EmbeddingRequests())-emb0; chat != 0 || emb != 0 {
			t.Errorf("reverting an edit made %d chat and %d embeddings requests, want none", chat, emb)
		}
	}

	// A label-only change: the pass is observed (the reconcile count
	// moves), and it publishes nothing.
	version := getCatalog(t, ns, "scale").Status.Version
	reconciles := mgr.reconciles(t, "toolcatalog")
	cpu0 := mgr.cpu(t)
	patch := `{"metadata":{"labels":{"scale.toolcatalog.dev/touched":"yes"}}}`
	if err := kube.Patch(ctx, &v1alpha1.ToolDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tool-00001"}}, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, "the catalog's pass after the label change", time.Minute, func() bool { return mgr.reconciles(t, "toolcatalog") > reconciles && mgr.idle(t) })
	tab.set("label-only change: manager CPU", col, (mgr.cpu(t) - cpu0).Round(10*time.Millisecond).String())
	if v := getCatalog(t, ns, "scale").Status.Version; v != version {
		t.Errorf("a label-only change published version %d", v)
	}
	if v, _ := rc.Get(ctx, keys.Version()).Int64(); v != version {
		t.Errorf("a label-only change moved P:version to %d", v)
	}
	mgr.setMemory(t, tab, col)
	// The figures so far, before the clean-up: 100,000 ToolDefinitions
	// take as long to delete as they took to become Ready.
	t.Logf("measured:\n%s", tab)
	cleanup(t, ns)
}

// ---- the manager process ----

type managerProcess struct {
	*process
	metricsAddr string
	// metricsToken may get /metrics.
	metricsToken string
	// idleSince is when idle first saw no work, zero while there is.
	idleSince time.Time
	// errorLines counts the error-level lines the manager has logged.
	errorLines *errorLineCounter
}

func buildManager(t *testing.T) string { return testenv.Build(t, "../../cmd/manager") }

func startManager(t *testing.T, bin string, extra ...string) *managerProcess {
	kc := kubeconfigFile(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	// The provider answers on loopback.
	args := []string{"--metrics-bind-address=" + addr, "--health-probe-bind-address=0", "--zap-log-level=error", "--pass-budget=" + budgetFlag.String(), "--egress-allow=127.0.0.1/32"}
	if *qpsFlag > 0 {
		args = append(args, fmt.Sprintf("--kube-api-qps=%g", *qpsFlag), fmt.Sprintf("--kube-api-burst=%d", int(2**qpsFlag)))
	}
	args = append(args, extra...)
	lines := &errorLineCounter{}
	proc := startProcess(t, bin, args, []string{"KUBECONFIG=" + kc}, lines)
	// The harness scrapes as Prometheus would: with a token that may get
	// /metrics.
	token, err := testenv.MetricsReaderToken(t.Context(), restCfg, "scale-metrics-reader", true)
	if err != nil {
		t.Fatal(err)
	}
	m := &managerProcess{process: proc, metricsAddr: addr, metricsToken: token, errorLines: lines}
	waitFor(t, "the manager's metrics endpoint", time.Minute, func() bool {
		_, err := m.metrics()
		return err == nil
	})
	return m
}

// apiServerPID finds envtest's kube-apiserver: the process of that name
// serving restCfg's port.
func apiServerPID(t *testing.T) int {
	u, err := url.Parse(restCfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range procs {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue // it ended
		}
		args := strings.Split(string(raw), "\x00")
		if filepath.Base(args[0]) == "kube-apiserver" && slices.Contains(args, "--secure-port="+port) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			return pid
		}
	}
	t.Fatalf("no kube-apiserver process serves port %s", port)
	return 0
}

// waitAPIServerIdle waits until the API server has used under a tenth of
// a core for a second. After a bulk apply of 50,000 tools it works through
// what the apply left (its watch caches, the status writes) for minutes
// after the manager is idle, on the cores the figures measure.
func waitAPIServerIdle(t *testing.T, timeout time.Duration) {
	t.Helper()
	pid := apiServerPID(t)
	var lastCPU time.Duration
	var lastAt time.Time
	waitIdle(t, "the API server idle", timeout, func() bool {
		cpu, now := processCPU(t, pid), time.Now()
		if lastAt.IsZero() || now.Sub(lastAt) < time.Second {
			if lastAt.IsZero() {
				lastCPU, lastAt = cpu, now
			}
			return false
		}
		idle := float64(cpu-lastCPU) < 0.1*float64(now.Sub(lastAt))
		lastCPU, lastAt = cpu, now
		return idle
	})
}

// setMemory reports the manager's peak RSS and what it holds now.
func (m *managerProcess) setMemory(t *testing.T, tab *table, col string) {
	peak, anon, file := m.memory(t)
	tab.set("manager peak RSS", col, mib(peak))
	tab.set("manager RSS now: anonymous / file-backed", col, mib(anon)+" / "+mib(file))
}

// metrics scrapes the manager's metrics, only the families named when
// any are (the name[] filter of client_golang's handler).
func (m *managerProcess) metrics(names ...string) (map[string]float64, error) {
	// Uncompressed: gzip would be most of what a scrape costs the
	// manager, and the waits for it to be idle scrape it often.
	query := url.Values{"name[]": names}
	req, err := http.NewRequest(http.MethodGet, "http://"+m.metricsAddr+"/metrics?"+query.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept-Encoding", "identity")
	req.Header.Set("Authorization", "Bearer "+m.metricsToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for name, fam := range families {
		for _, m := range fam.GetMetric() {
			key := name
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" || l.GetName() == "name" || l.GetName() == "code" {
					key += "/" + l.GetValue()
				}
			}
			switch {
			case m.Counter != nil:
				out[key] += m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[key] += m.GetGauge().GetValue()
			case m.Histogram != nil:
				out[key+"_count"] += float64(m.GetHistogram().GetSampleCount())
				out[key+"_sum"] += m.GetHistogram().GetSampleSum()
			case m.Summary != nil:
				out[key+"_count"] += float64(m.GetSummary().GetSampleCount())
			}
		}
	}
	return out, nil
}

// troubles are what a user of the manager would call trouble: requests
// the API server refused as conflicts (an optimistic-lock failure of one
// writer against another) and lines logged at error level.
type troubles struct{ conflicts, errorLines int64 }

func (tr troubles) since(before troubles) troubles {
	return troubles{conflicts: tr.conflicts - before.conflicts, errorLines: tr.errorLines - before.errorLines}
}

func (tr troubles) String() string { return fmt.Sprintf("%d / %d", tr.conflicts, tr.errorLines) }

// troubles are the manager's so far: its client's 409 answers
// (client-go's rest_client_requests_total) and its error-level lines.
func (m *managerProcess) troubles(t *testing.T) troubles {
	v, err := m.metrics()
	if err != nil {
		t.Fatal(err)
	}
	return troubles{conflicts: int64(v["rest_client_requests_total/409"]), errorLines: m.errorLines.count.Load()}
}

// errorLineCounter counts the lines written to it that the manager's
// logger (zap, JSON) wrote at error level or above.
type errorLineCounter struct {
	mu      sync.Mutex
	partial []byte
	count   atomic.Int64
}

var errorLevel = regexp.MustCompile(`"level":"(error|dpanic|panic|fatal)"`)

func (c *errorLineCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.partial = append(c.partial, p...)
	for {
		i := slices.Index(c.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		if errorLevel.Match(c.partial[:i]) {
			c.count.Add(1)
		}
		c.partial = c.partial[i+1:]
	}
}

// reconciles is how many reconciles a controller has run.
func (m *managerProcess) reconciles(t *testing.T, controller string) float64 {
	v, err := m.metrics()
	if err != nil {
		t.Fatal(err)
	}
	return v["controller_runtime_reconcile_total/"+controller]
}

// gradingWork is what the manager exports of its gradings: how many own
// queries they searched, how many of those searches scored every tool's
// vector, and how long the gradings took and their CPU.
type gradingWork struct {
	searched, scanned int64
	took, cpu         time.Duration
}

func (m *managerProcess) gradingWork(t *testing.T) gradingWork {
	v, err := m.metrics()
	if err != nil {
		t.Fatal(err)
	}
	return gradingWork{int64(v["toolcatalog_grading_searches_total"]), int64(v["toolcatalog_grading_scans_total"]),
		time.Duration(v["toolcatalog_grading_duration_seconds_sum"] * float64(time.Second)),
		time.Duration(v["toolcatalog_grading_cpu_seconds_total"] * float64(time.Second))}
}

func (w gradingWork) since(before gradingWork) gradingWork {
	return gradingWork{w.searched - before.searched, w.scanned - before.scanned, w.took - before.took, w.cpu - before.cpu}
}

// heapWork is what the manager's Go runtime reports of its heap: the
// bytes allocated since it started and the collections run.
type heapWork struct{ allocated, collections int64 }

func (m *managerProcess) heapWork(t *testing.T) heapWork {
	v, err := m.metrics("go_memstats_alloc_bytes_total", "go_gc_duration_seconds")
	if err != nil {
		t.Fatal(err)
	}
	return heapWork{int64(v["go_memstats_alloc_bytes_total"]), int64(v["go_gc_duration_seconds_count"])}
}

func (w heapWork) since(before heapWork) heapWork {
	return heapWork{w.allocated - before.allocated, w.collections - before.collections}
}

// idle reports whether neither controller, the grading nor the records
// writer has had work queued or running for idleFor: the work queues'
// unfinished-work gauges are updated every half second, so one scrape can
// miss a job just taken from its queue.
func (m *managerProcess) idle(t *testing.T) bool {
	// Only what quiet reads: the families of a catalog each (its
	// grading's, its quality's) would make each of the many scrapes of a
	// wait cost the manager as much as an edit of 500 catalogs' shape.
	v, err := m.metrics("workqueue_depth", "controller_runtime_active_workers", "workqueue_unfinished_work_seconds")
	if err != nil {
		t.Fatal(err)
	}
	if !m.quiet(v) {
		m.idleSince = time.Time{}
		return false
	}
	if m.idleSince.IsZero() {
		m.idleSince = time.Now()
	}
	return time.Since(m.idleSince) >= idleFor
}

// watchingCost is the share of a core the idle manager spends while the
// harness watches it as it watches an edit (a metrics scrape every 250 ms
// until it has looked idle for idleFor): what an edit's CPU figure holds
// that the edit did not cost.
func (m *managerProcess) watchingCost(t *testing.T) float64 {
	waitIdle(t, "the manager idle", time.Minute, func() bool { return m.idle(t) })
	m.idleSince = time.Time{}
	cpu0, start := m.cpu(t), time.Now()
	waitIdle(t, "the manager idle again", time.Minute, func() bool { return m.idle(t) })
	return float64(m.cpu(t)-cpu0) / float64(time.Since(start))
}

// idleFor is how long the manager must look idle to be idle: longer than
// the pause between the parts of a grading (the controllers' gradeRetry,
// a second), during which no queue holds the rest.
const idleFor = 2500 * time.Millisecond

func (m *managerProcess) quiet(v map[string]float64) bool {
	return v["workqueue_depth/toolcatalog"] == 0 && v["workqueue_depth/tooldefinition"] == 0 &&
		v["controller_runtime_active_workers/toolcatalog"] == 0 && v["controller_runtime_active_workers/tooldefinition"] == 0 &&
		v["workqueue_depth/toolcatalog-grade"] == 0 && v["workqueue_unfinished_work_seconds/toolcatalog-grade"] == 0 &&
		v["workqueue_depth/toolcatalog-records"] == 0 && v["workqueue_unfinished_work_seconds/toolcatalog-records"] == 0
}

// ---- the provider ----

var countLine = regexp.MustCompile(`Write (\d+) distinct user requests`)

// newProvider answers chat requests after latency with queries that depend
// on the prompt only, and embeddings at once. For distinct tools a tool's
// queries share no words with another's and every text has a vector of
// its own; for alike tools the queries say the tool's description in other
// words and a text's vector is the sum of its words', so tools of one
// family retrieve one another as they would with a real model.
func newProvider(t *testing.T, latency time.Duration, sh shape) *openaitest.Server {
	p := openaitest.New(t)
	p.OnChat = func(w http.ResponseWriter, r *http.Request, _ int, req openaitest.ChatRequest) {
		select {
		case <-time.After(latency):
		case <-r.Context().Done():
			return
		}
		prompt := req.Messages[len(req.Messages)-1].Content
		m := countLine.FindStringSubmatch(prompt)
		if m == nil {
			openaitest.WriteError(w, http.StatusBadRequest, "invalid_request_error", "", "prompt without a count")
			return
		}
		count, _ := strconv.Atoi(m[1])
		if sh == shared {
			openaitest.WriteChat(w, req.Model, openaitest.QueriesJSON(shapes.Queries(prompt, count)...))
			return
		}
		if sh == alike {
			openaitest.WriteChat(w, req.Model, openaitest.QueriesJSON(alikeQueries(prompt, count)...))
			return
		}
		// Each tool's own queries: a hash of its whole prompt, not of
		// something tools share (its length), which gave every tool of a
		// large catalog one of a few query sets.
		h := fnv.New32a()
		h.Write([]byte(prompt))
		qs := make([]string, count)
		for i := range qs {
			qs[i] = fmt.Sprintf("request %d for %x", i+1, h.Sum32()+uint32(i))
		}
		openaitest.WriteChat(w, req.Model, openaitest.QueriesJSON(qs...))
	}
	p.OnEmbeddings = func(w http.ResponseWriter, _ *http.Request, _ int, req openaitest.EmbeddingsRequest) {
		if sh == alike || sh == shared {
			openaitest.WriteEmbeddingsWith(w, req, func(text string) []float64 { return openaitest.WordsVector(text, *dimsFlag) }, nil)
			return
		}
		openaitest.WriteEmbeddings(w, req, *dimsFlag, nil)
	}
	return p
}

var (
	descriptionLine = regexp.MustCompile(`(?m)^Description: (.*)$`)
	serviceWords    = regexp.MustCompile(` in service \d+.*`)
)

// alikeQueries are count requests for the tool the prompt describes, in
// the words of its description but for the service, which users do not
// name: each fits the same tool of every service as well as its own.
func alikeQueries(prompt string, count int) []string {
	desc := "the tool"
	if m := descriptionLine.FindStringSubmatch(prompt); m != nil {
		desc = strings.ToLower(serviceWords.ReplaceAllString(m[1], ""))
	}
	asks := []string{"can you %s", "I need to %s", "please %s for me", "how do I %s", "%s right now", "help me %s"}
	qs := make([]string, count)
	for i := range qs {
		qs[i] = fmt.Sprintf(asks[i%len(asks)], desc)
	}
	return qs
}

// shape is how a catalog's tools look.
type shape string

const (
	// distinct tools have words and vectors of their own.
	distinct shape = "distinct"
	// alike tools come from templates in families, as generated tool
	// families do: most of their words are another tool's too.
	alike shape = "alike"
	// shared tools have long descriptions from templates over verbs,
	// nouns and systems, three parameters (one an undescribed enum), a
	// toolset per verb, and generated requests drawn from a fixed 20 (a
	// third of them asking for two things), so that many tools share each
	// request and its intents: the shape of a large generated API surface.
	shared shape = "shared"
)

var (
	alikeVerbs    = []string{"Get", "Update", "List", "Delete", "Export"}
	alikeFields   = []string{"status", "owner", "address", "history", "notes", "tags", "balance", "due date", "priority", "region"}
	alikeEntities = []string{"customer", "invoice", "order", "ticket", "shipment", "account", "payment", "product", "subscription", "user",
		"contract", "lead", "campaign", "asset", "device", "incident", "project", "task", "vendor", "warehouse"}
)

// description is tool i's description.
func (sh shape) description(name string, i int) string {
	switch sh {
	case alike:
		return alikeDescription(i, "")
	case shared:
		return shapes.Description(i)
	}
	return fmt.Sprintf("Tool %s does one specific thing, number %d, for the users who ask for it.", name, i)
}

// alikeDescription is alike tool i's description, with more words about
// the record when there are any.
func alikeDescription(i int, more string) string {
	e, f := i%len(alikeEntities), i/len(alikeEntities)%len(alikeFields)
	v := i / (len(alikeEntities) * len(alikeFields)) % len(alikeVerbs)
	service := i / (len(alikeEntities) * len(alikeFields) * len(alikeVerbs))
	return fmt.Sprintf("%s the %s of a %s record%s in service %d.", alikeVerbs[v], alikeFields[f], alikeEntities[e], more, service)
}

// edited is tool i's description after its edit-th edit: for alike tools,
// one the requests for it name.
func (sh shape) edited(name string, i, edit int) string {
	switch sh {
	case alike:
		return alikeDescription(i, fmt.Sprintf(" and its revision %d", edit))
	case shared:
		return shapes.Description(i) + shapes.Edit
	}
	return fmt.Sprintf("Tool %s, edited %d times: it does one specific thing better.", name, edit)
}

// ---- objects ----

func namespace(t *testing.T, prefix string) string {
	ns := fmt.Sprintf("scale-%s-%d", prefix, time.Now().UnixNano()%1e6)
	if err := kube.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return ns
}

func channel(ns string) string { return "toolcatalog:scale:" + ns }

func catalogObject(ns, name string, p *openaitest.Server) *v1alpha1.ToolCatalog {
	dims := int32(*dimsFlag)
	return &v1alpha1.ToolCatalog{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.ToolCatalogSpec{
			Selector:        metav1.LabelSelector{MatchLabels: map[string]string{label: name}},
			Redis:           v1alpha1.RedisSpec{Addresses: []string{redisSrv.Addr}},
			Embedding:       v1alpha1.EmbeddingSpec{Provider: v1alpha1.ProviderOpenAI, Model: "text-embedding-3-small", BaseURL: p.BaseURL(), Dimensions: dims},
			QueryGeneration: v1alpha1.QueryGenerationSpec{Provider: v1alpha1.ProviderOpenAI, Models: []string{"gpt-4o-mini"}, BaseURL: p.BaseURL(), QueriesPerTool: queriesPerTool},
			Publish:         v1alpha1.PublishSpec{Channel: channel(ns)},
		},
	}
}

// applyTools creates n ToolDefinitions at once, as kubectl apply of a
// directory or a GitOps sync does.
func applyTools(t *testing.T, ns, catalog string, n int, sh shape) {
	createAll(t, n, func(i int) client.Object {
		name := fmt.Sprintf("tool-%05d", i)
		spec := v1alpha1.ToolDefinitionSpec{
			Name:        strings.ReplaceAll(name, "-", "_"),
			Description: sh.description(name, i),
			Parameters:  &apiextensionsv1.JSON{Raw: []byte(toolParameters)},
		}
		if sh == shared {
			verb, noun, _ := shapes.Words(i)
			spec.Name = fmt.Sprintf("%s_%s_%d", strings.ToLower(verb), noun, i)
			spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(shapes.Parameters)}
			spec.Toolset = strings.ToLower(verb)
		}
		return &v1alpha1.ToolDefinition{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{label: catalog}},
			Spec:       spec,
		}
	})
}

// toolParameters is the parameters schema of the measured tools.
const toolParameters = `{"type":"object","properties":{"query":{"type":"string","description":"what to look for"},` +
	`"limit":{"type":"integer","description":"how many results"}},"required":["query"]}`

// createAll creates the n objects object(i) returns, 16 at a time, in
// order of i as far as the workers keep it.
func createAll(t *testing.T, n int, object func(i int) client.Object) {
	next := make(chan int)
	var wg sync.WaitGroup
	var failed sync.Once
	var firstErr error
	for range 16 {
		wg.Go(func() {
			for i := range next {
				if err := kube.Create(t.Context(), object(i)); err != nil {
					failed.Do(func() { firstErr = err })
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
}

// waitHashed waits until the ToolDefinition controller has validated and
// hashed every tool, so the catalog finds them all on its first pass.
func waitHashed(t *testing.T, ns string, n int) {
	waitFor(t, "every ToolDefinition hashed", 10*time.Minute, func() bool {
		list := &v1alpha1.ToolDefinitionList{}
		if err := kube.List(t.Context(), list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		hashed := 0
		for _, td := range list.Items {
			if td.Status.SpecHash != "" {
				hashed++
			}
		}
		return hashed == n
	})
}

func getCatalog(t *testing.T, ns, name string) *v1alpha1.ToolCatalog {
	tc := &v1alpha1.ToolCatalog{}
	if err := kube.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, tc); err != nil {
		t.Fatal(err)
	}
	return tc
}

// docTools counts the tools of the published version: P:head's
// tool_count, or the tools of a contract-1 P:catalog.
func docTools(t *testing.T, ns, name string) int {
	k := contract.Keys{Prefix: contract.DefaultPrefix(ns, name)}
	if raw, err := redisSrv.Client().Get(t.Context(), k.Head()).Bytes(); err == nil {
		var head struct {
			ToolCount int `json:"tool_count"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			t.Fatal(err)
		}
		return head.ToolCount
	}
	raw, err := redisSrv.Client().Get(t.Context(), k.Catalog()).Bytes()
	if err != nil {
		return 0
	}
	var doc struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	return len(doc.Tools)
}

// cleanup deletes what a scenario created; envtest has no namespace
// controller, so the objects go one kind at a time. The ToolDefinitions
// go first: a catalog deleted before them would clear its record from
// each one before it goes, one write per tool.
func cleanup(t *testing.T, ns string) {
	ctx := context.Background()
	// A collection delete of many objects can outlast one request; it
	// goes on, and is asked for again until nothing is left. 100,000
	// of them take as long to go as to become Ready.
	waitFor(t, "the ToolDefinitions gone", max(10*time.Minute, *readyFlag), func() bool {
		_ = kube.DeleteAllOf(ctx, &v1alpha1.ToolDefinition{}, client.InNamespace(ns))
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("ToolDefinitionList"))
		return kube.List(ctx, l, client.InNamespace(ns), client.Limit(1)) == nil && len(l.Items) == 0
	})
	list := &v1alpha1.ToolCatalogList{}
	if err := kube.List(ctx, list, client.InNamespace(ns)); err == nil {
		for i := range list.Items {
			_ = kube.Delete(ctx, &list.Items[i])
		}
	}
	waitFor(t, "the catalogs gone", 5*time.Minute, func() bool {
		l := &v1alpha1.ToolCatalogList{}
		return kube.List(ctx, l, client.InNamespace(ns)) == nil && len(l.Items) == 0
	})
}

// storedSize says how large the stored tools are (P:tools, or a
// contract-1 P:catalog) and how much the kept versions take.
func storedSize(t *testing.T, k contract.Keys) string {
	ctx := t.Context()
	rc := redisSrv.Client()
	var tools, versions int64
	if rc.Exists(ctx, k.Head()).Val() == 1 {
		for _, v := range rc.HGetAll(ctx, k.Tools()).Val() {
			tools += int64(len(v))
		}
	} else {
		tools = rc.StrLen(ctx, k.Catalog()).Val()
	}
	for _, pattern := range []string{k.Prefix + ":catalog:v*", k.Prefix + ":changes:v*"} {
		for _, key := range rc.Keys(ctx, pattern).Val() {
			versions += rc.StrLen(ctx, key).Val()
		}
	}
	return fmt.Sprintf("%s / %s", mib(tools), mib(versions))
}

// storeSize says how many entries the namespace's query store holds
// (internal/querystore) and how large their values are.
func storeSize(t *testing.T, ns string) string {
	ctx := t.Context()
	rc := redisSrv.Client()
	var keys []string
	iter := rc.Scan(ctx, 0, "toolcatalog:store:"+ns+":*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	cmds := make([]*redis.IntCmd, len(keys))
	_, _ = rc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.StrLen(ctx, k)
		}
		return nil
	})
	var size int64
	for _, c := range cmds {
		size += c.Val()
	}
	return fmt.Sprintf("%d / %s", len(keys), mib(size))
}

// ---- notices ----

type noticeLog struct {
	mu sync.Mutex
	at map[int64]time.Time
}

// noticeTimes records when each version of the namespace's catalog is
// announced.
func noticeTimes(t *testing.T, ns string) *noticeLog { return noticeTimesOn(t, channel(ns), "") }

// noticeTimesOn records when each version of catalog ("namespace/name",
// any when empty) is announced on a channel.
func noticeTimesOn(t *testing.T, channel, catalog string) *noticeLog {
	l := &noticeLog{at: map[int64]time.Time{}}
	sub := redisSrv.Client().Subscribe(t.Context(), channel)
	if _, err := sub.Receive(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	go func() {
		for msg := range sub.Channel() {
			var n contract.Notice
			if json.Unmarshal([]byte(msg.Payload), &n) == nil && (catalog == "" || n.Catalog == catalog) {
				l.mu.Lock()
				l.at[n.Version] = time.Now()
				l.mu.Unlock()
			}
		}
	}()
	return l
}

// firstSince is when the first version announced at or after t0 was.
func (l *noticeLog) firstSince(t0 time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first time.Time
	for _, at := range l.at {
		if !at.Before(t0) && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first, !first.IsZero()
}

// worstLag says how many versions were announced and the longest time
// from a notice until the status showed that version (or a later one).
func (l *noticeLog) worstLag(shown map[int64]time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var worst time.Duration
	for v, noticed := range l.at {
		var first time.Time
		for sv, at := range shown {
			if sv >= v && (first.IsZero() || at.Before(first)) {
				first = at
			}
		}
		if !first.IsZero() {
			worst = max(worst, first.Sub(noticed))
		}
	}
	return fmt.Sprintf("%d, %v", len(l.at), worst.Round(10*time.Millisecond))
}

type statusWrites struct {
	count atomic.Int64
	ready chan struct{}
	// lost is set when the watch ended and could not be resumed.
	lost atomic.Bool
	done chan struct{}
}

// watchStatusWrites counts the updates of ToolDefinitions that change
// their status, until all n are Ready. The API server may end a watch
// under a stream of thousands of events; the watch then resumes from a
// list of the namespace, counting each status that changed meanwhile as
// one write (a floor: a tool written twice in the gap counts once).
func watchStatusWrites(t *testing.T, ns string, n int) *statusWrites {
	ctx := t.Context()
	w, err := kube.Watch(ctx, &v1alpha1.ToolDefinitionList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	s := &statusWrites{ready: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		last := map[string]v1alpha1.ToolDefinitionStatus{}
		// ready says which tools are Ready; readyCount counts them, so
		// each event costs the same at 50,000 tools as at 100 (a slow
		// reader makes the API server end the watch).
		ready := map[string]bool{}
		readyCount := 0
		saw := func(td *v1alpha1.ToolDefinition, modified bool) bool {
			if modified && !equality.Semantic.DeepEqual(last[td.Name], td.Status) {
				s.count.Add(1)
			}
			last[td.Name] = td.Status
			now := meta.IsStatusConditionTrue(td.Status.Conditions, v1alpha1.ConditionReady)
			if now != ready[td.Name] {
				ready[td.Name] = now
				if now {
					readyCount++
				} else {
					readyCount--
				}
			}
			return readyCount == n
		}
		for {
			for ev := range w.ResultChan() {
				if td, ok := ev.Object.(*v1alpha1.ToolDefinition); ok && saw(td, ev.Type == watch.Modified) {
					close(s.ready)
					return
				}
			}
			if ctx.Err() != nil {
				return
			}
			list, listErr := listAll(ctx, ns)
			if listErr != nil {
				s.lost.Store(true)
				return
			}
			for i := range list.Items {
				_, seen := last[list.Items[i].Name]
				if saw(&list.Items[i], seen) {
					close(s.ready)
					return
				}
			}
			if w, err = kube.Watch(ctx, &v1alpha1.ToolDefinitionList{}, client.InNamespace(ns),
				&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}}); err != nil {
				s.lost.Store(true)
				return
			}
		}
	}()
	// The watches end with the test's context.
	return s
}

// listAll lists a namespace's ToolDefinitions in pages, each page tried
// again a few times: one list of 100,000 of them under a stream of writes
// may end before it is read.
func listAll(ctx context.Context, ns string) (*v1alpha1.ToolDefinitionList, error) {
	all := &v1alpha1.ToolDefinitionList{}
	next := ""
	for {
		page := &v1alpha1.ToolDefinitionList{}
		err := retry.OnError(wait.Backoff{Steps: 5, Duration: time.Second, Factor: 2}, func(error) bool { return ctx.Err() == nil }, func() error {
			return kube.List(ctx, page, client.InNamespace(ns), client.Limit(2000), client.Continue(next))
		})
		if err != nil {
			return nil, err
		}
		all.Items = append(all.Items, page.Items...)
		if next = page.Continue; next == "" {
			// The pages are of one snapshot: the last one's version is
			// the list's.
			all.ResourceVersion = page.ResourceVersion
			return all, nil
		}
	}
}

// wait waits until every ToolDefinition is Ready and returns the status
// writes counted.
func (s *statusWrites) wait(t *testing.T) int64 {
	select {
	case <-s.ready:
	case <-s.done:
		if !s.lost.Load() {
			t.Fatal("the status watch ended before every ToolDefinition was Ready")
		}
		t.Fatalf("the status watch could not be resumed after %d status writes", s.count.Load())
	case <-time.After(*readyFlag):
		t.Fatalf("not every ToolDefinition became Ready within %s (-scale.ready-timeout) after %d status writes", *readyFlag, s.count.Load())
	}
	return s.count.Load()
}

// ---- Redis ----

// netBytes is what Redis has received and sent in total.
func netBytes(t *testing.T) (in, out int64) {
	info, err := redisSrv.Client().Info(t.Context(), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "total_net_input_bytes:"); ok {
			in, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(line, "total_net_output_bytes:"); ok {
			out, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return in, out
}

func waitNotice(t *testing.T, notices <-chan *redis.Message, after int64) int64 {
	timeout := time.After(5 * time.Minute)
	for {
		select {
		case msg := <-notices:
			var n contract.Notice
			if err := json.Unmarshal([]byte(msg.Payload), &n); err != nil {
				t.Fatal(err)
			}
			if n.Version > after {
				return n.Version
			}
		case <-timeout:
			t.Fatalf("no notice after version %d", after)
		}
	}
}

func waitUpdate(t *testing.T, updates <-chan int64, version int64) {
	timeout := time.After(time.Minute)
	for {
		select {
		case v := <-updates:
			if v >= version {
				return
			}
		case <-timeout:
			t.Fatalf("the follower did not load version %d", version)
		}
	}
}

// ---- small things ----

type runtimeAlloc struct {
	total, heap int64
	// gcs and gcCPU are the collections so far and the CPU they took,
	// in seconds (runtime/metrics' estimate: marking, assists, pauses).
	gcs   uint32
	gcCPU float64
}

func (a *runtimeAlloc) read() {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	a.total, a.heap, a.gcs = int64(m.TotalAlloc), int64(m.HeapAlloc), m.NumGC
	gc := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(gc)
	a.gcCPU = gc[0].Value.Float64()
}

// retained is the heap a loaded catalog holds after a collection, over
// what was in use before it was loaded.
func retained(before runtimeAlloc, cat *toolcatalog.Catalog) int64 {
	runtime.GC()
	var now runtimeAlloc
	now.read()
	runtime.KeepAlive(cat)
	return now.heap - before.heap
}

// searchLatency searches the catalog with its default (hybrid) method,
// each query embedded by the provider's endpoint on loopback, and says
// the median and 99th percentile.
func searchLatency(t *testing.T, cat *toolcatalog.Catalog, p *openaitest.Server) string {
	emb, err := openaiquery.New(openaiquery.Config{BaseURL: p.BaseURL(), Model: cat.Document.Embedding.Model, Dimensions: cat.Document.Embedding.Dimensions})
	if err != nil {
		t.Fatal(err)
	}
	var took []time.Duration
	for i := range 200 {
		q := fmt.Sprintf("find the tool that does one specific thing, number %d, for me", i*37)
		start := time.Now()
		resp, err := cat.Search(t.Context(), q, toolcatalog.Options{Embedder: emb, TopK: 5})
		took = append(took, time.Since(start))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Method == toolcatalog.BM25 {
			t.Fatalf("the search fell back to BM25: %s", resp.Fallback)
		}
	}
	slices.Sort(took)
	return fmt.Sprintf("%v / %v", took[len(took)/2].Round(10*time.Microsecond), took[len(took)*99/100].Round(10*time.Microsecond))
}

var waitFor = testenv.WaitFor

// waitIdle waits for cond, checking it every 250 ms: cond scrapes the
// manager's metrics, which costs the CPU being measured.
func waitIdle(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	testenv.WaitEvery(t, what, timeout, 250*time.Millisecond, cond)
}

func median(xs []int64) int64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func medianDuration(xs []time.Duration) time.Duration {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func mib(b int64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
