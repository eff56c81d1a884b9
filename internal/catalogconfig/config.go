// Package catalogconfig resolves a ToolCatalog's spec against its Secrets
// into Redis options and providers, for the controller and the kubectl
// plugin alike.
package catalogconfig

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/internal/kube"
	"github.com/toolcatalog/tool-catalog-operator/internal/redisconn"
	"github.com/toolcatalog/tool-catalog-operator/internal/secrets"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
)

// DefaultResync is how often a catalog is checked against Redis when
// spec.publish.resyncInterval is unset (and the retry interval of a
// configuration error).
const DefaultResync = 10 * time.Minute

// Config is a ToolCatalog's spec resolved against its Secrets.
type Config struct {
	Keys  contract.Keys
	Redis redisconn.Options
	// Providers are the provider settings; build them with BuildProviders
	// or, to reuse clients across passes, a ProviderCache.
	Providers ProviderSettings
	// Provider is the embedding provider's name for the document.
	Provider string
	// Dimensions is the configured vector length, 0 when any is accepted.
	Dimensions     int
	QueriesPerTool int
	Concurrency    int
	Channel        string
	Retain         int
	Resync         time.Duration
	Search         contract.SearchDefaults
	// Learning is set when the catalog learns from recorded requests.
	Learning *Learning
}

// ResyncDue says whether a catalog's periodic checks (the selection
// made whole from the cache, every field in Redis compared with what the
// operator kept) are due, since after the last: one interval after it,
// or two for a pass that follows edits the watch named. An edit is so
// not held up by checks that at 100,000 tools read 170 MB from Redis:
// the catalog's periodic pass, which follows none, makes them, and a
// stream of edits that leaves no such pass makes them an interval late.
func (c *Config) ResyncDue(since time.Duration, edits bool) bool {
	if edits {
		return since >= 2*c.Resync
	}
	return since >= c.Resync
}

// Learning bounds what a catalog learns from recorded requests.
type Learning struct {
	PerTool       int
	MinCount      int64
	MinPrincipals int
	MaxRecorded   int
	Retention     time.Duration
}

// DefaultLearningRetention is how long an unrepeated request is kept when
// spec.learning.retention is unset.
const DefaultLearningRetention = 30 * 24 * time.Hour

// Error is a problem the user must fix in the catalog or a Secret;
// retrying does not help until something changes.
type Error struct {
	// Reason is the condition reason to report.
	Reason string
	// Message says what to fix.
	Message string
}

func (e *Error) Error() string { return e.Message }

// Resolver reads the Secrets a catalog refers to.
type Resolver struct {
	// Reader reads Secrets; the controller passes an uncached reader so
	// Secret data never sits in the informer cache.
	Reader kube.Getter
	// RetryPolicy overrides the providers' retry policy.
	RetryPolicy *embedding.RetryPolicy
	// Observe, when set, is told of every provider request (the manager
	// counts them in its metrics).
	Observe func(provider, model, outcome string, d time.Duration)
}

// KeysOf returns a catalog's Redis keys.
func KeysOf(tc *v1alpha1.ToolCatalog) contract.Keys {
	if p := tc.Spec.Redis.KeyPrefix; p != "" {
		return contract.Keys{Prefix: p}
	}
	return contract.Keys{Prefix: contract.DefaultPrefix(tc.Namespace, tc.Name)}
}

// CheckKeyPrefix refuses a custom spec.redis.keyPrefix whose first hash
// tag is not the catalog's own {namespace/name}. Every key of a catalog
// then starts with a tag no other catalog can claim, so no catalog can
// write, read as its own, or delete another's keys, whatever prefixes
// namespace users choose, and all keys stay in one Redis Cluster slot.
func CheckKeyPrefix(tc *v1alpha1.ToolCatalog) error {
	p := tc.Spec.Redis.KeyPrefix
	if p == "" {
		return nil
	}
	own := "{" + tc.Namespace + "/" + tc.Name + "}"
	open := strings.IndexByte(p, '{')
	if open >= 0 {
		if end := strings.IndexByte(p[open:], '}'); end > 0 && p[open:open+end+1] == own {
			return nil
		}
	}
	return &Error{Reason: v1alpha1.ReasonInvalidConfiguration,
		Message: fmt.Sprintf("spec.redis.keyPrefix %q must hold the catalog's own hash tag %s as its first {...}, as the default toolcatalog:%s does: a prefix without it could reach another catalog's keys", p, own, own)}
}

// SecretNames lists the Secrets a catalog refers to, for the field index
// that maps a changed Secret to its catalogs.
func SecretNames(tc *v1alpha1.ToolCatalog) []string {
	var names []string
	add := func(ref *v1alpha1.SecretKeySelector) {
		if ref != nil {
			names = append(names, ref.Name)
		}
	}
	add(tc.Spec.Redis.PasswordSecretRef)
	if tc.Spec.Redis.TLS != nil {
		add(tc.Spec.Redis.TLS.CASecretRef)
	}
	add(tc.Spec.Embedding.APIKeySecretRef)
	add(tc.Spec.QueryGeneration.APIKeySecretRef)
	if fb := tc.Spec.QueryGeneration.Fallback; fb != nil {
		add(fb.APIKeySecretRef)
	}
	return names
}

// DisclosureOf resolves a catalog's disclosure policy as it is published:
// every field set, unset ones to their defaults.
func DisclosureOf(d v1alpha1.DisclosureSpec) *contract.Disclosure {
	out := &contract.Disclosure{
		Mode:              string(d.Mode),
		Threshold:         toolcatalog.DefaultDisclosureThreshold,
		ContextWindow:     toolcatalog.DefaultContextWindow,
		SearchTopK:        int(orDefault(d.SearchTopK, toolcatalog.DefaultBridgeTopK)),
		SearchMaxTopK:     int(orDefault(d.SearchMaxTopK, toolcatalog.MaxBridgeTopK)),
		DescriptionLength: int(orDefault(d.DescriptionLength, toolcatalog.BridgeDescriptionLength)),
	}
	if out.Mode == "" {
		out.Mode = string(v1alpha1.DisclosureAuto)
	}
	if d.Threshold != nil && *d.Threshold > 0 {
		out.Threshold = *d.Threshold
	}
	if d.ContextWindow != nil && *d.ContextWindow > 0 {
		out.ContextWindow = int(*d.ContextWindow)
	}
	out.SearchTopK = min(out.SearchTopK, out.SearchMaxTopK)
	return out
}

// QueriesPerTool is how many queries a catalog generates for each tool.
func QueriesPerTool(spec v1alpha1.ToolCatalogSpec) int {
	return int(orDefault(spec.QueryGeneration.QueriesPerTool, 5))
}

// SearchOf is the search defaults a catalog's document publishes.
func SearchOf(spec v1alpha1.ToolCatalogSpec) contract.SearchDefaults {
	s := contract.SearchDefaults{
		Method:                string(spec.Search.Method),
		TopK:                  int(orDefault(spec.Search.TopK, 5)),
		SimilarityThreshold:   spec.Search.SimilarityThreshold,
		AlwaysInclude:         spec.Search.AlwaysInclude,
		AlwaysIncludeTopNUsed: int(spec.Search.AlwaysIncludeTopNUsed),
		SemanticWeight:        orDefaultFloat(spec.Search.SemanticWeight, toolcatalog.DefaultSemanticWeight),
		MinLexicalEvidence:    orDefaultFloat(spec.Search.MinLexicalEvidence, toolcatalog.DefaultMinLexicalEvidence),
	}
	if s.Method == "" {
		s.Method = string(v1alpha1.SearchHybrid)
	}
	if spec.Search.Intents == v1alpha1.IntentsOff {
		// Absent means on: a catalog that keeps the default publishes
		// the document it did before the setting existed.
		s.Intents = toolcatalog.IntentsOff
	}
	s.Disclosure = DisclosureOf(spec.Disclosure)
	return s
}

// Resolve reads the Secrets a catalog refers to and builds its Redis
// options and providers.
func (r *Resolver) Resolve(ctx context.Context, tc *v1alpha1.ToolCatalog) (*Config, error) {
	spec := tc.Spec
	if err := CheckKeyPrefix(tc); err != nil {
		return nil, err
	}
	cfg := &Config{
		Keys:           KeysOf(tc),
		QueriesPerTool: QueriesPerTool(spec),
		Concurrency:    int(orDefault(spec.QueryGeneration.Concurrency, embedding.DefaultConcurrency)),
		Channel:        spec.Publish.Channel,
		Retain:         int(orDefault(spec.Publish.RetainVersions, 5)),
		Resync:         DefaultResync,
		Search:         SearchOf(spec),
	}
	if cfg.Channel == "" {
		cfg.Channel = contract.DefaultChannel
	}
	if d := spec.Publish.ResyncInterval; d != nil && d.Duration > 0 {
		cfg.Resync = d.Duration
	}
	if l := spec.Learning; l.Enabled {
		cfg.Search.LearnFromRequests = true
		cfg.Learning = &Learning{
			PerTool: int(orDefault(l.QueriesPerTool, 5)), MinCount: int64(orDefault(l.MinCount, 2)), MinPrincipals: int(orDefault(l.MinPrincipals, 2)),
			MaxRecorded: int(orDefault(l.MaxRecorded, 10000)), Retention: DefaultLearningRetention,
		}
		if l.Retention != nil && l.Retention.Duration > 0 {
			cfg.Learning.Retention = l.Retention.Duration
		}
	}

	var err error
	if cfg.Redis, err = r.RedisOptions(ctx, tc); err != nil {
		return nil, err
	}
	if err := r.buildEmbedder(ctx, tc, cfg); err != nil {
		return nil, err
	}
	if err := r.buildGenerator(ctx, tc, cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// RedisOptions builds the connection settings of a catalog's Redis.
func (r *Resolver) RedisOptions(ctx context.Context, tc *v1alpha1.ToolCatalog) (redisconn.Options, error) {
	rs := tc.Spec.Redis
	o := redisconn.Options{Addresses: rs.Addresses, Mode: string(rs.Mode), MasterName: rs.MasterName, DB: int(rs.DB), Username: rs.Username}
	if o.Mode == "" {
		o.Mode = string(v1alpha1.RedisModeStandalone)
	}
	if o.Mode != string(v1alpha1.RedisModeSentinel) {
		o.MasterName = ""
	}
	if rs.PasswordSecretRef != nil {
		pw, err := r.SecretValue(ctx, tc.Namespace, rs.PasswordSecretRef, "spec.redis.passwordSecretRef")
		if err != nil {
			return o, err
		}
		o.Password = pw
	}
	if rs.TLS != nil && rs.TLS.Enabled {
		o.TLS = &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: rs.TLS.InsecureSkipVerify} //nolint:gosec // opt-in, documented as for testing only
		fp := fmt.Sprintf("insecure=%t", rs.TLS.InsecureSkipVerify)
		if rs.TLS.CASecretRef != nil {
			ca, err := r.SecretValue(ctx, tc.Namespace, rs.TLS.CASecretRef, "spec.redis.tls.caSecretRef")
			if err != nil {
				return o, err
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM([]byte(ca)) {
				return o, &Error{Reason: v1alpha1.ReasonInvalidConfiguration,
					Message: fmt.Sprintf("Secret %s key %s holds no PEM certificate: fix spec.redis.tls.caSecretRef", rs.TLS.CASecretRef.Name, rs.TLS.CASecretRef.Key)}
			}
			o.TLS.RootCAs = pool
			sum := sha256.Sum256([]byte(ca))
			fp += ",ca=" + hex.EncodeToString(sum[:8])
		}
		o.TLSFingerprint = fp
	}
	return o, nil
}

func (r *Resolver) buildEmbedder(ctx context.Context, tc *v1alpha1.ToolCatalog, cfg *Config) error {
	es := tc.Spec.Embedding
	switch es.Provider {
	case v1alpha1.ProviderBuiltin, "":
		if es.Model != "" && es.Model != embedding.BuiltinModel {
			return &Error{Reason: v1alpha1.ReasonInvalidConfiguration,
				Message: fmt.Sprintf("spec.embedding.model %q is not a builtin model: leave it empty or use %q", es.Model, embedding.BuiltinModel)}
		}
		if es.Dimensions != 0 && int(es.Dimensions) != embedding.BuiltinDimensions {
			return &Error{Reason: v1alpha1.ReasonInvalidConfiguration,
				Message: fmt.Sprintf("spec.embedding.dimensions %d is not supported by the builtin model (%d): leave it empty", es.Dimensions, embedding.BuiltinDimensions)}
		}
		cfg.Provider = string(v1alpha1.ProviderBuiltin)
		cfg.Dimensions = embedding.BuiltinDimensions
		return nil
	}
	api, err := r.openAIConfig(ctx, tc.Namespace, es.BaseURL, es.APIKeySecretRef, "spec.embedding.apiKeySecretRef")
	if err != nil {
		return err
	}
	if es.Timeout != nil {
		api.Timeout = es.Timeout.Duration
	}
	cfg.Providers.Embedding = &embedding.OpenAIEmbedderConfig{OpenAIConfig: api, Model: es.Model, Dimensions: int(es.Dimensions), BatchSize: int(es.BatchSize)}
	cfg.Provider = string(v1alpha1.ProviderOpenAI)
	cfg.Dimensions = int(es.Dimensions)
	return nil
}

func (r *Resolver) buildGenerator(ctx context.Context, tc *v1alpha1.ToolCatalog, cfg *Config) error {
	qs := tc.Spec.QueryGeneration
	if qs.Provider == v1alpha1.ProviderBuiltin || qs.Provider == "" {
		return nil
	}
	api, err := r.openAIConfig(ctx, tc.Namespace, qs.BaseURL, qs.APIKeySecretRef, "spec.queryGeneration.apiKeySecretRef")
	if err != nil {
		return err
	}
	if qs.MaxRetries != nil {
		api.Retry.MaxRetries = int(*qs.MaxRetries)
	}
	gc := embedding.OpenAIQueryGeneratorConfig{OpenAIConfig: api, Models: qs.Models}
	if fb := qs.Fallback; fb != nil {
		fapi, err := r.openAIConfig(ctx, tc.Namespace, fb.BaseURL, fb.APIKeySecretRef, "spec.queryGeneration.fallback.apiKeySecretRef")
		if err != nil {
			return err
		}
		fapi.Retry.MaxRetries = api.Retry.MaxRetries
		gc.Fallback = &embedding.OpenAIFallback{OpenAIConfig: fapi, Model: fb.Model}
	}
	cfg.Providers.Generation = &gc
	return nil
}

func (r *Resolver) openAIConfig(ctx context.Context, namespace, baseURL string, keyRef *v1alpha1.SecretKeySelector, field string) (embedding.OpenAIConfig, error) {
	c := embedding.OpenAIConfig{BaseURL: baseURL, Retry: embedding.DefaultRetryPolicy(), Observe: r.Observe}
	if r.RetryPolicy != nil {
		c.Retry = *r.RetryPolicy
	}
	if keyRef != nil {
		key, err := r.SecretValue(ctx, namespace, keyRef, field)
		if err != nil {
			return c, err
		}
		c.APIKey = embedding.Secret(key)
	}
	return c, nil
}

// SecretValue reads one key of an opted-in Secret with the uncached
// reader, so Secret data is never held in the informer cache.
func (r *Resolver) SecretValue(ctx context.Context, namespace string, ref *v1alpha1.SecretKeySelector, field string) (string, error) {
	v, err := secrets.Value(ctx, r.Reader, namespace, ref, field)
	if unusable := (*secrets.UnusableError)(nil); errors.As(err, &unusable) {
		return "", &Error{Reason: v1alpha1.ReasonSecretNotFound, Message: unusable.Message}
	}
	return string(v), err
}

// orDefaultFloat returns v, or d when v is unset; always a fresh pointer,
// so the published settings never alias the spec.
func orDefaultFloat(v *float64, d float64) *float64 {
	if v != nil {
		d = *v
	}
	return &d
}

func orDefault(v, d int32) int32 {
	if v == 0 {
		return d
	}
	return v
}
