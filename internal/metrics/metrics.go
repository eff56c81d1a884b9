// Package metrics defines the operator's Prometheus metrics, registered on
// controller-runtime's registry so the manager's /metrics serves them.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// ProviderRequests counts provider HTTP requests by outcome (success
	// or the error kind).
	ProviderRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolcatalog_provider_requests_total",
		Help: "Requests to embedding and query generation providers, by provider, model and outcome.",
	}, []string{"provider", "model", "outcome"})

	// ProviderLatency observes provider request durations.
	ProviderLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "toolcatalog_provider_request_duration_seconds",
		Help:    "Duration of provider requests, by provider and model.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
	}, []string{"provider", "model"})

	// ToolsEmbedded counts tools (re-)embedded and published.
	ToolsEmbedded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolcatalog_tools_embedded_total",
		Help: "Tools whose embedding was computed and published, by catalog.",
	}, []string{"catalog"})

	// SelfRecall reports the self-grading of a catalog's current version.
	SelfRecall = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "toolcatalog_self_recall_at5",
		Help: "Share of a catalog's graded own queries (each left out of its tool's vector) that rank their tool in the top five, for the current version.",
	}, []string{"catalog"})

	// Quality counts what self-grading found, by kind (graded_tools,
	// graded_queries, outranked_tools, confusable_pairs).
	Quality = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "toolcatalog_self_grading",
		Help: "What self-grading of a catalog's current version found, by kind: graded_tools, graded_queries, outranked_tools, confusable_pairs.",
	}, []string{"catalog", "kind"})

	// GradingSearches counts the own queries self-grading searched: the
	// grading's work, which follows the changes of each version.
	GradingSearches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolcatalog_grading_searches_total",
		Help: "Own queries self-grading searched over a catalog's versions (the others kept their earlier outcome).",
	}, []string{"catalog"})

	// GradingScans counts the searches of self-grading whose semantic
	// arm scored every tool's vector; the others ranked it from the rows
	// they kept.
	GradingScans = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolcatalog_grading_scans_total",
		Help: "Self-grading searches that scored every tool's vector of a catalog (the others ranked the tools they kept, and the changed ones).",
	}, []string{"catalog"})

	// GradingDuration observes how long each grading of a catalog's
	// version took, from start to end (the vectors it reads and the CPU
	// it waits for included). Its count is the gradings, by which
	// GradingSearches and GradingCPU divide into a grading's share.
	GradingDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "toolcatalog_grading_duration_seconds",
		Help:    "Duration of one self-grading of a catalog's version, from start to end.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
	}, []string{"catalog"})

	// GradingCPU counts the CPU time self-grading spent on a catalog's
	// versions: that of the thread each grading runs on (a scan of every
	// vector also runs helpers on other threads, not counted).
	GradingCPU = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolcatalog_grading_cpu_seconds_total",
		Help: "CPU time (user and system) self-grading spent on a catalog's versions, on the thread each grading ran on.",
	}, []string{"catalog"})

	// Tools reports the tools of a catalog by state after the last pass.
	Tools = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "toolcatalog_tools",
		Help: "Tools of a catalog after its last pass, by state (selected, embedded, stale, invalid, failed, rejected).",
	}, []string{"catalog", "state"})

	// PublishDuration observes the MULTI/EXEC that publishes a version.
	PublishDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "toolcatalog_publish_duration_seconds",
		Help:    "Duration of writing a new catalog version to Redis.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
	}, []string{"catalog"})

	// Version is a catalog's current version.
	Version = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "toolcatalog_catalog_version",
		Help: "Current published version of a catalog.",
	}, []string{"catalog"})

	// RedisErrors counts failed Redis operations.
	RedisErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolcatalog_redis_errors_total",
		Help: "Failed Redis operations, by catalog and operation (read, write, notify, delete).",
	}, []string{"catalog", "operation"})

	// PublishedDataLost counts the times a catalog's Redis was found to
	// hold less than the manager had published there.
	PublishedDataLost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolcatalog_published_data_lost_total",
		Help: "Times a catalog's Redis was found without the version the manager published there (restarted empty, flushed, evicted, failed over to a replica without it); the catalog is published again.",
	}, []string{"catalog"})

	// QueryStore counts what the query store found for a namespace's
	// catalogs (internal/querystore).
	QueryStore = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolcatalog_query_store_total",
		Help: "Lookups in the query store, by namespace, kind (queries, vectors) and outcome (hit: a provider request saved; miss; error).",
	}, []string{"namespace", "kind", "outcome"})
)

func init() {
	crmetrics.Registry.MustRegister(ProviderRequests, ProviderLatency, ToolsEmbedded, Tools, PublishDuration, Version, RedisErrors, PublishedDataLost, SelfRecall, Quality, GradingSearches, GradingScans, GradingDuration, GradingCPU, QueryStore)
}

// ObserveProviderRequest records one provider request.
func ObserveProviderRequest(provider, model, outcome string, d time.Duration) {
	ProviderRequests.WithLabelValues(provider, model, outcome).Inc()
	ProviderLatency.WithLabelValues(provider, model).Observe(d.Seconds())
}

// ForgetCatalog removes a deleted catalog's series.
func ForgetCatalog(catalog string) {
	for _, v := range []*prometheus.GaugeVec{Tools, Version, SelfRecall, Quality} {
		v.DeletePartialMatch(prometheus.Labels{"catalog": catalog})
	}
	for _, v := range []*prometheus.CounterVec{ToolsEmbedded, RedisErrors, PublishedDataLost, GradingSearches, GradingScans, GradingCPU} {
		v.DeletePartialMatch(prometheus.Labels{"catalog": catalog})
	}
	for _, v := range []*prometheus.HistogramVec{PublishDuration, GradingDuration} {
		v.DeletePartialMatch(prometheus.Labels{"catalog": catalog})
	}
}
