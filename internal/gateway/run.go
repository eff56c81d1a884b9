package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/egress"
	"github.com/toolcatalog/tool-catalog-operator/internal/metricsauth"
	"github.com/toolcatalog/tool-catalog-operator/internal/serverref"
)

// DefaultTokenReviewRate is Config.TokenReviewRate's default.
const DefaultTokenReviewRate = 50

// Config configures Run.
type Config struct {
	// Addr is where MCP, /healthz and /readyz are served.
	Addr string
	// MetricsAddr is where /metrics is served, apart from MCP so that the
	// Service clients reach does not expose it; "0" disables it.
	MetricsAddr string
	// Listener and MetricsListener, when set, are used instead of
	// listening on Addr and MetricsAddr (tests).
	Listener, MetricsListener net.Listener
	// PprofAddr serves Go's /debug/pprof profiles, apart from MCP and
	// metrics; disabled when empty or "0". Profiles show the process's
	// memory: keep it off, or on localhost only.
	PprofAddr string
	// MetricsWithoutAuth serves /metrics to anyone who reaches it. By
	// default a client must send a token the API server accepts
	// (TokenReview) of an identity that may get the non-resource URL
	// /metrics (SubjectAccessReview): the metrics name every namespace's
	// catalogs and tools.
	MetricsWithoutAuth bool
	// Audit, when true, logs one line per tool call (AuditLog).
	Audit bool
	// StaticTokens is the path of the static tokens file; none when empty.
	StaticTokens string
	// TokenAudiences are the audiences service-account tokens must have;
	// DefaultTokenAudience when empty.
	TokenAudiences []string
	// OIDCIssuers are the OpenID Connect issuers whose tokens are
	// accepted, in ParseOIDCIssuer's form.
	OIDCIssuers []string
	// PublicURL is the scheme and host clients reach the gateway at (the
	// protected resource metadata names it); the request's when empty.
	PublicURL string
	// TokenReviewRate bounds the TokenReviews per second of tokens the
	// gateway has not seen (DefaultTokenReviewRate when zero); past it,
	// clients are answered 429.
	TokenReviewRate float64
	// TokenReviewRatePerSource bounds the reviews of one source (client
	// address) within TokenReviewRate, in bursts of twice as many; a
	// tenth of TokenReviewRate when zero.
	TokenReviewRatePerSource float64
	// Namespaces, when set, limits the gateway to these namespaces'
	// catalogs (a namespaced install, with Roles in each); a catalog
	// elsewhere is answered as one that does not exist.
	Namespaces []string
	// EgressAllow lists the URL prefixes and address ranges upstream MCP
	// servers may be at (egress.New); the API server is always denied.
	EgressAllow []string
	// ClusterDomain and PodNetworks say where a ToolSource's serverRef may
	// lead (serverref.Resolver), as the manager's flags of those names.
	ClusterDomain string
	PodNetworks   []string
	// CallTimeout, IdleViews, UsageInterval, ListTTL and Limits: see
	// Options.
	CallTimeout, IdleViews, UsageInterval, ListTTL time.Duration
	Limits                                         Limits
	// Version is announced to clients.
	Version string
	// ShutdownDelay is how long the gateway keeps serving, unready, once
	// asked to stop, so that Services and ingresses stop sending it new
	// requests first. Then it ends the streams that stay open (their
	// clients reconnect to another replica) and waits up to
	// ShutdownTimeout for the requests under way.
	ShutdownDelay time.Duration
	// ShutdownTimeout bounds the wait for requests under way;
	// CallTimeout plus five seconds when zero.
	ShutdownTimeout time.Duration
	// Log receives the gateway's logs.
	Log logr.Logger
}

// Run serves the gateway until ctx ends: ToolCatalogs and ToolSources are
// read from a watch cache, Secrets and TokenReviews from the API server.
func Run(ctx context.Context, restConfig *rest.Config, cfg Config) error {
	if err := checkPublicURL(cfg.PublicURL, len(cfg.OIDCIssuers) > 0); err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	opts := cache.Options{Scheme: scheme}
	if len(cfg.Namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range cfg.Namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	watch, err := cache.New(restConfig, opts)
	if err != nil {
		return fmt.Errorf("creating the watch cache: %w", err)
	}
	var kube client.Reader = watch
	if len(cfg.Namespaces) > 0 {
		kube = inNamespaces{Reader: watch, namespaces: cfg.Namespaces}
	}
	for _, obj := range []client.Object{&v1alpha1.ToolCatalog{}, &v1alpha1.ToolSource{}} {
		if _, getInformerErr := watch.GetInformer(ctx, obj); getInformerErr != nil {
			return fmt.Errorf("watching %T: %w", obj, getInformerErr)
		}
	}
	direct, err := client.New(restConfig, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	audiences := cfg.TokenAudiences
	if len(audiences) == 0 {
		audiences = []string{DefaultTokenAudience}
	}
	reviews := cfg.TokenReviewRate
	if reviews <= 0 {
		reviews = DefaultTokenReviewRate
	}
	// One source (a client's address) gets a tenth of the reviews by
	// default, so a flood of made-up tokens from it leaves the rest to
	// everyone else.
	perSource := cfg.TokenReviewRatePerSource
	if perSource <= 0 {
		perSource = reviews / 10
	}
	// The verifiers, in the order they are asked: static tokens, then
	// each OpenID Connect issuer, then the API server's TokenReview.
	auth := &Authenticator{Limiter: rate.NewLimiter(rate.Limit(reviews), 2*int(reviews)),
		SourceLimit: rate.Limit(perSource), SourceBurst: max(1, int(2*perSource))}
	if cfg.StaticTokens != "" {
		auth.Verifiers = append(auth.Verifiers, &StaticTokens{Path: cfg.StaticTokens})
	}
	// The API server's keys of its service-account tokens, read by the
	// issuer of the cluster's own tokens and by the TokenReviewer alike.
	keysClient, err := rest.HTTPClientFor(restConfig)
	if err != nil {
		return err
	}
	keysURL := strings.TrimSuffix(restConfig.Host, "/") + "/openid/v1/jwks"
	for _, spec := range cfg.OIDCIssuers {
		iss, issuerErr := ParseOIDCIssuer(spec)
		if issuerErr != nil {
			return fmt.Errorf("--oidc-issuer: %w", issuerErr)
		}
		if iss.Cluster {
			iss.HTTPClient, iss.KeysURL = keysClient, keysURL
		}
		auth.Verifiers = append(auth.Verifiers, iss)
	}
	auth.Verifiers = append(auth.Verifiers, &TokenReviewer{Reviews: direct, Audiences: audiences,
		Keys: &ServiceAccountKeys{Fetch: FetchKeys(keysClient, keysURL)}})
	policy, err := egress.New(cfg.EgressAllow, restConfig.Host)
	if err != nil {
		return fmt.Errorf("--egress-allow: %w", err)
	}
	podNetworks, err := serverref.ParseNetworks(cfg.PodNetworks)
	if err != nil {
		return fmt.Errorf("--pod-networks: %w", err)
	}
	servers := &serverref.Resolver{Reader: direct, Domain: cfg.ClusterDomain, PodNetworks: podNetworks}
	// The gateway outlives ctx until the requests under way are answered.
	gctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	g := New(gctx, Options{Kube: kube, Secrets: direct, Auth: auth, Metrics: NewMetrics(reg), Egress: policy, Servers: servers,
		CallTimeout: cfg.CallTimeout, IdleViews: cfg.IdleViews, UsageInterval: cfg.UsageInterval, ListTTL: cfg.ListTTL, Limits: cfg.Limits, Version: cfg.Version, PublicURL: cfg.PublicURL, Log: cfg.Log})
	if cfg.Audit {
		g.opts.Audit = cfg.Log.WithName("audit")
	}

	var ready atomic.Bool
	mux := http.NewServeMux()
	mux.Handle("/mcp/", g.Handler())
	mux.Handle(resourceMetadataPrefix+"/", g.Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "the watch cache is not synced yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	// Once stopping, answers close their connections, so clients open
	// new ones, which reach the replicas still in service. A connection
	// kept alive between requests is left open until the shutdown delay
	// has passed: closing it at once would reset a request a client is
	// sending on it at that moment (http.Server.SetKeepAlivesEnabled
	// does), and a POST so reset is not sent again.
	var stopping atomic.Bool
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stopping.Load() {
			w.Header().Set("Connection", "close")
		}
		mux.ServeHTTP(w, r)
	})}
	metrics, err := protectMetrics(restConfig, cfg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if err != nil {
		return err
	}
	metricsMux := http.NewServeMux()
	metricsMux.Handle("/metrics", metrics)
	metricsSrv := &http.Server{Handler: metricsMux, ReadHeaderTimeout: 10 * time.Second}

	errs := make(chan error, 4)
	if cfg.PprofAddr != "" && cfg.PprofAddr != "0" {
		pl, lerr := net.Listen("tcp", cfg.PprofAddr)
		if lerr != nil {
			return lerr
		}
		pprofMux := http.NewServeMux()
		pprofMux.HandleFunc("/debug/pprof/", pprof.Index)
		pprofMux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		pprofMux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		pprofMux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		pprofMux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		pprofSrv := &http.Server{Handler: pprofMux, ReadHeaderTimeout: 10 * time.Second}
		defer func() { _ = pprofSrv.Close() }()
		go func() { errs <- pprofSrv.Serve(pl) }()
		cfg.Log.Info("Serving profiles", "address", pl.Addr().String())
	}
	go func() { errs <- watch.Start(gctx) }()
	go func() {
		if watch.WaitForCacheSync(gctx) {
			ready.Store(true)
			cfg.Log.Info("Watch cache synced: serving")
		}
	}()
	l := cfg.Listener
	if l == nil {
		if l, err = net.Listen("tcp", cfg.Addr); err != nil {
			return err
		}
	}
	go func() { errs <- srv.Serve(l) }()
	cfg.Log.Info("Serving MCP", "address", l.Addr().String(), "path", "/mcp/<namespace>/<catalog>")
	if ml := cfg.MetricsListener; ml != nil || (cfg.MetricsAddr != "" && cfg.MetricsAddr != "0") {
		if ml == nil {
			if ml, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
				return err
			}
		}
		go func() { errs <- metricsSrv.Serve(ml) }()
		cfg.Log.Info("Serving metrics", "address", ml.Addr().String())
	}
	select {
	case <-ctx.Done():
		ready.Store(false)
		stopping.Store(true)
		if cfg.ShutdownDelay > 0 {
			cfg.Log.Info("Stopping: unready, serving for the shutdown delay", "delay", cfg.ShutdownDelay.String())
			time.Sleep(cfg.ShutdownDelay)
		}
	case err = <-errs:
	}
	g.Drain()
	wait := cfg.ShutdownTimeout
	if wait <= 0 {
		wait = cmp.Or(cfg.CallTimeout, DefaultCallTimeout) + 5*time.Second
	}
	shutdown, done := context.WithTimeout(context.Background(), wait)
	defer done()
	if serr := srv.Shutdown(shutdown); serr != nil && !errors.Is(serr, context.DeadlineExceeded) {
		err = errors.Join(err, serr)
	}
	_ = metricsSrv.Close()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// inNamespaces answers for objects outside its namespaces as for objects
// that do not exist, as a client of a namespaced install is answered.
type inNamespaces struct {
	client.Reader
	namespaces []string
}

func (r inNamespaces) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if !slices.Contains(r.namespaces, key.Namespace) {
		return apierrors.NewNotFound(schema.GroupResource{Group: v1alpha1.GroupVersion.Group}, key.Name)
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

// checkPublicURL refuses a public URL that is not a scheme and a host, and
// OpenID Connect issuers without one: the protected resource metadata
// names the gateway's URL, which must not be taken from the Host header a
// client sends (a client, or a cache in between, would be pointed
// wherever that header said).
func checkPublicURL(public string, issuers bool) error {
	if public == "" {
		if issuers {
			return errors.New("--oidc-issuer needs --public-url (https://tools.example.com): the protected resource metadata names the gateway's URL, which is never taken from a request's Host header")
		}
		return nil
	}
	u, err := url.Parse(public)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("--public-url %q: want a scheme and a host, as https://tools.example.com", public)
	}
	return nil
}

// protectMetrics guards /metrics as the manager does (metricsauth):
// unless cfg.MetricsWithoutAuth, a client needs a token of an identity
// that may get /metrics.
func protectMetrics(restConfig *rest.Config, cfg Config, h http.Handler) (http.Handler, error) {
	if cfg.MetricsWithoutAuth {
		return h, nil
	}
	guarded, err := metricsauth.Wrap(restConfig, cfg.Log.WithName("metrics"), h)
	if err != nil {
		return nil, fmt.Errorf("protecting /metrics: %w", err)
	}
	return guarded, nil
}
