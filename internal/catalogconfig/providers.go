package catalogconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
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

// BuildProviders makes the clients the settings describe. A setting the
// client refuses is a configuration error.
func BuildProviders(s ProviderSettings) (Providers, error) {
	p := Providers{Embedder: embedding.SentenceEmbedder{}, Generator: embedding.TemplateQueryGenerator{}}
	if s.Embedding != nil {
		e, err := embedding.NewOpenAIEmbedder(*s.Embedding)
		if err != nil {
			return Providers{}, &Error{Reason: v1alpha1.ReasonInvalidConfiguration, Message: fmt.Sprintf("spec.embedding: %v", err)}
		}
		p.Embedder = e
	}
	if s.Generation != nil {
		g, err := embedding.NewOpenAIQueryGenerator(*s.Generation)
		if err != nil {
			return Providers{}, &Error{Reason: v1alpha1.ReasonInvalidConfiguration, Message: fmt.Sprintf("spec.queryGeneration: %v", err)}
		}
		p.Generator = g
	}
	return p, nil
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
	p, err := BuildProviders(s)
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
