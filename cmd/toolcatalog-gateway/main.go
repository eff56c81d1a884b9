// Command toolcatalog-gateway serves every published tool catalog over
// MCP (Streamable HTTP) at /mcp/<namespace>/<catalog>, with /healthz and
// /readyz beside it and /metrics on a port of its own. It is stateless: run as many replicas
// as the load needs.
package main

import (
	"context"
	"flag"
	"os"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/toolcatalog/tool-catalog-operator/internal/egress"
	"github.com/toolcatalog/tool-catalog-operator/internal/envflag"
	"github.com/toolcatalog/tool-catalog-operator/internal/gateway"
	"github.com/toolcatalog/tool-catalog-operator/internal/memtune"
	"github.com/toolcatalog/tool-catalog-operator/internal/serverref"
	"github.com/toolcatalog/tool-catalog-operator/internal/telemetry/otlp"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
)

func main() {
	var cfg gateway.Config
	var audiences, namespaces, egressAllow, podNetworks string
	flag.StringVar(&cfg.Addr, "bind-address", envflag.String("BIND_ADDRESS", ":8080"), "Address of MCP (/mcp/<namespace>/<catalog>), /healthz and /readyz.")
	flag.StringVar(&cfg.MetricsAddr, "metrics-bind-address", envflag.String("METRICS_BIND_ADDRESS", ":9090"), "Address of /metrics, apart from MCP so the Service clients reach does not expose it; 0 disables it.")
	flag.StringVar(&cfg.PprofAddr, "pprof-bind-address", envflag.String("PPROF_BIND_ADDRESS", "0"), "Address of Go's /debug/pprof profiles; 0 disables them. Keep it off, or on localhost only: profiles show the process's memory.")
	flag.BoolVar(&cfg.MetricsWithoutAuth, "metrics-without-auth", false, "Serve /metrics to anyone who reaches it. By default a client needs a token of an identity that may get /metrics (the metrics-reader ClusterRole).")
	flag.BoolVar(&cfg.Audit, "audit", envflag.String("AUDIT", "true") == "true", "Log one line per tool call (logger gateway.audit): principal, catalog, tool, upstream, SHA-256 of the arguments, outcome, latency.")
	flag.StringVar(&cfg.StaticTokens, "static-tokens", envflag.String("STATIC_TOKENS", ""), "Path of a token file (token,user,uid,\"group1,group2\" per line), usually a mounted Secret; read again when it changes; optional.")
	flag.StringVar(&audiences, "token-audiences", envflag.String("TOKEN_AUDIENCES", ""), "Comma-separated audiences service-account tokens must be issued for, one of them (default: "+gateway.DefaultTokenAudience+"; mount a projected token with that audience).")
	if v := envflag.String("OIDC_ISSUERS", ""); v != "" {
		cfg.OIDCIssuers = strings.Split(v, ";")
	}
	flag.Func("oidc-issuer", "An OpenID Connect issuer whose JWTs are accepted, repeatable (env OIDC_ISSUERS, ';' between issuers): url=https://issuer,audience=AUD[,user-claim=sub|email|...][,user-prefix=P][,groups-claim=groups][,groups-prefix=P][,cluster=true for the cluster's own service-account issuer]. The user prefix defaults to URL# unless the claim is email; the groups prefix defaults to URL#.",
		func(v string) error { cfg.OIDCIssuers = append(cfg.OIDCIssuers, v); return nil })
	flag.StringVar(&cfg.PublicURL, "public-url", envflag.String("PUBLIC_URL", ""), "Scheme and host clients reach the gateway at (https://tools.example.com), named in the OAuth protected resource metadata; required with --oidc-issuer (a request's Host header is never used).")
	flag.Float64Var(&cfg.TokenReviewRate, "token-review-rate", gateway.DefaultTokenReviewRate, "TokenReviews per second of tokens the gateway has not seen; past it, clients get 429. Answers, accepted or refused, are kept 30s.")
	flag.Float64Var(&cfg.TokenReviewRatePerSource, "token-review-rate-per-source", 0, "Of --token-review-rate, the reviews per second one client address may use (a tenth when 0): a flood of made-up tokens from one address leaves the rest to the others. Behind a proxy every client has the proxy's address: raise it there.")
	flag.StringVar(&namespaces, "watch-namespaces", envflag.String("WATCH_NAMESPACES", ""), "Comma-separated namespaces whose catalogs the gateway serves (default: all); a namespaced install grants it Roles in just these.")
	flag.DurationVar(&cfg.CallTimeout, "call-timeout", envflag.Duration("CALL_TIMEOUT", gateway.DefaultCallTimeout), "Timeout of each call to an upstream MCP server.")
	flag.DurationVar(&cfg.ShutdownDelay, "shutdown-delay", envflag.Duration("SHUTDOWN_DELAY", 5*time.Second), "On SIGTERM, how long to keep serving, unready, before ending open streams and waiting for the calls under way, so that Services stop sending new requests first.")
	flag.DurationVar(&cfg.IdleViews, "idle-views", envflag.Duration("IDLE_VIEWS", gateway.DefaultIdleViews), "How long a principal's view of a catalog is kept without a session, and a catalog without views or requests followed (its tools held in memory).")
	flag.DurationVar(&cfg.UsageInterval, "usage-interval", envflag.Duration("USAGE_INTERVAL", toolcatalog.DefaultUsageInterval), "How often the most used tools of a catalog that includes them (spec.search.alwaysIncludeTopNUsed) are read again.")
	flag.DurationVar(&cfg.ListTTL, "list-ttl", envflag.Duration("LIST_TTL", gateway.DefaultListTTL), "How long a client (MCP 2026-07-28) may keep a tools list before asking again (ttlMs), unless notifications/tools/list_changed tells it sooner; 0: ask every time.")
	flag.StringVar(&egressAllow, "egress-allow", envflag.String("EGRESS_ALLOW", ""), egress.FlagHelp)
	flag.StringVar(&cfg.ClusterDomain, "cluster-domain", envflag.String("CLUSTER_DOMAIN", "cluster.local"), "The cluster's DNS domain: a Service is NAME.NAMESPACE.svc.DOMAIN.")
	flag.StringVar(&podNetworks, "pod-networks", envflag.String("POD_NETWORKS", ""), serverref.PodNetworksHelp)
	d := gateway.DefaultLimits
	flag.Int64Var(&cfg.Limits.RequestBytes, "max-request-bytes", d.RequestBytes, "Largest HTTP request body; larger ones get 413.")
	flag.DurationVar(&cfg.Limits.SessionIdle, "session-idle", d.SessionIdle, "An MCP session that sends nothing for this long is closed.")
	flag.DurationVar(&cfg.Limits.SessionLifetime, "session-lifetime", d.SessionLifetime, "An MCP session is closed this long after it opened; the client opens a new one.")
	flag.IntVar(&cfg.Limits.SessionsPerPrincipal, "max-sessions-per-principal", d.SessionsPerPrincipal, "Open MCP sessions one principal may hold on one catalog; one more gets 429.")
	flag.IntVar(&cfg.Limits.ListensPerPrincipal, "max-listens-per-principal", d.ListensPerPrincipal, "Most subscriptions/listen streams (protocol 2026-07-28) one principal may hold open at one replica, over every catalog; one more gets 429.")
	flag.IntVar(&cfg.Limits.Listens, "max-listens", d.Listens, "Most subscriptions/listen streams one replica holds open in all; one more gets 429.")
	flag.Float64Var(&cfg.Limits.SearchesPerSecond, "searches-per-second", d.SearchesPerSecond, "tool_search calls per second per principal (bursts of twice as many); past it, 429 with Retry-After.")
	flag.Float64Var(&cfg.Limits.CallsPerSecond, "calls-per-second", d.CallsPerSecond, "Other tool calls per second per principal (bursts of twice as many); past it, 429 with Retry-After.")
	flag.Int64Var(&cfg.Limits.UpstreamResultBytes, "max-upstream-result-bytes", d.UpstreamResultBytes, "Largest answer an upstream MCP server may send to one call; a larger one is a tool error.")
	flag.Int64Var(&cfg.Limits.UpstreamResultValues, "max-upstream-result-values", d.UpstreamResultValues, "Most JSON values an upstream MCP server's answer to one call may hold (what it costs decoded follows them); more is a tool error.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	// The Go heap stays under 90% of the container's memory limit
	// (AUTOMEMLIMIT or GOMEMLIMIT override), collecting harder as it
	// nears it instead of being killed.
	memtune.Set(ctrl.Log.WithName("memlimit"), 0)
	cfg.TokenAudiences = envflag.List(audiences)
	if cfg.ListTTL == 0 {
		cfg.ListTTL = -1 // Options read zero as the default
	}
	cfg.Namespaces = envflag.List(namespaces)
	cfg.EgressAllow = envflag.List(egressAllow)
	cfg.PodNetworks = envflag.List(podNetworks)
	cfg.Log = ctrl.Log.WithName("gateway")
	cfg.Version = version
	ctx := ctrl.SetupSignalHandler()
	// Traces of calls, exported when OTEL_EXPORTER_OTLP_* is set; the
	// trace context is passed on either way.
	shutdown, err := otlp.Setup(ctx, "toolcatalog-gateway", version)
	if err != nil {
		cfg.Log.Error(err, "Setting up tracing")
		os.Exit(1)
	}
	err = gateway.Run(ctx, ctrl.GetConfigOrDie(), cfg)
	flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = shutdown(flush)
	if err != nil {
		cfg.Log.Error(err, "Gateway exited with an error")
		os.Exit(1)
	}
}

// version is stamped at build time (-ldflags "-X main.version=...").
var version = "dev"
