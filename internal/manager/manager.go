// Package manager builds and runs the operator's controller-runtime
// manager: flags, leader election, probes, metrics and the three
// controllers (ToolDefinition, ToolCatalog, ToolSource). cmd/manager and
// the local runner of `make run` share it.
package manager

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/controllers/toolcatalog"
	"github.com/toolcatalog/tool-catalog-operator/controllers/tooldefinition"
	"github.com/toolcatalog/tool-catalog-operator/controllers/toolsource"
	"github.com/toolcatalog/tool-catalog-operator/controllers/toolsourcetemplate"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalogconfig"
	"github.com/toolcatalog/tool-catalog-operator/internal/egress"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/internal/envflag"
	"github.com/toolcatalog/tool-catalog-operator/internal/grading"
	"github.com/toolcatalog/tool-catalog-operator/internal/kube/cached"
	"github.com/toolcatalog/tool-catalog-operator/internal/kube/crkube"
	"github.com/toolcatalog/tool-catalog-operator/internal/mcpsource"
	"github.com/toolcatalog/tool-catalog-operator/internal/metrics"
	_ "github.com/toolcatalog/tool-catalog-operator/internal/metrics" // registers the operator's metrics
	"github.com/toolcatalog/tool-catalog-operator/internal/metricsauth"
	"github.com/toolcatalog/tool-catalog-operator/internal/published"
	"github.com/toolcatalog/tool-catalog-operator/internal/querystore"
	"github.com/toolcatalog/tool-catalog-operator/internal/records"
	"github.com/toolcatalog/tool-catalog-operator/internal/redisconn"
	"github.com/toolcatalog/tool-catalog-operator/internal/secrets"
	"github.com/toolcatalog/tool-catalog-operator/internal/serverref"
)

// Config is how the manager runs.
type Config struct {
	MetricsAddr, ProbeAddr string
	// PprofAddr serves net/http/pprof's profiles; disabled when empty or
	// "0".
	PprofAddr      string
	LeaderElection bool
	// LeaderElectionID names the Lease; LeaderElectionNamespace is where
	// it lives (the manager's own namespace when empty, in a cluster).
	LeaderElectionID, LeaderElectionNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election
	// (client-go defaults when zero).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// QPS and Burst bound the client's requests to the API server.
	QPS   float64
	Burst int
	// RetryPolicy overrides the providers' retry policy.
	RetryPolicy *embedding.RetryPolicy
	// PassBudget is how long one pass starts new chunks of provider work
	// before it publishes what it did (catalog.DefaultPassBudget when 0).
	PassBudget time.Duration
	// QueryStoreMaxEntries bounds the query store of each namespace
	// (querystore.DefaultMaxEntries when 0).
	QueryStoreMaxEntries int
	// LossProbeInterval is how often the published versions are read
	// back to find what Redis lost.
	LossProbeInterval time.Duration
	// GradingMaxBytes bounds the catalogs' grading states together;
	// GradingIdle, when set, drops a catalog's after that long unused.
	GradingMaxBytes int64
	GradingIdle     time.Duration
	// SkipNameValidation allows several managers in one process (tests).
	SkipNameValidation bool
	// TemplateMaxServers bounds the servers one ToolSourceTemplate makes
	// ToolSources for.
	TemplateMaxServers int
	// SourceMaxTools and SourceSyncTimeout bound one ToolSource sync.
	SourceMaxTools    int
	SourceSyncTimeout time.Duration
	// WatchNamespaces limits the manager to these namespaces' objects
	// (a namespaced install, with Roles in each); every namespace when
	// empty.
	WatchNamespaces []string
	// EgressAllow lists the URL prefixes and address ranges ToolSources
	// may reach (egress.New); every address outside the denied ranges
	// when empty. The API server is always denied.
	EgressAllow []string
	// ClusterDomain is the cluster's DNS domain, PodNetworks the ranges
	// its Pods' addresses lie in (serverref.DefaultPodNetworks when nil):
	// a ToolSource's serverRef is followed to Pods in them only.
	ClusterDomain string
	PodNetworks   []string
	// MetricsWithoutAuth serves /metrics to anyone who reaches it. By
	// default a client must send a token of an identity that may get the
	// non-resource URL /metrics (controller-runtime's metrics filter:
	// TokenReview and SubjectAccessReview).
	MetricsWithoutAuth bool
}

// BindFlags registers the manager's flags; each defaults to an environment
// variable when set (METRICS_BIND_ADDRESS, HEALTH_PROBE_BIND_ADDRESS, PPROF_BIND_ADDRESS,
// LEADER_ELECT, LEADER_ELECTION_NAMESPACE, KUBE_API_QPS, KUBE_API_BURST).
func BindFlags(fs *flag.FlagSet) *Config {
	c := &Config{LeaderElectionID: "tool-catalog-operator.toolcatalog.dev"}
	fs.StringVar(&c.MetricsAddr, "metrics-bind-address", envflag.String("METRICS_BIND_ADDRESS", ":8080"), "Address of the Prometheus /metrics endpoint; 0 disables it.")
	fs.BoolVar(&c.MetricsWithoutAuth, "metrics-without-auth", false, "Serve /metrics to anyone who reaches it. By default a client needs a token of an identity that may get /metrics (the metrics-reader ClusterRole).")
	fs.StringVar(&c.ProbeAddr, "health-probe-bind-address", envflag.String("HEALTH_PROBE_BIND_ADDRESS", ":8081"), "Address of the /healthz and /readyz probes; 0 disables them.")
	fs.StringVar(&c.PprofAddr, "pprof-bind-address", envflag.String("PPROF_BIND_ADDRESS", "0"), "Address of Go's /debug/pprof profiles; 0 disables them. Keep it off, or on localhost only: profiles show the process's memory.")
	fs.BoolVar(&c.LeaderElection, "leader-elect", envflag.String("LEADER_ELECT", "false") == "true", "Elect a leader, so that of several replicas only one reconciles.")
	fs.StringVar(&c.LeaderElectionID, "leader-election-id", envflag.String("LEADER_ELECTION_ID", c.LeaderElectionID), "Name of the leader election Lease: managers sharing it elect one leader; give each shard (a manager with its own --watch-namespaces) its own.")
	fs.StringVar(&c.LeaderElectionNamespace, "leader-election-namespace", envflag.String("LEADER_ELECTION_NAMESPACE", ""), "Namespace of the leader election Lease (default: the manager's own).")
	fs.Float64Var(&c.QPS, "kube-api-qps", envflag.Float("KUBE_API_QPS", 50), "Queries per second to the Kubernetes API; status writes for many tools need more than client-go's default of 5.")
	fs.IntVar(&c.Burst, "kube-api-burst", int(envflag.Float("KUBE_API_BURST", 100)), "Burst of queries to the Kubernetes API.")
	fs.IntVar(&c.SourceMaxTools, "source-max-tools", mcpsource.DefaultMaxTools, "Most tools one ToolSource may list; a server listing more is SyncLimitExceeded and nothing changes.")
	fs.IntVar(&c.TemplateMaxServers, "template-max-servers", toolsourcetemplate.DefaultMaxServers, "Most servers one ToolSourceTemplate makes ToolSources for; past it the first by kind and name, and the template says TooManyServers.")
	fs.DurationVar(&c.SourceSyncTimeout, "source-sync-timeout", toolsource.DefaultSyncTimeout, "How long one ToolSource sync may talk to its MCP server.")
	c.WatchNamespaces = envflag.List(os.Getenv("WATCH_NAMESPACES"))
	fs.Func("watch-namespaces", "Comma-separated namespaces whose catalogs, tools and sources the manager reconciles (default: all); a namespaced install grants it Roles in just these.", func(v string) error {
		c.WatchNamespaces = envflag.List(v)
		return nil
	})
	c.EgressAllow = envflag.List(os.Getenv("EGRESS_ALLOW"))
	fs.Func("egress-allow", egress.FlagHelp, func(v string) error {
		c.EgressAllow = envflag.List(v)
		return nil
	})
	fs.StringVar(&c.ClusterDomain, "cluster-domain", envflag.String("CLUSTER_DOMAIN", "cluster.local"), "The cluster's DNS domain: a Service is NAME.NAMESPACE.svc.DOMAIN.")
	c.PodNetworks = envflag.List(os.Getenv("POD_NETWORKS"))
	fs.Func("pod-networks", serverref.PodNetworksHelp, func(v string) error {
		c.PodNetworks = envflag.List(v)
		return nil
	})
	fs.DurationVar(&c.PassBudget, "pass-budget", catalog.DefaultPassBudget, "How long one pass of a catalog starts new chunks of query generation and embedding before it publishes what it did; a large refresh is published this often.")
	fs.Func("grading-max-memory", "Memory the catalogs' grading states may hold together, a quantity such as 128Mi (the default): past it the states graded least recently go, and those catalogs' next versions are graded from scratch.", func(v string) error {
		q, err := resource.ParseQuantity(v)
		if err != nil || q.Sign() <= 0 {
			return fmt.Errorf("want a positive quantity such as 128Mi, got %q", v)
		}
		c.GradingMaxBytes = q.Value()
		return nil
	})
	fs.DurationVar(&c.GradingIdle, "grading-idle", 0, "How long a catalog's grading state is kept without a grading before it leaves memory, and the catalog's next version is graded from scratch; 0 (the default) keeps it until --grading-max-memory needs the room.")
	fs.DurationVar(&c.LossProbeInterval, "loss-probe-interval", published.DefaultLossProbeInterval, "How often each published catalog's version is read back from its Redis (one GET per catalog, pipelined per Redis) to find a Redis that restarted empty, was flushed or failed over without it; the catalog is then published again.")
	fs.IntVar(&c.QueryStoreMaxEntries, "query-store-max-entries", querystore.DefaultMaxEntries, "How many query sets and vectors the query store keeps per namespace and Redis; past it, the least recently used go.")
	return c
}

// Scheme is the scheme of the manager's objects.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}

// stripUnread drops from cached objects what nothing reads: managedFields
// and kubectl's last-applied-configuration annotation, a second copy of
// the whole spec of every object applied with kubectl apply. At thousands
// of ToolDefinitions they would be most of the cache. Every write is a
// patch computed from the object as read, so what is dropped here is
// never written back.
// The strings ToolDefinitions repeat are held once (internToolDefinition).
func stripUnread(in any) (any, error) {
	in, err := stripManagedFields(in)
	if obj, aerr := meta.Accessor(in); err == nil && aerr == nil {
		if a := obj.GetAnnotations(); a[corev1.LastAppliedConfigAnnotation] != "" {
			delete(a, corev1.LastAppliedConfigAnnotation)
			obj.SetAnnotations(a)
		}
	}
	if td, ok := in.(*v1alpha1.ToolDefinition); ok && err == nil {
		internToolDefinition(td)
	}
	return in, err
}

// MaxSourceTools bounds --source-max-tools: a ToolSource's record of
// what it created (status.imported: a UID, a spec hash and a tool name
// each, about 130 bytes) holds at most as many, and must fit in one
// object with the rest of the status, well under etcd's 1.5 MiB.
const MaxSourceTools = 10_000

var stripManagedFields = cache.TransformStripManagedFields()

// New creates a manager with probes; controllers are added by Setup.
func New(restCfg *rest.Config, c Config) (ctrl.Manager, error) {
	if c.SourceMaxTools > MaxSourceTools {
		return nil, fmt.Errorf("--source-max-tools %d: at most %d, the ToolDefinitions a ToolSource's record (status.imported) holds", c.SourceMaxTools, MaxSourceTools)
	}
	restCfg = rest.CopyConfig(restCfg)
	if c.QPS > 0 {
		restCfg.QPS, restCfg.Burst = float32(c.QPS), c.Burst
	}
	opts := ctrl.Options{
		Scheme:                        Scheme(),
		Metrics:                       metricsserver.Options{BindAddress: c.MetricsAddr, FilterProvider: metricsauth.Provider},
		HealthProbeBindAddress:        c.ProbeAddr,
		PprofBindAddress:              c.PprofAddr,
		LeaderElection:                c.LeaderElection,
		LeaderElectionID:              c.LeaderElectionID,
		LeaderElectionNamespace:       c.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true, // hand over at once on a graceful shutdown
	}
	if c.MetricsWithoutAuth {
		opts.Metrics.FilterProvider = nil
	}
	opts.Cache.DefaultTransform = stripUnread
	// Secrets are watched (metadata only) just when they opted in; their
	// data is read, uncached, when a pass needs it.
	opts.Cache.ByObject = map[client.Object]cache.ByObject{&corev1.Secret{}: {Label: secrets.Selector()}}
	if len(c.WatchNamespaces) > 0 {
		opts.Cache.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range c.WatchNamespaces {
			opts.Cache.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	opts.Controller.SkipNameValidation = &c.SkipNameValidation
	if c.LeaseDuration > 0 {
		opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = &c.LeaseDuration, &c.RenewDeadline, &c.RetryPeriod
	}
	mgr, err := ctrl.NewManager(restCfg, opts)
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	// Ready once the informer caches are synced: before that the
	// controllers would act on an empty view of the cluster.
	if err := mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return fmt.Errorf("informer caches not synced yet")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return mgr, nil
}

// Setup adds the controllers to a manager; the pool holds the catalogs'
// Redis clients.
func Setup(ctx context.Context, mgr ctrl.Manager, pool *redisconn.Pool, c Config) error {
	policy, err := egress.New(c.EgressAllow, mgr.GetConfig().Host)
	if err != nil {
		return fmt.Errorf("--egress-allow: %w", err)
	}
	podNetworks, err := serverref.ParseNetworks(c.PodNetworks)
	if err != nil {
		return fmt.Errorf("--pod-networks: %w", err)
	}
	// The catalogs' passes hand the ToolDefinitions' records to the
	// ToolDefinition reconciler, the one writer of their status.
	objects := &cached.Objects{Reader: mgr.GetClient(), Informers: mgr.GetCache()}
	writer := records.NewWriter(records.NewLedger(), objects, mgr.GetClient())
	if err := (&tooldefinition.Reconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("tooldefinition-controller"),
		Ledger:   writer.Ledger(),
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the tooldefinition controller: %w", err)
	}
	// Every collaborator of the catalogs' reconciler is built here, once.
	recorder := mgr.GetEventRecorder("toolcatalog-controller")
	resolver := &catalogconfig.Resolver{Reader: crkube.Getter(mgr.GetAPIReader()), RetryPolicy: c.RetryPolicy, Observe: metrics.ObserveProviderRequest}
	providers := &catalogconfig.ProviderCache{Egress: policy}
	states := &published.States{Pool: pool, StoreMaxEntries: c.QueryStoreMaxEntries}
	grades := grading.New(mgr.GetClient(), recorder, nil, writer.Graded)
	grades.MaxBytes, grades.Idle = c.GradingMaxBytes, c.GradingIdle
	if err := (&toolcatalog.Reconciler{
		Client:   mgr.GetClient(),
		Recorder: recorder,
		Pass: &catalog.Pass{
			Configs: resolver, Providers: providers, States: states, Objects: objects,
			Budget: catalog.Budget{Time: c.PassBudget},
		},
		Published:         states,
		Resolver:          resolver,
		Providers:         providers,
		Grades:            grades,
		Records:           writer,
		LossProbeInterval: c.LossProbeInterval,
	}).SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the toolcatalog controller: %w", err)
	}
	if err := (&toolsource.Reconciler{
		Client:      mgr.GetClient(),
		APIReader:   mgr.GetAPIReader(),
		Recorder:    mgr.GetEventRecorder("toolsource-controller"),
		Egress:      policy,
		Servers:     &serverref.Resolver{Reader: mgr.GetAPIReader(), Domain: c.ClusterDomain, PodNetworks: podNetworks},
		MaxTools:    c.SourceMaxTools,
		SyncTimeout: c.SourceSyncTimeout,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the toolsource controller: %w", err)
	}
	if err := (&toolsourcetemplate.Reconciler{
		Client:     mgr.GetClient(),
		APIReader:  mgr.GetAPIReader(),
		Recorder:   mgr.GetEventRecorder("toolsourcetemplate-controller"),
		MaxServers: c.TemplateMaxServers,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the toolsourcetemplate controller: %w", err)
	}
	return nil
}

// Run creates, sets up and runs a manager until ctx ends (a graceful
// shutdown: in-flight passes finish, the leader lease is released).
func Run(ctx context.Context, restCfg *rest.Config, c Config) error {
	redisconn.RouteLogs(ctrl.Log)
	mgr, err := New(restCfg, c)
	if err != nil {
		return err
	}
	pool := redisconn.NewPool()
	defer pool.Close()
	if err := Setup(ctx, mgr, pool, c); err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info("Starting manager", "metrics", c.MetricsAddr, "probes", c.ProbeAddr, "leaderElection", c.LeaderElection)
	return mgr.Start(ctx)
}
