package toolsource

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/egress"
	"github.com/toolcatalog/tool-catalog-operator/internal/kube/crkube"
	"github.com/toolcatalog/tool-catalog-operator/internal/mcpsource"
	"github.com/toolcatalog/tool-catalog-operator/internal/reconcile"
	"github.com/toolcatalog/tool-catalog-operator/internal/secrets"
	"github.com/toolcatalog/tool-catalog-operator/internal/serverref"
)

// FieldOwner is the field manager of the ToolDefinitions a source
// applies.
const FieldOwner = "toolcatalog.dev/tool-source"

// defaultSyncInterval is how often tools are listed when spec.syncInterval
// is unset.
const defaultSyncInterval = 5 * time.Minute

// DefaultSyncTimeout bounds how long one sync talks to its server.
const DefaultSyncTimeout = 2 * time.Minute

// Reconciler imports the tools of MCP servers as ToolDefinitions.
type Reconciler struct {
	client.Client
	// APIReader reads Secrets from the API server: the manager caches
	// only their metadata.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Egress decides which servers may be reached; egress.Default() when
	// nil.
	Egress *egress.Policy
	// Servers follows spec.mcp.serverRef; one reading through APIReader
	// with the defaults when nil.
	Servers *serverref.Resolver
	// MaxTools bounds the tools one source lists (mcpsource.DefaultMaxTools
	// when zero), SyncTimeout the time one sync may talk to its server
	// (DefaultSyncTimeout when zero).
	MaxTools    int
	SyncTimeout time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	mu sync.Mutex
	// sessions are the live sessions by source, kept open so the server's
	// notifications/tools/list_changed reaches changed.
	sessions map[string]*liveSession
	changed  chan event.GenericEvent
}

type liveSession struct {
	fingerprint string
	session     *mcpsource.Session
}

// +kubebuilder:rbac:groups=toolcatalog.dev,resources=toolsources,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=toolcatalog.dev,resources=toolsources/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=toolcatalog.dev,resources=toolsources/finalizers,verbs=update
// +kubebuilder:rbac:groups=toolcatalog.dev,resources=tooldefinitions,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=toolcatalog.dev,resources=toolsourceapprovals,verbs=get;list;watch;delete

// Reconcile lists the source's tools and makes its ToolDefinitions match.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// Read from the API server, not the cache: the record in status of
	// what the last sync created must be the one it wrote, or that sync's
	// ToolDefinitions would look like somebody else's.
	ts := &v1alpha1.ToolSource{}
	if err := r.APIReader.Get(ctx, req.NamespacedName, ts); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.String())
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ts.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.delete(ctx, ts)
	}
	if err := reconcile.EnsureFinalizer(ctx, r.Client, ts); err != nil {
		return ctrl.Result{}, err
	}
	interval := defaultSyncInterval
	if d := ts.Spec.SyncInterval; d != nil && d.Duration > 0 {
		interval = d.Duration
	}
	base := ts.DeepCopy()
	err := r.sync(ctx, ts)
	if se := reconcile.As(err); se != nil {
		reconcile.SetFailed(ts, se, v1alpha1.ConditionSynced)
		if se.Kind == reconcile.Stalled {
			// Only a change can fix it: this generation has its answer.
			ts.Status.ObservedGeneration = ts.Generation
		}
	} else if err == nil {
		// Only a successful sync observes a generation: until then, the
		// tools a changed spec selects are the user's own choice and are
		// imported without approval.
		ts.Status.ObservedGeneration = ts.Generation
		ts.Status.SelectionHash = mcpsource.SelectionHash(ts.Spec)
	}
	reconcile.Summarize(ts, reconcile.Summary{Owned: []string{v1alpha1.ConditionSynced}, Err: err})
	reconcile.RecordReady(r.Recorder, base, ts, "Sync")
	// The record of what the sync created is the only proof that the
	// source created it: a write that fails is tried again at once.
	if perr := retry.OnError(retry.DefaultBackoff, func(error) bool { return true }, func() error {
		return reconcile.PatchStatus(ctx, r.Client, base, ts)
	}); perr != nil {
		return ctrl.Result{}, perr
	}
	if err == nil {
		// What the sync applied is recorded: its approvals are spent.
		r.spendApprovals(ctx, ts)
	}
	// A server that is down or refused us is tried again sooner than the
	// interval, never later.
	return reconcile.RequeueFor(err, interval, min(interval, 30*time.Second))
}

// sync lists the tools and applies the ToolDefinitions. A failure is a
// *reconcile.Error: the spec or a Secret to fix (stalled), the MCP server
// (waiting), or the API server (transient).
func (r *Reconciler) sync(ctx context.Context, ts *v1alpha1.ToolSource) error {
	fail := func(reason, message string, err error) error {
		return &reconcile.Error{Kind: reconcile.Waiting, Reason: reason, Message: message, Err: err}
	}
	cfg, err := r.connection(ctx, ts)
	if unusable := (*secrets.UnusableError)(nil); errors.As(err, &unusable) {
		return &reconcile.Error{Kind: reconcile.Stalled, Reason: v1alpha1.ReasonSecretNotFound, Message: unusable.Message + "; the ToolDefinitions already imported are kept", Err: err}
	}
	if err != nil {
		return &reconcile.Error{Kind: reconcile.Stalled, Reason: v1alpha1.ReasonInvalidConfiguration, Message: err.Error(), Err: err}
	}
	if followErr := r.follow(ctx, ts, &cfg); followErr != nil {
		return followErr
	}
	url := cfg.URL
	timeout := cmp.Or(r.SyncTimeout, DefaultSyncTimeout)
	talk, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	s, err := r.session(talk, ts, cfg)
	if err == nil {
		var tools []*mcp.Tool
		if tools, err = s.Tools(talk, r.MaxTools); err == nil {
			return r.importTools(ctx, ts, s, url, tools)
		}
	}
	r.forget(sourceKey(ts).String())
	if errors.Is(err, mcpsource.ErrListTooLarge) || errors.Is(err, mcpsource.ErrResponseTooLarge) {
		return fail(v1alpha1.ReasonSyncLimitExceeded, fmt.Sprintf("MCP server %s: %v: select fewer tools with spec.include or spec.exclude; the ToolDefinitions already imported are kept", url, err), err)
	}
	if errors.Is(err, mcpsource.ErrTooManyTools) {
		return fail(v1alpha1.ReasonSyncLimitExceeded, fmt.Sprintf("MCP server %s: %v (--source-max-tools %d): select fewer with spec.include or spec.exclude; the ToolDefinitions already imported are kept", url, err, cmp.Or(r.MaxTools, mcpsource.DefaultMaxTools)), err)
	}
	if talk.Err() != nil && ctx.Err() == nil {
		return fail(v1alpha1.ReasonServerUnreachable, fmt.Sprintf("MCP server %s did not finish listing its tools within %s; the ToolDefinitions already imported are kept, retrying", url, timeout), err)
	}
	if errors.Is(err, egress.ErrDenied) {
		return fail(v1alpha1.ReasonEgressDenied, fmt.Sprintf("MCP server %s may not be reached: %v; ask the platform operators to allow it (--egress-allow) or use another URL; the ToolDefinitions already imported are kept", url, errors.Unwrap(err)), err)
	}
	if errors.Is(err, mcpsource.ErrUnauthorized) {
		return fail(v1alpha1.ReasonAuthFailed, fmt.Sprintf("MCP server %s refused the credentials: check spec.mcp.bearerTokenSecretRef and headers; the ToolDefinitions already imported are kept", url), err)
	}
	return fail(v1alpha1.ReasonServerUnreachable, fmt.Sprintf("cannot list the tools of MCP server %s: %v; the ToolDefinitions already imported are kept, retrying", url, cfg.Redact(err)), err)
}

// importTools converts the listed tools, applies what the change policy
// allows and records the sync in the status.
func (r *Reconciler) importTools(ctx context.Context, ts *v1alpha1.ToolSource, s *mcpsource.Session, url string, tools []*mcp.Tool) error {
	imported, rejected, err := mcpsource.Convert(tools, mcpsource.Options{Prefix: ts.Spec.ToolNamePrefix, Include: ts.Spec.Include, Exclude: ts.Spec.Exclude,
		ToolSource: ts.Name, URL: url})
	if err != nil {
		return &reconcile.Error{Kind: reconcile.Stalled, Reason: v1alpha1.ReasonInvalidConfiguration, Message: err.Error(), Err: err}
	}
	approvals, err := r.approvals(ctx, ts)
	if err != nil {
		return &reconcile.Error{Kind: reconcile.Transient, Reason: v1alpha1.ReasonApplyFailed, Err: err,
			Message: fmt.Sprintf("cannot read the approvals of this source: %v; the ToolDefinitions already imported are kept, retrying with backoff", err)}
	}
	res, err := r.apply(ctx, ts, imported, rejected, approvals.set)
	if res != nil && res.record != nil {
		// Even after a failure: what was created is the source's.
		ts.Status.Imported = res.record
	}
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Applying the tools of a source")
		return &reconcile.Error{Kind: reconcile.Transient, Reason: v1alpha1.ReasonApplyFailed, Err: err,
			Message: fmt.Sprintf("listed %d tools of MCP server %s but could not apply them: %v; the ToolDefinitions already imported are kept, retrying with backoff", len(tools), url, err)}
	}
	r.recordSync(ts, s.Server, res)
	r.recordApprovals(ts, approvals)
	return nil
}

// desired is the ToolDefinition the source applies for a tool.
func (r *Reconciler) desired(ts *v1alpha1.ToolSource, name string, spec v1alpha1.ToolDefinitionSpec) *v1alpha1.ToolDefinition {
	labels := map[string]string{}
	for k, v := range ts.Spec.Labels {
		labels[k] = v
	}
	labels[v1alpha1.LabelToolSource] = ts.Name
	spec.Permissions = ts.Spec.Permissions.DeepCopy()
	td := &v1alpha1.ToolDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ToolDefinition"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ts.Namespace, Name: name, Labels: labels},
		Spec:       spec,
	}
	t := true
	td.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ToolSource", Name: ts.Name, UID: ts.UID, Controller: &t, BlockOwnerDeletion: &t}}
	return td
}

// delete removes the source's ToolDefinitions (garbage collection would
// too; doing it here makes deletion immediate and works where no
// collector runs), then the finalizer.
func (r *Reconciler) delete(ctx context.Context, ts *v1alpha1.ToolSource) error {
	r.forget(sourceKey(ts).String())
	list := &v1alpha1.ToolDefinitionList{}
	if err := r.List(ctx, list, client.InNamespace(ts.Namespace), client.MatchingLabels{v1alpha1.LabelToolSource: ts.Name}); err != nil {
		return fmt.Errorf("listing ToolDefinitions: %w", err)
	}
	for i := range list.Items {
		if td := &list.Items[i]; catalog.Created(ts, td) {
			if err := r.Delete(ctx, td, client.Preconditions{UID: &td.UID}); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting ToolDefinition %s: %w", td.Name, err)
			}
		}
	}
	patch := client.MergeFrom(ts.DeepCopy())
	controllerutil.RemoveFinalizer(ts, v1alpha1.FinalizerCleanup)
	return client.IgnoreNotFound(r.Patch(ctx, ts, patch))
}

// follow resolves the source's serverRef into cfg and records where it
// led in status.endpoint. A reference that cannot be followed is a
// *reconcile.Error: waiting for the referenced objects, or stalled on
// what the reference names.
func (r *Reconciler) follow(ctx context.Context, ts *v1alpha1.ToolSource, cfg *mcpsource.Config) error {
	servers := r.Servers
	if servers == nil {
		servers = &serverref.Resolver{Reader: r.APIReader}
	}
	ep, err := servers.Apply(ctx, ts, cfg)
	ts.Status.Endpoint = nil
	if ep != nil {
		ts.Status.Endpoint = ep.DeepCopy()
	}
	refErr := (*serverref.Error)(nil)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &refErr):
		kind := reconcile.Stalled
		if refErr.Wait {
			kind = reconcile.Waiting
		}
		return &reconcile.Error{Kind: kind, Reason: refErr.Reason, Message: refErr.Message + "; the ToolDefinitions already imported are kept", Err: err}
	}
	return &reconcile.Error{Kind: reconcile.Transient, Reason: v1alpha1.ReasonServerUnreachable, Err: err,
		Message: fmt.Sprintf("cannot follow spec.mcp.serverRef: %v; the ToolDefinitions already imported are kept, retrying", err)}
}

// connection resolves the source's headers, token and CA from Secrets.
func (r *Reconciler) connection(ctx context.Context, ts *v1alpha1.ToolSource) (mcpsource.Config, error) {
	cfg, err := mcpsource.Resolve(ctx, crkube.Getter(r.APIReader), ts)
	cfg.Egress = r.Egress
	return cfg, err
}

// session returns the source's live session, connecting when there is
// none for the current settings.
func (r *Reconciler) session(ctx context.Context, ts *v1alpha1.ToolSource, cfg mcpsource.Config) (*mcpsource.Session, error) {
	key := sourceKey(ts).String()
	fp := cfg.Fingerprint()
	r.mu.Lock()
	live := r.sessions[key]
	r.mu.Unlock()
	if live != nil && live.fingerprint == fp {
		return live.session, nil
	}
	r.forget(key)
	nsName := sourceKey(ts)
	cfg.OnToolsChanged = func() {
		obj := &v1alpha1.ToolSource{ObjectMeta: metav1.ObjectMeta{Namespace: nsName.Namespace, Name: nsName.Name}}
		select {
		case r.changed <- event.GenericEvent{Object: obj}:
		default: // a sync is already queued
		}
	}
	// The session outlives this reconcile: it follows the server's
	// notifications until the source changes or goes (the SDK detaches it
	// from ctx once connected, so ctx bounds only connecting).
	s, err := mcpsource.Connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.sessions[key] = &liveSession{fingerprint: fp, session: s}
	r.mu.Unlock()
	return s, nil
}

// forget closes a source's live session.
func (r *Reconciler) forget(key string) {
	r.mu.Lock()
	live := r.sessions[key]
	delete(r.sessions, key)
	r.mu.Unlock()
	if live != nil {
		_ = live.session.Close()
	}
}

func sourceKey(ts *v1alpha1.ToolSource) client.ObjectKey { return client.ObjectKeyFromObject(ts) }

// secretNames are the Secrets a source refers to.
func secretNames(ts *v1alpha1.ToolSource) []string {
	m := ts.Spec.MCP
	var out []string
	for _, sel := range []*v1alpha1.SecretKeySelector{m.BearerTokenSecretRef, m.CASecretRef} {
		if sel != nil {
			out = append(out, sel.Name)
		}
	}
	for _, h := range m.Headers {
		if h.ValueFrom != nil {
			out = append(out, h.ValueFrom.Name)
		}
	}
	return out
}

// sourcesForSecret queues the sources of a Secret's namespace that refer
// to it, so a rotated token is used at once.
func (r *Reconciler) sourcesForSecret(ctx context.Context, obj client.Object) []ctrl.Request {
	list := &v1alpha1.ToolSourceList{}
	if err := r.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing ToolSources of a Secret")
		return nil
	}
	var reqs []ctrl.Request
	for i := range list.Items {
		if slices.Contains(secretNames(&list.Items[i]), obj.GetName()) {
			reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

// specOrMetadataChanged passes creations, deletions and updates of the
// spec, labels or annotations (an approval).
var specOrMetadataChanged = predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{})

// SetupWithManager registers the controller: sources, the ToolDefinitions
// they own, the Secrets they refer to, their approvals, and the servers'
// list_changed notifications.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.sessions = map[string]*liveSession{}
	r.changed = make(chan event.GenericEvent, 64)
	b := ctrl.NewControllerManagedBy(mgr).
		// Its own status writes and the catalogs' records in ToolDefinition
		// status change nothing a sync reads.
		For(&v1alpha1.ToolSource{}, builder.WithPredicates(specOrMetadataChanged)).
		Owns(&v1alpha1.ToolDefinition{}, builder.WithPredicates(specOrMetadataChanged)).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.sourcesForSecret)).
		Watches(&v1alpha1.ToolSourceApproval{}, handler.EnqueueRequestsFromMapFunc(sourceForApproval)).
		WatchesRawSource(source.Channel(r.changed, &handler.EnqueueRequestForObject{}))
	if err := r.watchReferences(mgr, b); err != nil {
		return err
	}
	return b.Named("toolsource").Complete(reconcile.QuietOnShutdown(r))
}
