package catalogconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/egress"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
)

// ProviderSettings are a catalog's providers as configured, their API
// keys read from Secrets. A nil field is the builtin provider.
type ProviderSettings struct {
	Embedding  *embedding.OpenAIEmbedderConfig
	Generation *embedding.OpenAIQueryGeneratorConfig
}

// Fingerprint identifies the settings, API keys included (as hashes), so
// a changed key or endpoint gets new clients and an unchanged one keeps
// its connections.
func (s ProviderSettings) Fingerprint() string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	_ = enc.Encode(s)
	key := func(k embedding.Secret) {
		sum := sha256.Sum256([]byte(k.Reveal()))
		h.Write(sum[:])
	}
	if e := s.Embedding; e != nil {
		key(e.APIKey)
	}
	if g := s.Generation; g != nil {
		key(g.APIKey)
		if g.Fallback != nil {
			key(g.Fallback.APIKey)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Providers are the clients of a catalog's providers.
type Providers struct {
	Embedder  embedding.Embedder
	Generator embedding.QueryGenerator
}

// BuildProviders makes the clients the settings describe. Every endpoint
// is a namespace user's choice, so each client reaches its endpoint only
// through policy (egress.Default() when nil): the URL is checked now, the
// address when it is dialled, and redirects are not followed. A setting
// the client refuses is a configuration error; an endpoint the policy
// refuses, an EgressDenied one.
func BuildProviders(s ProviderSettings, policy *egress.Policy) (Providers, error) {
	if policy == nil {
		policy = egress.Default()
	}
	p := Providers{Embedder: embedding.SentenceEmbedder{}, Generator: embedding.TemplateQueryGenerator{}}
	if s.Embedding != nil {
		cfg := *s.Embedding
		if err := through(policy, &cfg.OpenAIConfig, "spec.embedding.baseURL"); err != nil {
			return Providers{}, err
		}
		e, err := embedding.NewOpenAIEmbedder(cfg)
		if err != nil {
			return Providers{}, &Error{Reason: v1alpha1.ReasonInvalidConfiguration, Message: fmt.Sprintf("spec.embedding: %v", err)}
		}
		p.Embedder = e
	}
	if s.Generation != nil {
		cfg := *s.Generation
		if err := through(policy, &cfg.OpenAIConfig, "spec.queryGeneration.baseURL"); err != nil {
			return Providers{}, err
		}
		if cfg.Fallback != nil {
			fb := *cfg.Fallback
			if err := through(policy, &fb.OpenAIConfig, "spec.queryGeneration.fallback.baseURL"); err != nil {
				return Providers{}, err
			}
			cfg.Fallback = &fb
		}
		g, err := embedding.NewOpenAIQueryGenerator(cfg)
		if err != nil {
			return Providers{}, &Error{Reason: v1alpha1.ReasonInvalidConfiguration, Message: fmt.Sprintf("spec.queryGeneration: %v", err)}
		}
		p.Generator = g
	}
	return p, nil
}

// through gives a provider's configuration the policy's HTTP client for
// its endpoint, keeping the TLS settings of a client set before.
func through(policy *egress.Policy, c *embedding.OpenAIConfig, field string) error {
	var transport *http.Transport
	if c.HTTPClient != nil {
		transport, _ = c.HTTPClient.Transport.(*http.Transport)
	}
	hc, err := policy.Client(c.Endpoint(), transport)
	if err != nil {
		return &Error{Reason: v1alpha1.ReasonEgressDenied, Message: deniedMessage(field, c.Endpoint(), err)}
	}
	c.HTTPClient = hc
	return nil
}

// deniedMessage says that the URL in field may not be reached, and how
// to allow it, without repeating more of the URL than its origin.
func deniedMessage(field, raw string, err error) string {
	origin := "the endpoint"
	if u, perr := url.Parse(raw); perr == nil && u.Host != "" {
		origin = u.Scheme + "://" + u.Host + "/"
	}
	return fmt.Sprintf("%s %s may not be reached: %v; nothing was sent: ask the platform operators to allow it (--egress-allow %s) or use another endpoint", field, origin,
		strings.TrimPrefix(err.Error(), egress.ErrDenied.Error()+": "), origin)
}

// ProviderFactory gives a catalog the clients of its providers.
type ProviderFactory interface {
	// Providers returns the clients for the catalog's current settings.
	Providers(catalog string, s ProviderSettings) (Providers, error)
	// Forget drops what is held for a deleted catalog.
	Forget(catalog string)
}

// ProviderCache is the default ProviderFactory: it builds a catalog's
// clients once and reuses them (and their HTTP connections) for as long as
// the settings' fingerprint stays the same.
type ProviderCache struct {
	// Egress is the policy every provider endpoint is reached through;
	// egress.Default() when nil.
	Egress *egress.Policy

	mu      sync.Mutex
	entries map[string]cachedProviders
}

type cachedProviders struct {
	fingerprint string
	providers   Providers
}

var _ ProviderFactory = (*ProviderCache)(nil)

// Providers returns the cached clients, or builds them when the settings
// changed.
func (c *ProviderCache) Providers(catalog string, s ProviderSettings) (Providers, error) {
	fp := s.Fingerprint()
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[catalog]; ok && e.fingerprint == fp {
		return e.providers, nil
	}
	p, err := BuildProviders(s, c.Egress)
	if err != nil {
		return Providers{}, err
	}
	if c.entries == nil {
		c.entries = map[string]cachedProviders{}
	}
	c.entries[catalog] = cachedProviders{fingerprint: fp, providers: p}
	return p, nil
}

// Forget drops a catalog's clients.
func (c *ProviderCache) Forget(catalog string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, catalog)
}
