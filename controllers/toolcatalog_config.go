package controllers

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/internal/store"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// catalogConfig is a ToolCatalog's spec resolved against its Secrets.
type catalogConfig struct {
	keys      contract.Keys
	redis     store.Options
	embedder  embedding.Embedder
	generator embedding.QueryGenerator
	// provider is the embedding provider's name for the document.
	provider string
	// dimensions is the configured vector length, 0 when any is accepted.
	dimensions     int
	queriesPerTool int
	concurrency    int
	channel        string
	retain         int
	resync         time.Duration
	search         contract.SearchDefaults
}

// configError is a problem the user must fix in the catalog or a Secret;
// retrying does not help until something changes.
type configError struct {
	reason  string
	message string
}

func (e *configError) Error() string { return e.message }

// secretNames lists the Secrets a catalog refers to, for the field index
// that maps a changed Secret to its catalogs.
func secretNames(tc *v1alpha1.ToolCatalog) []string {
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

// resolveConfig reads the Secrets a catalog refers to and builds its Redis
// options and providers.
func (r *ToolCatalogReconciler) resolveConfig(ctx context.Context, tc *v1alpha1.ToolCatalog) (*catalogConfig, error) {
	spec := tc.Spec
	cfg := &catalogConfig{
		keys:           contract.Keys{Prefix: spec.Redis.KeyPrefix},
		queriesPerTool: int(orDefault(spec.QueryGeneration.QueriesPerTool, 5)),
		concurrency:    int(orDefault(spec.QueryGeneration.Concurrency, embedding.DefaultConcurrency)),
		channel:        spec.Publish.Channel,
		retain:         int(orDefault(spec.Publish.RetainVersions, 5)),
		resync:         10 * time.Minute,
		search: contract.SearchDefaults{
			Method:              string(spec.Search.Method),
			TopK:                int(orDefault(spec.Search.TopK, 5)),
			SimilarityThreshold: spec.Search.SimilarityThreshold,
			AlwaysInclude:       spec.Search.AlwaysInclude,
		},
	}
	if cfg.keys.Prefix == "" {
		cfg.keys.Prefix = contract.DefaultPrefix(tc.Namespace, tc.Name)
	}
	if cfg.channel == "" {
		cfg.channel = contract.DefaultChannel
	}
	if cfg.search.Method == "" {
		cfg.search.Method = string(v1alpha1.SearchHybrid)
	}
	if d := spec.Publish.ResyncInterval; d != nil && d.Duration > 0 {
		cfg.resync = d.Duration
	}

	var err error
	if cfg.redis, err = r.redisOptions(ctx, tc); err != nil {
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

func (r *ToolCatalogReconciler) redisOptions(ctx context.Context, tc *v1alpha1.ToolCatalog) (store.Options, error) {
	rs := tc.Spec.Redis
	o := store.Options{Addresses: rs.Addresses, Mode: string(rs.Mode), MasterName: rs.MasterName, DB: int(rs.DB), Username: rs.Username}
	if o.Mode == "" {
		o.Mode = string(v1alpha1.RedisModeStandalone)
	}
	if o.Mode != string(v1alpha1.RedisModeSentinel) {
		o.MasterName = ""
	}
	if rs.PasswordSecretRef != nil {
		pw, err := r.secretValue(ctx, tc.Namespace, rs.PasswordSecretRef, "spec.redis.passwordSecretRef")
		if err != nil {
			return o, err
		}
		o.Password = pw
	}
	if rs.TLS != nil && rs.TLS.Enabled {
		o.TLS = &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: rs.TLS.InsecureSkipVerify} //nolint:gosec // opt-in, documented as for testing only
		fp := fmt.Sprintf("insecure=%t", rs.TLS.InsecureSkipVerify)
		if rs.TLS.CASecretRef != nil {
			ca, err := r.secretValue(ctx, tc.Namespace, rs.TLS.CASecretRef, "spec.redis.tls.caSecretRef")
			if err != nil {
				return o, err
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM([]byte(ca)) {
				return o, &configError{reason: v1alpha1.ReasonInvalidConfiguration,
					message: fmt.Sprintf("Secret %s key %s holds no PEM certificate: fix spec.redis.tls.caSecretRef", rs.TLS.CASecretRef.Name, rs.TLS.CASecretRef.Key)}
			}
			o.TLS.RootCAs = pool
			sum := sha256.Sum256([]byte(ca))
			fp += ",ca=" + hex.EncodeToString(sum[:8])
		}
		o.TLSFingerprint = fp
	}
	return o, nil
}

func (r *ToolCatalogReconciler) buildEmbedder(ctx context.Context, tc *v1alpha1.ToolCatalog, cfg *catalogConfig) error {
	es := tc.Spec.Embedding
	switch es.Provider {
	case v1alpha1.ProviderBuiltin, "":
		if es.Model != "" && es.Model != embedding.BuiltinLexicalModel {
			return &configError{reason: v1alpha1.ReasonInvalidConfiguration,
				message: fmt.Sprintf("spec.embedding.model %q is not a builtin model: leave it empty or use %q", es.Model, embedding.BuiltinLexicalModel)}
		}
		if es.Dimensions != 0 && int(es.Dimensions) != embedding.BuiltinLexicalDimensions {
			return &configError{reason: v1alpha1.ReasonInvalidConfiguration,
				message: fmt.Sprintf("spec.embedding.dimensions %d is not supported by the builtin model (%d): leave it empty", es.Dimensions, embedding.BuiltinLexicalDimensions)}
		}
		cfg.embedder = embedding.LexicalEmbedder{}
		cfg.provider = string(v1alpha1.ProviderBuiltin)
		cfg.dimensions = embedding.BuiltinLexicalDimensions
		return nil
	}
	api, err := r.openAIConfig(ctx, tc.Namespace, es.BaseURL, es.APIKeySecretRef, "spec.embedding.apiKeySecretRef")
	if err != nil {
		return err
	}
	if es.Timeout != nil {
		api.Timeout = es.Timeout.Duration
	}
	e, err := embedding.NewOpenAIEmbedder(embedding.OpenAIEmbedderConfig{OpenAIConfig: api, Model: es.Model, Dimensions: int(es.Dimensions), BatchSize: int(es.BatchSize)})
	if err != nil {
		return &configError{reason: v1alpha1.ReasonInvalidConfiguration, message: fmt.Sprintf("spec.embedding: %v", err)}
	}
	cfg.embedder = e
	cfg.provider = string(v1alpha1.ProviderOpenAI)
	cfg.dimensions = int(es.Dimensions)
	return nil
}

func (r *ToolCatalogReconciler) buildGenerator(ctx context.Context, tc *v1alpha1.ToolCatalog, cfg *catalogConfig) error {
	qs := tc.Spec.QueryGeneration
	if qs.Provider == v1alpha1.ProviderBuiltin || qs.Provider == "" {
		cfg.generator = embedding.TemplateQueryGenerator{}
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
	g, err := embedding.NewOpenAIQueryGenerator(gc)
	if err != nil {
		return &configError{reason: v1alpha1.ReasonInvalidConfiguration, message: fmt.Sprintf("spec.queryGeneration: %v", err)}
	}
	cfg.generator = g
	return nil
}

func (r *ToolCatalogReconciler) openAIConfig(ctx context.Context, namespace, baseURL string, keyRef *v1alpha1.SecretKeySelector, field string) (embedding.OpenAIConfig, error) {
	c := embedding.OpenAIConfig{BaseURL: baseURL, Retry: embedding.DefaultRetryPolicy()}
	if r.RetryPolicy != nil {
		c.Retry = *r.RetryPolicy
	}
	if keyRef != nil {
		key, err := r.secretValue(ctx, namespace, keyRef, field)
		if err != nil {
			return c, err
		}
		c.APIKey = embedding.Secret(key)
	}
	return c, nil
}

// secretValue reads one key of a Secret with the uncached reader, so
// Secret data is never held in the informer cache.
func (r *ToolCatalogReconciler) secretValue(ctx context.Context, namespace string, ref *v1alpha1.SecretKeySelector, field string) (string, error) {
	s := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return "", &configError{reason: v1alpha1.ReasonSecretNotFound,
				message: fmt.Sprintf("Secret %s/%s named in %s does not exist: create it or fix the reference", namespace, ref.Name, field)}
		}
		return "", fmt.Errorf("reading Secret %s/%s: %w", namespace, ref.Name, err)
	}
	v, ok := s.Data[ref.Key]
	if !ok {
		return "", &configError{reason: v1alpha1.ReasonSecretNotFound,
			message: fmt.Sprintf("Secret %s/%s has no key %q named in %s", namespace, ref.Name, ref.Key, field)}
	}
	return string(v), nil
}

func orDefault(v, d int32) int32 {
	if v == 0 {
		return d
	}
	return v
}
