// Package grading grades the versions the catalogs' passes publish, off
// the passes: it searches each sampled tool's own queries in the version
// and reports how often the tool comes first (self-recall), which tools
// others outrank and which pairs retrieve each other (confusable). It owns
// a ToolCatalog's status.quality and the gradings kept with the retained
// versions in Redis (P:quality), and it is fed by the passes' outcomes
// (Submit), not by watching status. It runs with the manager, on the
// leader.
package grading

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/internal/handoff"
	"github.com/toolcatalog/tool-catalog-operator/internal/metrics"
	"github.com/toolcatalog/tool-catalog-operator/internal/telemetry"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/selfgrade"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/text"
)

// Self-grading bounds: at most MaxTools tools are graded per version
// (changed tools first, then a sample stable across versions), and at most
// maxListed outranked tools and confusable pairs are listed.
const (
	MaxTools  = 200
	maxListed = 10
)

// gradeRetry is how soon a grading that left searches for later goes on.
const gradeRetry = time.Second

// Grades grades published versions off the catalogs' passes, one at a
// time: a pass hands over the version it published and goes on, its status
// written; a version superseded before its turn is not graded, the latest
// is. Each catalog keeps a selfgrade.Grader, so a version costs the
// searches its changes call for, and each grading at most the work of
// selfgrade.DefaultMaxSearches searches of a large catalog.
type Grades struct {
	*handoff.Queue[*gradeJob]
	client   client.Client
	recorder events.EventRecorder
	now      func() time.Time
	graded   func(tc *v1alpha1.ToolCatalog)

	// Idle, when set, is how long a catalog's grading state (its index,
	// kept query sets and outcomes) is kept without a grading: then it
	// leaves memory, and the catalog's next version is graded from
	// scratch, its query vectors read from the query store. Zero keeps
	// it until MaxBytes needs the room: an edit after a long quiet then
	// costs what it changed, and no more memory than the states held.
	Idle time.Duration
	// MaxBytes bounds the grading states of all catalogs together, as
	// their heap is estimated, DefaultMaxBytes when 0: past it the
	// states graded least recently leave memory (never the one just
	// graded), and those catalogs' next versions are graded from scratch.
	MaxBytes int64

	mu    sync.Mutex
	state map[client.ObjectKey]*gradeState
	// held is the estimated size of the states kept.
	held int64
}

// DefaultMaxBytes is MaxBytes when it is not set.
const DefaultMaxBytes = 128 << 20

// Published is what the grading reads of a catalog's published state in
// Redis and writes there (published.State).
type Published interface {
	// Kept is the stored state of a version read or published.
	Kept(version int64) (catalog.Stored, bool)
	// QueryVectors holds the query vectors the passes embedded.
	QueryVectors() *catalog.QueryVectors
	// Vectors reads published vectors.
	Vectors(ctx context.Context, names []string) (map[string]string, error)
	// RecordQuality keeps a version's grading with the retained ones.
	RecordQuality(ctx context.Context, q contract.Quality) error
}

// gradeJob is a published version to grade.
type gradeJob struct {
	version int64
	stored  catalog.Stored
	emb     embedding.Embedder
	// changed names the tools changed since the version last graded.
	changed map[string]bool
	// queries holds the query vectors the passes embedded.
	queries *catalog.QueryVectors
	// vectors reads the published vectors of tools.
	vectors func(ctx context.Context, names []string) (map[string]string, error)
	// record keeps the grading in Redis with the retained versions'.
	record func(ctx context.Context, q contract.Quality) error
	// rest says the version's grading is recorded, and this job does
	// the searches it left.
	rest bool
}

// gradeState is what a catalog's gradings carry from version to version.
type gradeState struct {
	grader selfgrade.Grader
	sets   map[string]selfgrade.QuerySet
	// graded names the stored state the grader last graded
	// (catalog.Lineage), 0 for none: a version derived from it is
	// indexed by looking at what changed since.
	graded uint64
	// order holds the gradable tools of the state sampled last.
	order sampleOrder
	// used is when a grading last used the state, in Unix nanoseconds.
	used atomic.Int64
	// bytes is the state's estimated size, as last charged.
	bytes int64
	// whole grades every gradable tool, not a sample (Whole).
	whole bool
}

// size estimates the heap a state holds: what its grader reports (the
// catalog's rows and text index, and per graded tool its query set,
// outcomes and kept rankings), and an eighth more, by which the
// allocator's size classes round objects up. The document and the tools'
// metadata are the published state's, which the manager keeps anyway.
func (st *gradeState) size() int64 {
	n := st.grader.Bytes() + int64(cap(st.order.list))*int64(unsafe.Sizeof(candidate{}))
	return n + n/8
}

// New returns the grading of a manager's catalogs: it writes their
// status.quality with c, warns of new confusable pairs through recorder,
// reads the time from now (time.Now when nil) and calls graded after each
// grading it records in status.
func New(c client.Client, recorder events.EventRecorder, now func() time.Time, graded func(tc *v1alpha1.ToolCatalog)) *Grades {
	if now == nil {
		now = time.Now
	}
	gs := &Grades{client: c, recorder: recorder, now: now, graded: graded, state: map[client.ObjectKey]*gradeState{}}
	gs.Queue = handoff.New[*gradeJob]("toolcatalog-grade", gs.run)
	return gs
}

// Submit hands over the version a pass left published, once per version
// and only when no work remains (a catalog being built is graded when it
// is complete). The tools a superseded job changed carry over to it.
func (gs *Grades) Submit(tc *v1alpha1.ToolCatalog, emb embedding.Embedder, st Published, out *catalog.Outcome) {
	if out == nil || out.Version == 0 || len(out.Remaining()) > 0 || len(out.Pending()) > 0 {
		return
	}
	if q := tc.Status.Quality; q != nil && q.Version == out.Version {
		return
	}
	stored, ok := st.Kept(out.Version)
	if !ok {
		return
	}
	key := client.ObjectKeyFromObject(tc)
	job := &gradeJob{version: out.Version, stored: stored, emb: emb, changed: map[string]bool{}, queries: st.QueryVectors(), vectors: st.Vectors, record: st.RecordQuality}
	for name := range out.Build.Vectors {
		job.changed[name] = true
	}
	gs.Put(key, func(prev *gradeJob, ok bool) (*gradeJob, bool) {
		if ok {
			if prev.version >= job.version {
				return prev, true
			}
			maps.Copy(job.changed, prev.changed)
		}
		return job, false
	})
}

// Start runs the gradings, and drops the state of catalogs no grading
// used for Idle when it is set, until ctx ends.
func (gs *Grades) Start(ctx context.Context) error {
	if idle := gs.Idle; idle > 0 {
		go wait.UntilWithContext(ctx, func(context.Context) { gs.dropIdle(idle) }, max(idle/4, 10*time.Millisecond))
	}
	return gs.Queue.Start(ctx)
}

// dropIdle drops the states no grading used for idle.
func (gs *Grades) dropIdle(idle time.Duration) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	for key, st := range gs.state {
		if time.Since(time.Unix(0, st.used.Load())) > idle {
			gs.drop(key)
		}
	}
}

// charge records the size of a catalog's state after a grading and, past
// MaxBytes, drops the states graded least recently but this one.
func (gs *Grades) charge(key client.ObjectKey, st *gradeState, bytes int64) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.state[key] != st {
		return // dropped while it graded
	}
	gs.held += bytes - st.bytes
	st.bytes = bytes
	limit := gs.MaxBytes
	if limit <= 0 {
		limit = DefaultMaxBytes
	}
	if gs.held <= limit {
		return
	}
	others := make([]client.ObjectKey, 0, len(gs.state))
	for k := range gs.state {
		if k != key {
			others = append(others, k)
		}
	}
	slices.SortFunc(others, func(a, b client.ObjectKey) int {
		return cmp.Compare(gs.state[a].used.Load(), gs.state[b].used.Load())
	})
	for _, k := range others {
		if gs.held <= limit {
			break
		}
		gs.drop(k)
	}
}

// drop forgets a catalog's state; gs.mu is held.
func (gs *Grades) drop(key client.ObjectKey) {
	if st := gs.state[key]; st != nil {
		gs.held -= st.bytes
		delete(gs.state, key)
	}
}

// heldBytes is the estimated size of the grading states kept.
func (gs *Grades) heldBytes() int64 {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.held
}

// Holds reports whether a catalog's grading state is in memory.
func (gs *Grades) Holds(key client.ObjectKey) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.state[key] != nil
}

// Forget drops what is kept for a catalog that is gone.
func (gs *Grades) Forget(key client.ObjectKey) {
	gs.Take(key)
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gs.drop(key)
}

// run grades the latest job of one catalog and writes its status.quality.
// A grading that cannot be done is logged and tried again with the next
// version; a status write that fails is retried with backoff.
func (gs *Grades) run(ctx context.Context, key client.ObjectKey) {
	job, ok := gs.Take(key)
	if !ok {
		return
	}
	gs.mu.Lock()
	st := gs.state[key]
	if st == nil {
		st = &gradeState{grader: selfgrade.New(0, 0)}
		gs.state[key] = st
	}
	st.used.Store(time.Now().UnixNano())
	gs.mu.Unlock()
	defer func() { st.used.Store(time.Now().UnixNano()) }()
	log := ctrl.Log.WithName("toolcatalog-grade").WithValues("ToolCatalog", key, "version", job.version)
	ctx = ctrl.LoggerInto(ctx, log)
	tc := &v1alpha1.ToolCatalog{}
	if err := gs.client.Get(ctx, key, tc); err != nil || !tc.DeletionTimestamp.IsZero() {
		return
	}
	if q := tc.Status.Quality; q != nil && (q.Version > job.version || q.Version == job.version && !job.rest) {
		return
	}
	ctx, span := telemetry.Tracer().Start(ctx, "ToolCatalog grade", trace.WithAttributes(
		attribute.String("toolcatalog.catalog", key.String()), attribute.Int64("toolcatalog.version", job.version)))
	defer span.End()
	start := time.Now()
	g, left, cpu, err := st.gradeOnThread(ctx, job)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		log.Error(err, "Cannot grade the catalog; grading the next version")
		return
	}
	took := time.Since(start)
	metrics.GradingDuration.WithLabelValues(key.String()).Observe(took.Seconds())
	if cpu >= 0 {
		metrics.GradingCPU.WithLabelValues(key.String()).Add(cpu)
	}
	metrics.GradingSearches.WithLabelValues(key.String()).Add(float64(g.Searched))
	metrics.GradingScans.WithLabelValues(key.String()).Add(float64(g.Scanned))
	gs.charge(key, st, st.size())
	log.V(1).Info("Graded", "searched", g.Searched, "scanned", g.Scanned, "graded", g.Queries, "left", left, "took", took.Round(time.Millisecond))
	base := tc.DeepCopy()
	tc.Status.Quality = qualityOf(g, job.version)
	if err := client.IgnoreNotFound(gs.client.Status().Patch(ctx, tc, client.MergeFrom(base))); err != nil {
		log.Error(err, "Cannot record the grading; retrying")
		gs.Retry(key, job)
		return
	}
	gs.Done(key)
	if gs.graded != nil {
		gs.graded(tc)
	}
	gs.recordConfusable(base, tc)
	id := tc.Namespace + "/" + tc.Name
	metrics.SelfRecall.WithLabelValues(id).Set(g.SelfRecallAt5)
	for kind, n := range map[string]int{"graded_tools": g.Tools, "graded_queries": g.Queries, "outranked_tools": len(g.Outranked), "confusable_pairs": len(g.Confusable)} {
		metrics.Quality.WithLabelValues(id, kind).Set(float64(n))
	}
	if g.Queries > 0 {
		q := contract.Quality{
			Version: job.version, SelfRecallAt5: g.SelfRecallAt5, GradedTools: g.Tools, GradedQueries: g.Queries,
			Outranked: len(g.Outranked), Confusable: len(g.Confusable), Graded: gs.now(),
		}
		if err := job.record(ctx, q); err != nil {
			// The status has it; only the chart of the versions misses it.
			log.Error(err, "Cannot keep the grading with the retained versions")
		}
	}
	if left > 0 {
		// The rest of this version's searches, after a pause that
		// bounds the grading's share of the CPU.
		gs.Continue(key, &gradeJob{version: job.version, stored: job.stored, emb: job.emb, changed: map[string]bool{}, queries: job.queries, vectors: job.vectors, record: job.record, rest: true}, gradeRetry)
	}
}

// Whole grades successive versions of one catalog, each from the one
// graded before as a manager's grading does, but every gradable tool of
// each in one go, with no bound on the searches, where a manager grades
// a sample of each in turn: the offline check's grading, the same code
// as the operator's. Not safe for concurrent use.
type Whole struct {
	st *gradeState
}

// NewWhole returns a Whole that has graded nothing yet.
func NewWhole() *Whole {
	return &Whole{st: &gradeState{grader: selfgrade.New(-1, 0), whole: true}}
}

// Grade grades a version: the first, or one published from the version
// graded last (catalog.Stored.Published), of which only what changed is
// indexed and searched again. vectors reads the version's raw vectors by
// tool; queries holds the query vectors its pass embedded.
func (w *Whole) Grade(ctx context.Context, stored catalog.Stored, emb embedding.Embedder, queries *catalog.QueryVectors, vectors func(ctx context.Context, names []string) (map[string]string, error)) (*selfgrade.Grading, error) {
	job := &gradeJob{version: stored.Version, stored: stored, emb: emb, changed: map[string]bool{}, queries: queries, vectors: vectors}
	g, _, err := w.st.grade(ctx, job)
	return g, err
}

// gradeOnThread grades a job on an OS thread of its own, and returns the
// CPU time that thread spent (-1 where it cannot be read): the grading's,
// but for the helpers a scan of every vector runs on other threads.
func (st *gradeState) gradeOnThread(ctx context.Context, job *gradeJob) (*selfgrade.Grading, int, float64, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0, ok0 := threadCPU()
	g, left, err := st.grade(ctx, job)
	cpu1, ok1 := threadCPU()
	if !ok0 || !ok1 {
		return g, left, -1, err
	}
	return g, left, cpu1 - cpu0, err
}

// grade grades a job's version from the last one graded: it indexes the
// version reusing the last index, reading only the vectors that changed
// (from Redis, after a later version may have replaced them: such a
// vector is indexed as it now is), or whole the first time, a chunk at a
// time, and embeds only the queries neither kept nor embedded by a pass.
func (st *gradeState) grade(ctx context.Context, job *gradeJob) (*selfgrade.Grading, int, error) {
	stored := job.stored
	read := func(names []string) (map[string]string, error) {
		vecs, err := job.vectors(ctx, names)
		if err != nil {
			return nil, fmt.Errorf("reading the vectors to grade: %w", err)
		}
		return vecs, nil
	}
	digest := func(name string) uint64 { return stored.Tools.Get(name).Vector }
	var touched []string
	if changed, ok := stored.Lineage().ChangedSince(st.graded); ok {
		touched = make([]string, 0, len(changed))
		for name := range changed {
			touched = append(touched, name)
		}
	}
	st.graded = 0
	if err := st.grader.Index(stored.Doc, gradeReadChunk, digest, touched, read); err != nil {
		return nil, 0, err
	}
	sample := st.order.sample(stored, job.changed)
	if st.whole {
		sample = nil
		for _, t := range stored.Doc.Tools {
			if tool, ok := stored.Tools.Lookup(t.Name); gradable(tool, ok) {
				sample = append(sample, t.Name)
			}
		}
	}
	sets := make(map[string]selfgrade.QuerySet, len(sample))
	// A query of several intents is searched by its intents too, which
	// are embedded once, with the query, and kept with it.
	intents := func(q string) []string {
		if stored.Doc.Search.Intents == toolcatalog.IntentsOff {
			return nil
		}
		return text.Intents(q)
	}
	var texts []string
	for _, name := range sample {
		qs := ownQueries(stored.Tools.Get(name).Metadata)
		if kept, ok := st.sets[name]; ok && slices.Equal(kept.Queries, qs) && (kept.IntentVectors != nil) == hasIntents(qs, intents) {
			sets[name] = kept
			continue
		}
		texts = append(texts, qs...)
		for _, q := range qs {
			texts = append(texts, intents(q)...)
		}
	}
	model := job.emb.Model()
	found, missing := job.queries.Take(model, texts)
	if len(missing) > 0 {
		vecs, embedErr := job.emb.Embed(ctx, missing)
		if embedErr != nil {
			return nil, 0, fmt.Errorf("embedding the queries to grade: %w", embedErr)
		}
		for i, t := range missing {
			found[t] = vecs[i]
		}
	}
	for _, name := range sample {
		if _, ok := sets[name]; ok {
			continue
		}
		qs := ownQueries(stored.Tools.Get(name).Metadata)
		set := selfgrade.QuerySet{Queries: qs, Vectors: make([][]float32, len(qs))}
		for i, q := range qs {
			set.Vectors[i] = found[q]
			for _, in := range intents(q) {
				if set.IntentVectors == nil {
					set.IntentVectors = map[int][][]float32{}
				}
				set.IntentVectors[i] = append(set.IntentVectors[i], found[in])
			}
		}
		sets[name] = set
	}
	g, left, err := st.grader.Grade(ctx, sets)
	if err != nil {
		return nil, 0, err
	}
	st.sets, st.graded = sets, stored.Lineage().Gen()
	return g, left, nil
}

// gradeReadChunk is how many tools' vectors a first index reads at a time.
const gradeReadChunk = 1000

// hasIntents reports whether any of qs asks for several things.
func hasIntents(qs []string, intents func(string) []string) bool {
	return slices.ContainsFunc(qs, func(q string) bool { return len(intents(q)) > 0 })
}

// ownQueries are the queries a tool's vector was built from.
func ownQueries(m *contract.Metadata) []string {
	return append(slices.Clip(m.SyntheticQueries), m.LearnedQueries...)
}

// candidate is a gradable tool and its rank in the sample's order.
type candidate struct {
	name string
	rank uint64
}

// rank places a tool in the sample's order, fixed by its name.
func rank(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}

// byRank orders candidates by rank, then name.
func byRank(a, b candidate) int {
	return cmp.Or(cmp.Compare(a.rank, b.rank), strings.Compare(a.name, b.name))
}

// gradable reports whether a stored tool has a query set to grade.
func gradable(st catalog.StoredTool, ok bool) bool {
	return ok && st.Metadata != nil && len(st.Metadata.SyntheticQueries) >= 2
}

// sampleOrder is a catalog's gradable tools in the sample's order, kept
// from one grading to the next: the sample of a version published from
// the one sampled last is picked from it, with the tools that publish
// changed moved, rather than by a walk of every tool.
type sampleOrder struct {
	// gen is the stored state the order is of (catalog.Lineage), 0 for
	// none; list its gradable tools by rank.
	gen  uint64
	list []candidate
}

// sample is gradingSample of stored, picked from the order of the state
// sampled last when stored was published from it.
func (o *sampleOrder) sample(stored catalog.Stored, changed map[string]bool) []string {
	touched, known := stored.Lineage().ChangedSince(o.gen)
	inDoc := func(name string) bool {
		_, ok := slices.BinarySearchFunc(stored.Doc.Tools, name, func(t contract.Tool, name string) int { return strings.Compare(t.Name, name) })
		return ok
	}
	switch {
	case o.gen != 0 && known:
		for name := range touched {
			c := candidate{name, rank(name)}
			if i, found := slices.BinarySearchFunc(o.list, c, byRank); found {
				o.list = slices.Delete(o.list, i, i+1)
			}
			if st, ok := stored.Tools.Lookup(name); gradable(st, ok) && inDoc(name) {
				i, _ := slices.BinarySearchFunc(o.list, c, byRank)
				o.list = slices.Insert(o.list, i, c)
			}
		}
	case slices.IsSortedFunc(stored.Doc.Tools, contract.ByName):
		// Looked up by name in the document from now on.
		o.list = o.list[:0]
		for _, t := range stored.Doc.Tools {
			if st, ok := stored.Tools.Lookup(t.Name); gradable(st, ok) {
				o.list = append(o.list, candidate{t.Name, rank(t.Name)})
			}
		}
		slices.SortFunc(o.list, byRank)
	default:
		o.gen, o.list = 0, nil
		return gradingSample(stored, changed)
	}
	o.gen = stored.Lineage().Gen()
	if len(o.list) <= MaxTools {
		return gradingSample(stored, changed) // every one, in the document's order
	}
	var picked []candidate
	for name := range changed {
		if st, ok := stored.Tools.Lookup(name); gradable(st, ok) && inDoc(name) {
			picked = append(picked, candidate{name, rank(name)})
		}
	}
	slices.SortFunc(picked, byRank)
	names := make([]string, 0, MaxTools)
	for _, c := range picked[:min(len(picked), MaxTools)] {
		names = append(names, c.name)
	}
	for _, c := range o.list {
		if len(names) == MaxTools {
			break
		}
		if !changed[c.name] {
			names = append(names, c.name)
		}
	}
	return names
}

// gradingSample names the tools to grade: all with a stored query set when
// they fit, else the changed tools, then the others in an order fixed by
// their names, so consecutive versions grade the same tools and reuse
// their outcomes and query vectors.
func gradingSample(stored catalog.Stored, changed map[string]bool) []string {
	// One walk of the catalog keeps the changed tools and, in rank
	// order, the unchanged ones of lowest rank that may follow them: a
	// version of 100,000 tools picks its 200 without sorting the others.
	var picked, rest []candidate
	var inOrder []string // every gradable tool, while they fit
	count := 0
	for _, t := range stored.Doc.Tools {
		if st, ok := stored.Tools.Lookup(t.Name); !gradable(st, ok) {
			continue
		}
		if count++; count <= MaxTools {
			inOrder = append(inOrder, t.Name)
		}
		c := candidate{t.Name, rank(t.Name)}
		if changed[t.Name] {
			picked = append(picked, c)
			continue
		}
		if len(rest) == MaxTools && byRank(c, rest[MaxTools-1]) >= 0 {
			continue
		}
		i, _ := slices.BinarySearchFunc(rest, c, byRank)
		rest = slices.Insert(rest[:min(len(rest), MaxTools-1)], i, c)
	}
	if count <= MaxTools {
		return inOrder
	}
	names := make([]string, 0, MaxTools)
	slices.SortFunc(picked, byRank)
	for _, c := range append(picked, rest...) {
		if len(names) == MaxTools {
			break
		}
		names = append(names, c.name)
	}
	return names
}

// qualityOf is a grading as status.
func qualityOf(g *selfgrade.Grading, version int64) *v1alpha1.CatalogQuality {
	q := &v1alpha1.CatalogQuality{
		Version: version, GradedTools: int32(g.Tools), GradedQueries: int32(g.Queries),
		OutrankedCount: int32(len(g.Outranked)),
	}
	if g.Queries > 0 {
		q.SelfRecallAt5 = strconv.FormatFloat(g.SelfRecallAt5, 'f', 3, 64)
	}
	for _, o := range g.Outranked[:min(len(g.Outranked), maxListed)] {
		q.Outranked = append(q.Outranked, v1alpha1.OutrankedTool{Tool: o.Tool, Missed: int32(o.Missed), Queries: int32(o.Queries), By: o.By})
	}
	for _, p := range g.Confusable[:min(len(g.Confusable), maxListed)] {
		q.ConfusablePairs = append(q.ConfusablePairs, v1alpha1.ConfusablePair{Tools: []string{p.A, p.B}, Similarity: similarity(p.Similarity)})
	}
	return q
}

func similarity(s float64) string { return strconv.FormatFloat(s, 'f', 2, 64) }

// recordConfusable warns of each confusable pair a grading found that the
// previous one did not.
func (gs *Grades) recordConfusable(base, tc *v1alpha1.ToolCatalog) {
	seen := map[string]bool{}
	if q := base.Status.Quality; q != nil {
		for _, p := range q.ConfusablePairs {
			seen[strings.Join(p.Tools, "\x00")] = true
		}
	}
	for _, p := range tc.Status.Quality.ConfusablePairs {
		if len(p.Tools) != 2 || seen[strings.Join(p.Tools, "\x00")] {
			continue
		}
		gs.recorder.Eventf(tc, nil, corev1.EventTypeWarning, v1alpha1.ReasonConfusableTools, "Grade",
			"tools %s and %s are confusable: the queries of each retrieve the other (similarity %s); reword one description so a model can tell them apart",
			p.Tools[0], p.Tools[1], p.Similarity)
	}
}
