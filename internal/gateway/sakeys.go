package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// ServiceAccountKeys are the keys the API server signs service-account
// tokens with (its /openid/v1/jwks). A token shaped as a service-account
// token that no key of the cluster signed is refused without a
// TokenReview: anyone can shape a JWT, nobody but the cluster can sign
// one, so forged tokens spend none of the reviews legitimate tokens need.
// A signed token is still reviewed (it may be revoked). The keys are read
// again for a key ID they do not hold at most once every Every, so
// tokens naming made-up key IDs cost no more reads than that.
type ServiceAccountKeys struct {
	// Fetch reads the JSON Web Key Set.
	Fetch func(ctx context.Context) ([]byte, error)
	// Every bounds how often the keys are read again; 30 s when zero.
	Every time.Duration

	mu      sync.Mutex
	keys    *jose.JSONWebKeySet
	fetched time.Time
}

// signature is what the cluster's keys say of a token.
type signature int

const (
	// signatureUnknown: the keys could not be read; a review decides.
	signatureUnknown signature = iota
	signedByCluster
	notSignedByCluster
)

// signatureAlgorithms are those the API server signs tokens with.
var signatureAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.ES256, jose.ES384, jose.ES512, jose.PS256, jose.PS384, jose.PS512}

// check says whether a key of the cluster signed token.
func (k *ServiceAccountKeys) check(ctx context.Context, token string) signature {
	jws, err := jose.ParseSigned(token, signatureAlgorithms)
	if err != nil || len(jws.Signatures) != 1 {
		return notSignedByCluster
	}
	kid := jws.Signatures[0].Header.KeyID
	keys := k.current(ctx, kid)
	if keys == nil {
		return signatureUnknown
	}
	candidates := keys.Keys
	if kid != "" {
		candidates = keys.Key(kid)
	}
	for _, key := range candidates {
		if _, err := jws.Verify(key.Key); err == nil {
			return signedByCluster
		}
	}
	return notSignedByCluster
}

// current returns the keys, read again when they do not hold kid and were
// last read more than Every ago; nil when they were never read.
func (k *ServiceAccountKeys) current(ctx context.Context, kid string) *jose.JSONWebKeySet {
	every := k.Every
	if every <= 0 {
		every = 30 * time.Second
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys != nil && (len(k.keys.Key(kid)) > 0 || kid == "") || time.Since(k.fetched) < every {
		return k.keys
	}
	k.fetched = time.Now()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	raw, err := k.Fetch(ctx)
	if err != nil {
		return k.keys
	}
	var set jose.JSONWebKeySet
	if json.Unmarshal(raw, &set) == nil && len(set.Keys) > 0 {
		k.keys = &set
	}
	return k.keys
}

// FetchKeys reads a JSON Web Key Set from url with hc, at most 1 MiB.
func FetchKeys(hc *http.Client, url string) func(ctx context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("reading %s: HTTP %d", url, resp.StatusCode)
		}
		return io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	}
}
