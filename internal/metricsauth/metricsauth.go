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
)

// Answers are kept this long: allowed a minute, refused ten seconds.
const (
	allowedTTL = time.Minute
	refusedTTL = 10 * time.Second
	// maxKept bounds the answers kept; past it they are dropped at once.
	maxKept = 1024
)

// reviewRate bounds the reviews a second of tokens not seen lately, in
// bursts of twice as many: a scraper needs one a minute.
const reviewRate = 5

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
		return &guard{authn: authn, authz: authz, next: next, log: log, kept: map[[sha256.Size]byte]answer{},
			limiter: rate.NewLimiter(reviewRate, 2*reviewRate)}, nil
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

	mu   sync.Mutex
	kept map[[sha256.Size]byte]answer
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
	code := g.decide(r.Context(), sum, token, verb, r.URL.Path)
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
// HTTP status to answer; answers are kept a while.
func (g *guard) decide(ctx context.Context, sum [sha256.Size]byte, token, verb, path string) int {
	now := time.Now()
	g.mu.Lock()
	if a, ok := g.kept[sum]; ok && now.Before(a.until) {
		g.mu.Unlock()
		return a.code
	}
	g.mu.Unlock()
	if !g.limiter.Allow() {
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

// keep remembers an answer and returns its code.
func (g *guard) keep(sum [sha256.Size]byte, code int, now time.Time) int {
	ttl := allowedTTL
	if code != 0 {
		ttl = refusedTTL
	}
	g.mu.Lock()
	defer g.mu.Unlock()
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
