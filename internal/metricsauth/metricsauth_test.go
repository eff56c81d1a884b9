package metricsauth

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"

	"github.com/toolcatalog/tool-catalog-operator/internal/testing/suite"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/testenv"
)

var cfg *rest.Config

// shared is the API server the tests share, started by the first test
// that needs it.
var shared = suite.New(func(onStop func(func() error)) error {
	env, c, err := testenv.Start(filepath.Join("..", ".."), "")
	if err != nil {
		return err
	}
	onStop(env.Stop)
	cfg = c
	return nil
})

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

// forged is a token shaped as a service-account token of the cluster
// (a JWT naming an issuer and a service account), signed by nobody.
func forged(i int) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256","kid":"k"}`)) + "." +
		enc(fmt.Appendf(nil, `{"iss":"https://kubernetes.default.svc.cluster.local","sub":"system:serviceaccount:default:forged-%d","aud":["https://kubernetes.default.svc.cluster.local"]}`, i)) + "." + enc([]byte("signature"))
}

func newTestGuard(t *testing.T) *guard {
	t.Helper()
	shared.Use(t)
	authn, err := authenticationclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	authz, err := authorizationclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return newGuard(authn, authz, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) }), logr.Discard())
}

// scrape is one GET /metrics from address with token.
func scrape(g *guard, address, token string) int {
	r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	r.RemoteAddr = address + ":40000"
	r.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	g.ServeHTTP(w, r)
	return w.Code
}

// Whoever reaches the metrics port cannot lock Prometheus out: tokens
// that could never pass a review cost none; tokens shaped as the
// cluster's, from one address, spend that address's share only; and from
// a hundred addresses, which spend all there is for new tokens, they still
// leave a scraper let in before its own share when its kept answer ends.
func TestMetricsReviewsCannotBeStarved(t *testing.T) {
	g := newTestGuard(t)
	scraper, err := testenv.MetricsReaderToken(t.Context(), cfg, "scraper", true)
	if err != nil {
		t.Fatal(err)
	}
	newcomer, err := testenv.MetricsReaderToken(t.Context(), cfg, "newcomer", true)
	if err != nil {
		t.Fatal(err)
	}

	for i := range 100 {
		if code := scrape(g, "10.0.0.1", fmt.Sprintf("made-up-%d", i)); code != http.StatusUnauthorized {
			t.Fatalf("a made-up token: %d, want 401 without a review", code)
		}
	}
	throttled := 0
	for i := range 50 {
		if scrape(g, "10.0.0.1", forged(i)) == http.StatusTooManyRequests {
			throttled++
		}
	}
	if throttled < 50-sourceBurst-1 {
		t.Fatalf("one address had %d of 50 forged tokens reviewed: more than its share", 50-throttled)
	}
	// Every answer of the scraper is kept for a moment only: each scrape
	// needs a review, as one does when the kept answer ends.
	g.allowedTTL = 0
	if code := scrape(g, "10.0.0.2", scraper); code != http.StatusOK {
		t.Fatalf("the scraper after one address's flood: %d, want 200", code)
	}

	for a := range 100 {
		for i := range sourceBurst {
			scrape(g, fmt.Sprintf("10.1.%d.%d", a/250, a%250), forged(1000+a*sourceBurst+i))
		}
	}
	// The flood spent what new tokens have: a new reader now waits...
	if code := scrape(g, "10.0.0.3", newcomer); code != http.StatusTooManyRequests {
		t.Fatalf("a new token after the flood of 100 addresses: %d, want 429 (the flood did not spend the budget)", code)
	}
	// ...and the scraper let in before is reviewed from its own share.
	if code := scrape(g, "10.0.0.2", scraper); code != http.StatusOK {
		t.Fatalf("the scraper after the flood of 100 addresses: %d, want 200", code)
	}
}
