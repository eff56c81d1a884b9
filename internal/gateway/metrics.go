package gateway

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the gateway's Prometheus metrics, per catalog
// (namespace/name).
type Metrics struct {
	ToolLists *prometheus.CounterVec
	Searches  *prometheus.CounterVec
	// QueryEmbeddings counts the search queries embedded: the ones no
	// view's query cache held.
	QueryEmbeddings *prometheus.CounterVec
	Calls           *prometheus.CounterVec
	Upstream        *prometheus.HistogramVec
	TokensSaved     *prometheus.CounterVec
	Rejected        *prometheus.CounterVec
	// RefusedVersions counts what was read from Redis and not served.
	RefusedVersions *prometheus.CounterVec
	// CatalogsFollowed is how many catalogs the gateway holds in memory.
	CatalogsFollowed prometheus.Gauge
}

// Call outcomes.
const (
	OutcomeOK            = "ok"
	OutcomeToolError     = "tool_error"
	OutcomeInvalid       = "invalid_arguments"
	OutcomeUpstreamError = "upstream_error"
	OutcomeNoUpstream    = "no_upstream"
	OutcomeDenied        = "denied"
)

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		ToolLists: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolcatalog_gateway_tool_lists_total",
			Help: "tools/list requests answered."}, []string{"catalog"}),
		Searches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolcatalog_gateway_searches_total",
			Help: "tool_search calls answered."}, []string{"catalog"}),
		Calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolcatalog_gateway_calls_total",
			Help: "Tool calls, directly or through tool_call, by tool and outcome (ok, tool_error, invalid_arguments, upstream_error, no_upstream, denied)."},
			[]string{"catalog", "tool", "outcome"}),
		Upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "toolcatalog_gateway_upstream_seconds",
			Help: "Duration of calls to upstream MCP servers.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}, []string{"catalog"}),
		TokensSaved: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolcatalog_gateway_prompt_tokens_saved_total",
			Help: "Estimated prompt tokens progressive disclosure saved: per tools/list, the tokens of every tool the principal may use minus those of the tools sent."},
			[]string{"catalog"}),
		Rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolcatalog_gateway_rejected_requests_total",
			Help: "HTTP requests refused before MCP, by reason (unauthenticated, forbidden, not_found, bad_request, not_published, unavailable)."},
			[]string{"reason"}),
	}
	m.QueryEmbeddings = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolcatalog_gateway_query_embeddings_total",
		Help: "Search queries embedded; tool_search calls minus these were answered from the principal's query cache."}, []string{"catalog"})
	m.RefusedVersions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolcatalog_gateway_refused_versions_total",
		Help: "What was read from Redis and not served, by reason: foreign_catalog, a version whose head names another catalog or UID (the last good version is served meanwhile); malformed_entry, a tool entry left out of a version (an invalid name, or parameters that are not an object schema)."},
		[]string{"catalog", "reason"})
	m.CatalogsFollowed = prometheus.NewGauge(prometheus.GaugeOpts{Name: "toolcatalog_gateway_catalogs_followed",
		Help: "Catalogs the gateway follows: loaded, indexed and subscribed to, from their first request until --idle-views without one."})
	reg.MustRegister(m.ToolLists, m.Searches, m.QueryEmbeddings, m.Calls, m.Upstream, m.TokensSaved, m.Rejected, m.RefusedVersions, m.CatalogsFollowed)
	return m
}
