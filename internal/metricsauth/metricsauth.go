// Package metricsauth serves /metrics only to those the cluster lets read
// it: the client's bearer token is checked with a TokenReview and its
// identity's right to get the non-resource URL /metrics with a
// SubjectAccessReview, as Kubernetes components guard their own metrics.
// Both the manager and the gateway use it; the metrics name every
// namespace's catalogs and tools.
//
// It does what controller-runtime's metrics/filters package does with
// client-go's typed clients the binaries already link: that package
// brings k8s.io/apiserver's authenticator and authorizer factories, about
// 6 MB more in each binary.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/toolcatalog/tool-catalog-operator/internal/budget"
)

// Answers are kept this long: allowed a minute, refused ten seconds.
const (
	allowedTTL = time.Minute
	refusedTTL = 10 * time.Second
	// maxKept bounds the answers kept; past it they are dropped at once.
	maxKept = 1024
)

// reviewRate bounds the reviews a second of tokens not seen lately, in
// bursts of twice as many: a scraper needs one a minute. Each client
// address takes from a share of its own first (sourceRate, in bursts of
// sourceBurst), so one address sending made-up tokens cannot spend them
// all; and a token allowed within knownFor, whose kept answer expired,
// is reviewed again from a share of its own (knownRate), so the
// scrapers already let in are never locked out by newcomers.
const (
	reviewRate  = 5
	sourceRate  = 1
	sourceBurst = 3
	knownRate   = 1
	knownFor    = time.Hour
)

// Provider is a metricsserver.Options.FilterProvider.
func Provider(cfg *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
	// The two typed clients, not a whole clientset: a clientset links a
	// client of every API group into the binary.
	authn, err := authenticationclient.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	authz, err := authorizationclient.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return newGuard(authn, authz, next, log), nil
	}, nil
}

// Wrap guards next as Provider's filter does, for a server of one's own.
func Wrap(cfg *rest.Config, log logr.Logger, next http.Handler) (http.Handler, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	filter, err := Provider(cfg, hc)
	if err != nil {
		return nil, err
	}
	return filter(log, next)
}

type answer struct {
	code  int // 0 when allowed
	until time.Time
}

type guard struct {
	authn   authenticationclient.AuthenticationV1Interface
	authz   authorizationclient.AuthorizationV1Interface
	next    http.Handler
	log     logr.Logger
	limiter *rate.Limiter
	// sources are the shares of each client address, known the share of
	// the tokens allowed lately.
	sources *budget.PerSource
	known   *rate.Limiter
	// allowedTTL and refusedTTL are how long answers are kept.
	allowedTTL, refusedTTL time.Duration

	mu   sync.Mutex
	kept map[[sha256.Size]byte]answer
	// allowed holds when each token allowed lately was last allowed.
	allowed map[[sha256.Size]byte]time.Time
}

func newGuard(authn authenticationclient.AuthenticationV1Interface, authz authorizationclient.AuthorizationV1Interface, next http.Handler, log logr.Logger) *guard {
	return &guard{authn: authn, authz: authz, next: next, log: log,
		limiter: rate.NewLimiter(reviewRate, 2*reviewRate), sources: &budget.PerSource{Limit: sourceRate, Burst: sourceBurst},
		known: rate.NewLimiter(knownRate, 2*knownRate), allowedTTL: allowedTTL, refusedTTL: refusedTTL,
		kept: map[[sha256.Size]byte]answer{}, allowed: map[[sha256.Size]byte]time.Time{}}
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
		http.Error(w, "Unauthorized: send a bearer token of an identity that may get /metrics", http.StatusUnauthorized)
		return
	}
	verb := strings.ToLower(r.Method)
	sum := sha256.Sum256([]byte(verb + " " + r.URL.Path + " " + token))
	source, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		source = r.RemoteAddr
	}
	code := g.decide(r.Context(), sum, token, verb, r.URL.Path, source)
	switch code {
	case 0:
		g.next.ServeHTTP(w, r)
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
		http.Error(w, "Unauthorized", code)
	case http.StatusForbidden:
		http.Error(w, "Forbidden: get on "+r.URL.Path+" is not granted (the metrics-reader ClusterRole grants it)", code)
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", "1")
		http.Error(w, "Too many new tokens: retry later", code)
	default:
		http.Error(w, "the token could not be checked; retry", code)
	}
}

// decide returns 0 when the token's identity may verb path, else the
// HTTP status to answer; answers are kept a while. A token that cannot
// be one the API server issued (not a JWT naming its issuer) is refused
// without a review; a new one is reviewed from its source's share, then
// from everyone's; one allowed lately, from the share of those.
func (g *guard) decide(ctx context.Context, sum [sha256.Size]byte, token, verb, path, source string) int {
	now := time.Now()
	g.mu.Lock()
	a, ok := g.kept[sum]
	last, known := g.allowed[sum]
	g.mu.Unlock()
	if ok && now.Before(a.until) {
		return a.code
	}
	if !jwtWithIssuer(token) {
		return g.keep(sum, http.StatusUnauthorized, now)
	}
	switch {
	case known && now.Sub(last) < knownFor:
		if !g.known.Allow() {
			return http.StatusTooManyRequests
		}
	case !g.sources.Allow(source) || !g.limiter.Allow():
		return http.StatusTooManyRequests
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tr, err := g.authn.TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, createOptions)
	if err != nil {
		g.log.Error(err, "Reviewing a metrics client's token")
		return http.StatusServiceUnavailable
	}
	if !tr.Status.Authenticated {
		return g.keep(sum, http.StatusUnauthorized, now)
	}
	u := tr.Status.User
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := g.authz.SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}}, createOptions)
	if err != nil {
		g.log.Error(err, "Authorizing a metrics client")
		return http.StatusServiceUnavailable
	}
	if !sar.Status.Allowed {
		return g.keep(sum, http.StatusForbidden, now)
	}
	return g.keep(sum, 0, now)
}

// jwtWithIssuer reports whether token is shaped as the tokens the API
// server issues and reviews: a JWT whose claims name an issuer. The
// shape is not proof of anything; it only spares a review for tokens
// that could never pass one.
func jwtWithIssuer(token string) bool {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || len(token) > 16<<10 {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return false
	}
	var claims struct {
		Issuer string `json:"iss"`
	}
	return json.Unmarshal(raw, &claims) == nil && claims.Issuer != ""
}

// keep remembers an answer and returns its code.
func (g *guard) keep(sum [sha256.Size]byte, code int, now time.Time) int {
	ttl := g.allowedTTL
	if code != 0 {
		ttl = g.refusedTTL
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if code == 0 {
		if len(g.allowed) >= maxKept {
			for k, at := range g.allowed {
				if now.Sub(at) >= knownFor {
					delete(g.allowed, k)
				}
			}
		}
		if len(g.allowed) < maxKept {
			g.allowed[sum] = now
		}
	}
	if len(g.kept) >= maxKept {
		for k, a := range g.kept {
			if now.After(a.until) {
				delete(g.kept, k)
			}
		}
		if len(g.kept) >= maxKept {
			clear(g.kept)
		}
	}
	g.kept[sum] = answer{code: code, until: now.Add(ttl)}
	return code
}

var createOptions = metav1.CreateOptions{}
