// Package toolsourcetemplate makes a ToolSource for every MCP server
// object a ToolSourceTemplate selects in its namespace, and removes it
// when the server goes.
package toolsourcetemplate

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/reconcile"
	"github.com/toolcatalog/tool-catalog-operator/internal/serverref"
)

// DefaultMaxServers is Reconciler.MaxServers's default.
const DefaultMaxServers = 50

// resync is how often a template lists its servers when nothing it
// watches changes.
const resync = 5 * time.Minute

// Reconciler keeps a ToolSource for every server a template selects.
type Reconciler struct {
	client.Client
	// APIReader lists the server objects and reads ToolSources as the API
	// server has them.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// MaxServers bounds the servers one template makes ToolSources for
	// (DefaultMaxServers when zero): past it, the first by kind and name.
	MaxServers int
}

// +kubebuilder:rbac:groups=toolcatalog.dev,resources=toolsourcetemplates,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=toolcatalog.dev,resources=toolsourcetemplates/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=toolcatalog.dev,resources=toolsourcetemplates/finalizers,verbs=update
// +kubebuilder:rbac:groups=toolcatalog.dev,resources=toolsources,verbs=get;list;watch;create;update;patch;delete

// server is a server object a template selects.
type server struct {
	apiVersion, kind, name string
}

// Reconcile lists the servers the template selects and makes the
// ToolSources match.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	t := &v1alpha1.ToolSourceTemplate{}
	if err := r.APIReader.Get(ctx, req.NamespacedName, t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !t.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.deleteAll(ctx, t)
	}
	if err := reconcile.EnsureFinalizer(ctx, r.Client, t); err != nil {
		return ctrl.Result{}, err
	}
	base := t.DeepCopy()
	ready, err := r.discover(ctx, t)
	reconcile.Summarize(t, reconcile.Summary{Ready: ready, Err: err})
	if err == nil {
		t.Status.ObservedGeneration = t.Generation
	}
	reconcile.RecordReady(r.Recorder, base, t, "Discover")
	// The record of what the template created is its only proof of it.
	if perr := retry.OnError(retry.DefaultBackoff, func(error) bool { return true }, func() error {
		return reconcile.PatchStatus(ctx, r.Client, base, t)
	}); perr != nil {
		return ctrl.Result{}, perr
	}
	return reconcile.RequeueFor(err, resync, 30*time.Second)
}

// discover makes the ToolSources match the servers selected, and says
// what Ready is.
func (r *Reconciler) discover(ctx context.Context, t *v1alpha1.ToolSourceTemplate) (metav1.Condition, error) {
	selector, err := metav1.LabelSelectorAsSelector(&t.Spec.Selector)
	if err != nil {
		return metav1.Condition{}, &reconcile.Error{Kind: reconcile.Stalled, Reason: v1alpha1.ReasonInvalidConfiguration, Err: err, Message: fmt.Sprintf("spec.selector: %v", err)}
	}
	max := cmp.Or(r.MaxServers, DefaultMaxServers)
	servers, missing, err := r.list(ctx, t, selector, max+1)
	if err != nil {
		return metav1.Condition{}, err
	}
	total := len(servers)
	if total > max {
		servers = servers[:max]
	}
	recorded := map[string]v1alpha1.DiscoveredServer{}
	for _, s := range t.Status.Servers {
		if s.UID != "" {
			recorded[s.ToolSource] = s
		}
	}
	var out []v1alpha1.DiscoveredServer
	var refused int
	keep := map[string]bool{}
	for _, s := range servers {
		d, err := r.ensure(ctx, t, s, recorded)
		if err != nil {
			t.Status.Servers = mergeRecords(out, recorded, keep)
			return metav1.Condition{}, err
		}
		if d.Reason != "" {
			refused++
		}
		if d.UID != "" {
			keep[d.ToolSource] = true
		}
		out = append(out, d)
	}
	// The ToolSources of servers no longer selected go, and their tools
	// with them (each source's finalizer).
	for name, d := range recorded {
		if keep[name] {
			continue
		}
		ts := &v1alpha1.ToolSource{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: name}}
		if err := r.Delete(ctx, ts, client.Preconditions{UID: &d.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			t.Status.Servers = mergeRecords(out, recorded, keep)
			return metav1.Condition{}, fmt.Errorf("deleting ToolSource %s: %w", name, err)
		}
		r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, "ServerGone", "Discover", "%s %s is no longer selected: ToolSource %s deleted with its tools", d.Kind, d.Name, name)
	}
	t.Status.Servers = out
	t.Status.ServerCount = int32(total)
	msg := fmt.Sprintf("%d servers, %d ToolSources", total, len(keep))
	if len(missing) > 0 {
		msg += fmt.Sprintf("; not installed on this cluster: %s", strings.Join(missing, ", "))
	}
	switch {
	case total > max:
		return reconcile.Condition(metav1.ConditionFalse, v1alpha1.ReasonTooManyServers,
			fmt.Sprintf("selects more than --template-max-servers %d servers: only the first %d by kind and name have ToolSources; narrow spec.selector", max, max)), nil
	case refused > 0:
		return reconcile.Condition(metav1.ConditionFalse, v1alpha1.ReasonServerSkipped, fmt.Sprintf("%s; %d servers have none (see status.servers)", msg, refused)), nil
	}
	return reconcile.Condition(metav1.ConditionTrue, v1alpha1.ReasonDiscovered, msg), nil
}

// mergeRecords keeps, after a failure, the records of ToolSources made
// before it and of those not reached yet.
func mergeRecords(out []v1alpha1.DiscoveredServer, recorded map[string]v1alpha1.DiscoveredServer, keep map[string]bool) []v1alpha1.DiscoveredServer {
	for name, d := range recorded {
		if !keep[name] {
			out = append(out, d)
		}
	}
	return out
}

// list returns the servers of the template's kinds its selector selects,
// sorted by kind and name, at most limit of each kind, and the kinds not
// installed.
func (r *Reconciler) list(ctx context.Context, t *v1alpha1.ToolSourceTemplate, selector labels.Selector, limit int) ([]server, []string, error) {
	var out []server
	var missing []string
	for _, k := range t.Spec.Kinds {
		gv, err := schema.ParseGroupVersion(k.APIVersion)
		if err != nil {
			return nil, nil, &reconcile.Error{Kind: reconcile.Stalled, Reason: v1alpha1.ReasonInvalidConfiguration, Err: err, Message: fmt.Sprintf("spec.kinds: %q is not GROUP/VERSION", k.APIVersion)}
		}
		gk := schema.GroupKind{Group: gv.Group, Kind: k.Kind}
		if _, known := serverref.Lookup(gk); !known && gk != (schema.GroupKind{Kind: "Service"}) {
			return nil, nil, &reconcile.Error{Kind: reconcile.Stalled, Reason: v1alpha1.ReasonInvalidConfiguration, Message: fmt.Sprintf("spec.kinds: %s is not a kind of MCP server a ToolSource may reference", gk)}
		}
		// Names are all a template reads of a server: a metadata list.
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gv.WithKind(k.Kind + "List"))
		if err := r.APIReader.List(ctx, list, client.InNamespace(t.Namespace), client.MatchingLabelsSelector{Selector: selector}, client.Limit(int64(limit))); err != nil {
			if meta.IsNoMatchError(err) {
				missing = append(missing, gv.WithKind(k.Kind).String())
				continue
			}
			return nil, nil, fmt.Errorf("listing %s: %w", gk, err)
		}
		for _, o := range list.Items {
			out = append(out, server{apiVersion: k.APIVersion, kind: k.Kind, name: o.GetName()})
		}
	}
	slices.SortFunc(out, func(a, b server) int { return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.name, b.name)) })
	out = slices.CompactFunc(out, func(a, b server) bool { return a.kind == b.kind && a.name == b.name })
	return out, missing, nil
}

// ensure makes or updates the ToolSource of one server: only a ToolSource
// the template recorded creating (its UID) is the template's to change; a
// ToolSource of that name the template did not make is left alone and
// reported.
func (r *Reconciler) ensure(ctx context.Context, t *v1alpha1.ToolSourceTemplate, s server, recorded map[string]v1alpha1.DiscoveredServer) (v1alpha1.DiscoveredServer, error) {
	d := v1alpha1.DiscoveredServer{Kind: s.kind, Name: s.name, ToolSource: SourceName(t.Name, s.kind, s.name)}
	desired, reason := r.desired(t, s, d.ToolSource)
	if reason != "" {
		d.Reason = reason
		return d, nil
	}
	existing := &v1alpha1.ToolSource{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: d.ToolSource}, existing)
	switch {
	case apierrors.IsNotFound(err):
		if createErr := r.Create(ctx, desired); createErr != nil {
			return d, fmt.Errorf("creating ToolSource %s: %w", d.ToolSource, createErr)
		}
		d.UID = desired.UID
		r.Recorder.Eventf(t, desired, corev1.EventTypeNormal, "ServerDiscovered", "Discover", "%s %s: ToolSource %s created", s.kind, s.name, d.ToolSource)
		return d, nil
	case err != nil:
		return d, fmt.Errorf("reading ToolSource %s: %w", d.ToolSource, err)
	}
	rec, ok := recorded[d.ToolSource]
	if !ok || rec.UID != existing.UID {
		d.Reason = fmt.Sprintf("a ToolSource named %s exists that this template did not make: rename or delete it", d.ToolSource)
		return d, nil
	}
	d.UID = existing.UID
	if equality.Semantic.DeepEqual(existing.Spec, desired.Spec) && equality.Semantic.DeepEqual(existing.Labels, desired.Labels) {
		return d, nil
	}
	patch := client.MergeFromWithOptions(existing.DeepCopy(), client.MergeFromWithOptimisticLock{})
	existing.Spec, existing.Labels = desired.Spec, desired.Labels
	if err := r.Patch(ctx, existing, patch); err != nil {
		return d, fmt.Errorf("updating ToolSource %s: %w", d.ToolSource, err)
	}
	return d, nil
}

// LabelTemplate is set on the ToolSources a template makes, naming it
// (for people and selectors; the template trusts only its record).
const LabelTemplate = "toolcatalog.dev/tool-source-template"

// desired is the ToolSource of a server, or why it has none.
func (r *Reconciler) desired(t *v1alpha1.ToolSourceTemplate, s server, name string) (*v1alpha1.ToolSource, string) {
	tpl := t.Spec.Template
	prefix := strings.ReplaceAll(tpl.ToolNamePrefix, "{name}", toolNameSafe(s.name))
	if len(prefix) > 32 {
		return nil, fmt.Sprintf("toolNamePrefix %q is longer than 32 characters for this server: shorten spec.template.toolNamePrefix", prefix)
	}
	ts := &v1alpha1.ToolSource{
		ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: name, Labels: map[string]string{LabelTemplate: t.Name}},
		Spec: v1alpha1.ToolSourceSpec{
			MCP:            v1alpha1.MCPServerSpec{ServerRef: &v1alpha1.ServerReference{APIVersion: s.apiVersion, Kind: s.kind, Name: s.name}},
			ToolNamePrefix: prefix,
			Include:        tpl.Include,
			Exclude:        tpl.Exclude,
			Labels:         tpl.Labels,
			Permissions:    tpl.Permissions.DeepCopy(),
			SyncInterval:   cmp.Or(tpl.SyncInterval, &metav1.Duration{Duration: resync}),
			ChangePolicy:   cmp.Or(tpl.ChangePolicy, v1alpha1.ChangePolicyApply),
		},
	}
	ts.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ToolSourceTemplate", Name: t.Name, UID: t.UID, Controller: new(true), BlockOwnerDeletion: new(true)}}
	return ts, ""
}

// toolNameSafe is a name with every character a tool name may not hold
// replaced by _.
func toolNameSafe(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, name)
}

// SourceName is the ToolSource a template makes for a server: the
// template's and the server's names, cut to 63 characters (a label value
// holds it) with a hash of the whole when longer.
func SourceName(template, kind, name string) string {
	full := template + "-" + name
	if kind != "Service" {
		full = template + "-" + strings.ToLower(kind) + "-" + name
	}
	if len(full) <= 63 {
		return full
	}
	sum := sha256.Sum256([]byte(full))
	return strings.TrimRight(full[:54], "-.") + "-" + hex.EncodeToString(sum[:])[:8]
}

// deleteAll deletes the ToolSources the template recorded making, then
// its finalizer.
func (r *Reconciler) deleteAll(ctx context.Context, t *v1alpha1.ToolSourceTemplate) error {
	for _, d := range t.Status.Servers {
		if d.UID == "" {
			continue
		}
		ts := &v1alpha1.ToolSource{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: d.ToolSource}}
		if err := r.Delete(ctx, ts, client.Preconditions{UID: &d.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting ToolSource %s: %w", d.ToolSource, err)
		}
	}
	patch := client.MergeFrom(t.DeepCopy())
	controllerutil.RemoveFinalizer(t, v1alpha1.FinalizerCleanup)
	return client.IgnoreNotFound(r.Patch(ctx, t, patch))
}

// templatesOf maps a server object to the templates of its namespace.
func (r *Reconciler) templatesOf(ctx context.Context, obj client.Object) []ctrl.Request {
	list := &v1alpha1.ToolSourceTemplateList{}
	if err := r.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the ToolSourceTemplates of a server's namespace")
		return nil
	}
	reqs := make([]ctrl.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// createdOrDeletedOrRelabelled passes what changes a template's
// selection: a server object made, gone or relabelled.
var createdOrDeletedOrRelabelled = predicate.LabelChangedPredicate{}

// SetupWithManager registers the controller: templates, the ToolSources
// they own, and the server objects of the kinds installed when the
// manager starts.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.ToolSourceTemplate{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A ToolSource of the template's deleted by hand is made again.
		Owns(&v1alpha1.ToolSource{}, builder.WithPredicates(predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }})).
		WatchesMetadata(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(r.templatesOf), builder.WithPredicates(createdOrDeletedOrRelabelled))
	for _, k := range serverref.Kinds {
		mapping, err := mgr.GetRESTMapper().RESTMapping(k.GroupKind, k.Versions...)
		if err != nil {
			continue
		}
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(mapping.GroupVersionKind)
		b = b.WatchesMetadata(m, handler.EnqueueRequestsFromMapFunc(r.templatesOf), builder.WithPredicates(createdOrDeletedOrRelabelled))
	}
	return b.Named("toolsourcetemplate").Complete(reconcile.QuietOnShutdown(r))
}
