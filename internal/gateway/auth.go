package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/internal/budget"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
)

// Principal is who is asking: a user name and its groups.
type Principal struct {
	User   string
	Groups []string
	// token is the bearer token the principal authenticated with, and
	// audiences those it was issued for as its issuer or the TokenReview
	// confirmed them (none for static tokens): a ToolSource with
	// callerIdentity Passthrough passes the token on only to a server of
	// one of these audiences.
	token     string
	audiences []string
}

// Anonymous is the principal of a client without a token, where a catalog
// allows it.
var Anonymous = Principal{User: "system:anonymous", Groups: []string{"system:unauthenticated"}}

// String names the principal for logs and errors: never its token.
func (p Principal) String() string {
	if len(p.Groups) == 0 {
		return p.User
	}
	return p.User + " (" + strings.Join(p.Groups, ", ") + ")"
}

// key identifies a principal in maps: each name is length-prefixed, so
// two principals never share a key, whatever their names hold.
func (p Principal) key() string {
	var b strings.Builder
	for _, name := range append([]string{p.User}, p.Groups...) {
		b.WriteString(strconv.Itoa(len(name)))
		b.WriteByte(':')
		b.WriteString(name)
	}
	return b.String()
}

// ErrUnauthenticated means the token is not valid.
var ErrUnauthenticated = errors.New("the bearer token is not valid")

// ErrTooManyReviews means tokens the gateway does not know arrive faster
// than it lets itself ask the API server about them.
var ErrTooManyReviews = errors.New("too many unknown tokens: retry later")

// Verifier checks the bearer tokens of one kind.
type Verifier interface {
	// Accepts reports whether token is of the verifier's kind, from what
	// can be read of it unverified (a static token's sum, a JWT's issuer
	// and audience): a token goes to the first verifier that accepts it
	// and to no other, so a token of an OpenID Connect issuer is never
	// sent to the API server.
	Accepts(token string) bool
	// Verify checks token: the principal it stands for and when the
	// answer expires (zero for no expiry of its own), an error wrapping
	// ErrUnauthenticated when the token is not valid, another error when
	// the verifier could not answer.
	Verify(ctx context.Context, token string) (Principal, time.Time, error)
	// Costly reports whether a check costs a request (a review, a read of
	// the issuer's keys): such answers are cached, and tokens not seen
	// lately rate limited.
	Costly() bool
}

// DefaultTokenAudience is the audience service-account tokens must be
// issued for (a projected token with audience toolcatalog-gateway), so a
// token meant for the API server or another service is not accepted, and
// a token given to the gateway is useless elsewhere.
const DefaultTokenAudience = "toolcatalog-gateway"

// Authenticator turns bearer tokens into principals with a list of
// verifiers, each of one kind of token: the first that accepts a token
// checks it, and no other sees it. Run lists the static tokens, then each
// OpenID Connect issuer (JWTs verified locally against the issuer's
// keys), then the Kubernetes TokenReview API. Answers of verifiers whose
// check costs a request are kept for a short while, and tokens they have
// not seen lately are rate limited.
type Authenticator struct {
	// Verifiers are asked in order; a token none accepts is not valid.
	Verifiers []Verifier
	// TTL is how long a costly verifier's answer, accepted or refused, is
	// kept; 30 s when zero.
	TTL time.Duration
	// Checks of tokens not in the cache are limited by Limiter, for all
	// clients together; none when nil. SourceLimit and SourceBurst bound
	// each source (the client's address, WithSource) first, so that one
	// source flooding the gateway with made-up tokens takes a share of
	// the reviews, not all of them; no bound per source when zero.
	Limiter     *rate.Limiter
	SourceLimit rate.Limit
	SourceBurst int

	mu      sync.Mutex
	cached  map[[sha256.Size]byte]reviewed
	sources *budget.PerSource
}

// sourceKey holds the source of a request in its context.
type sourceKey struct{}

// WithSource records in ctx where the request being authenticated comes
// from: the client's address.
func WithSource(ctx context.Context, source string) context.Context {
	return context.WithValue(ctx, sourceKey{}, source)
}

// allowSource takes a review from the bucket of ctx's source.
func (a *Authenticator) allowSource(ctx context.Context) bool {
	source, _ := ctx.Value(sourceKey{}).(string)
	a.mu.Lock()
	if a.sources == nil {
		a.sources = &budget.PerSource{Limit: a.SourceLimit, Burst: a.SourceBurst}
	}
	sources := a.sources
	a.mu.Unlock()
	return sources.Allow(source)
}

type reviewed struct {
	principal Principal
	until     time.Time
	refused   bool
}

// Authenticate returns the token's principal, ErrUnauthenticated when no
// source accepts it, or another error when a source could not answer. A
// principal whose user name says it is a group ("group:...", as
// permissions name groups) or holds control characters is refused,
// whichever source named it: permissions could not tell it from the
// group, nor logs from another principal.
func (a *Authenticator) Authenticate(ctx context.Context, token string) (Principal, error) {
	p, err := a.authenticate(ctx, token)
	if err == nil && !plainName(p.User) {
		return Principal{}, fmt.Errorf("%w: the user name %q cannot be told from a group or another user", ErrUnauthenticated, p.User)
	}
	return p, err
}

// plainName reports whether a user name is neither empty, nor a group's
// ("group:..."), nor holds control characters.
func plainName(user string) bool {
	return user != "" && !strings.HasPrefix(user, toolcatalog.GroupPrefix) && strings.IndexFunc(user, unicode.IsControl) < 0
}

func (a *Authenticator) authenticate(ctx context.Context, token string) (Principal, error) {
	if token == "" {
		return Principal{}, ErrUnauthenticated
	}
	sum := sha256.Sum256([]byte(token))
	// Verifiers that cost nothing are asked in order until the first
	// costly one; from there a token's kept answer is looked up before
	// any verifier reads the token.
	rest := a.Verifiers
	for len(rest) > 0 && !rest[0].Costly() {
		if rest[0].Accepts(token) {
			p, _, err := rest[0].Verify(ctx, token)
			return p, err
		}
		rest = rest[1:]
	}
	a.mu.Lock()
	if r, ok := a.cached[sum]; ok && time.Now().Before(r.until) {
		a.mu.Unlock()
		if r.refused {
			return Principal{}, ErrUnauthenticated
		}
		return r.principal, nil
	}
	a.mu.Unlock()
	i := slices.IndexFunc(rest, func(v Verifier) bool { return v.Accepts(token) })
	if i < 0 {
		return Principal{}, ErrUnauthenticated
	}
	v := rest[i]
	if !v.Costly() {
		p, _, err := v.Verify(ctx, token)
		return p, err
	}
	// Tokens not seen lately cost a review or, with a key ID the gateway
	// does not know, a read of the issuer's keys: they are rate limited,
	// per source first, then all together.
	if !a.allowSource(ctx) || (a.Limiter != nil && !a.Limiter.Allow()) {
		return Principal{}, ErrTooManyReviews
	}
	p, expiry, err := v.Verify(ctx, token)
	switch {
	case errors.Is(err, ErrUnauthenticated):
		a.remember(sum, reviewed{refused: true}, time.Time{})
		return Principal{}, ErrUnauthenticated
	case err != nil:
		return Principal{}, err
	}
	a.remember(sum, reviewed{principal: p}, expiry)
	return p, nil
}

// issuers are the OpenID Connect issuers among the verifiers.
func (a *Authenticator) issuers() []*OIDCIssuer {
	var out []*OIDCIssuer
	for _, v := range a.Verifiers {
		if i, ok := v.(*OIDCIssuer); ok {
			out = append(out, i)
		}
	}
	return out
}

// TokenReviewer verifies Kubernetes service-account tokens (JWTs of the
// cluster's issuer) with the TokenReview API.
type TokenReviewer struct {
	// Reviews creates TokenReviews.
	Reviews client.Client
	// Audiences are the audiences a reviewed token must have (one of
	// them): the review asks for them and its answer must name one.
	// Without them the API server's own audience would do: Run sets
	// DefaultTokenAudience when none is configured.
	Audiences []string
	// Keys, when set, refuse a token no key of the cluster signed
	// before it costs a review.
	Keys *ServiceAccountKeys
}

// Accepts takes JWTs that name an issuer and, when audiences are set, one
// of them, and with Keys, that a key of the cluster signed: other tokens
// would cost a review only to be refused.
func (t *TokenReviewer) Accepts(token string) bool {
	claims := unverifiedClaims(token)
	if claims.Issuer == "" {
		return false
	}
	if len(t.Audiences) > 0 && !slices.ContainsFunc(claims.Audience, func(aud string) bool { return slices.Contains(t.Audiences, aud) }) {
		return false
	}
	return t.Keys == nil || t.Keys.check(context.Background(), token) != notSignedByCluster
}

// Costly is true: each check is a request to the API server.
func (t *TokenReviewer) Costly() bool { return true }

// Verify reviews the token.
func (t *TokenReviewer) Verify(ctx context.Context, token string) (Principal, time.Time, error) {
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: t.Audiences}}
	if err := t.Reviews.Create(ctx, tr); err != nil {
		return Principal{}, time.Time{}, fmt.Errorf("reviewing the token: %w", err)
	}
	// The API server answers with the audiences the token was issued
	// for among those asked; one of ours must be there.
	audienceOK := len(t.Audiences) == 0 || slices.ContainsFunc(tr.Status.Audiences, func(aud string) bool { return slices.Contains(t.Audiences, aud) })
	if !tr.Status.Authenticated || !audienceOK {
		return Principal{}, time.Time{}, ErrUnauthenticated
	}
	return Principal{User: tr.Status.User.Username, Groups: slices.Sorted(slices.Values(tr.Status.User.Groups)), token: token,
		// The review verified the token's signature, so its own aud claim
		// can be trusted; the review's answer names only the audiences
		// the gateway asked about.
		audiences: unverifiedClaims(token).Audience}, time.Time{}, nil
}

// remember keeps an answer for TTL, or until expiry when that is sooner,
// and forgets expired ones.
func (a *Authenticator) remember(sum [sha256.Size]byte, r reviewed, expiry time.Time) {
	ttl := a.TTL
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cached == nil {
		a.cached = map[[sha256.Size]byte]reviewed{}
	}
	now := time.Now()
	for k, c := range a.cached {
		if now.After(c.until) {
			delete(a.cached, k)
		}
	}
	r.until = now.Add(ttl)
	if !expiry.IsZero() && expiry.Before(r.until) {
		r.until = expiry
	}
	a.cached[sum] = r
}

// StaticTokens are tokens mapped to principals in a file of the
// kube-apiserver token-file format: one CSV line per token,
// token,user,uid[,"group1,group2"]. The file is read again when it
// changes (a mounted Secret is updated in place); a missing file means no
// static tokens. Tokens are held as sha256 sums only.
type StaticTokens struct {
	Path string

	mu      sync.Mutex
	modTime time.Time
	size    int64
	tokens  map[[sha256.Size]byte]Principal
}

// Accepts takes the tokens of the file, and every token when the file
// cannot be read (Verify says why).
func (s *StaticTokens) Accepts(token string) bool {
	_, ok, err := s.Lookup(sha256.Sum256([]byte(token)))
	return ok || err != nil
}

// Costly is false: the tokens are in memory.
func (s *StaticTokens) Costly() bool { return false }

// Verify returns the principal of a static token.
func (s *StaticTokens) Verify(_ context.Context, token string) (Principal, time.Time, error) {
	p, ok, err := s.Lookup(sha256.Sum256([]byte(token)))
	switch {
	case err != nil:
		return Principal{}, time.Time{}, err
	case !ok:
		return Principal{}, time.Time{}, ErrUnauthenticated
	}
	return p, time.Time{}, nil
}

// Lookup returns the principal of a token's sum.
func (s *StaticTokens) Lookup(sum [sha256.Size]byte) (Principal, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reload(); err != nil {
		return Principal{}, false, err
	}
	p, ok := s.tokens[sum]
	return p, ok, nil
}

func (s *StaticTokens) reload() error {
	fi, err := os.Stat(s.Path)
	if errors.Is(err, os.ErrNotExist) {
		s.tokens, s.modTime, s.size = nil, time.Time{}, 0
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading static tokens: %w", err)
	}
	if s.tokens != nil && fi.ModTime().Equal(s.modTime) && fi.Size() == s.size {
		return nil
	}
	f, err := os.Open(s.Path)
	if err != nil {
		return fmt.Errorf("reading static tokens: %w", err)
	}
	defer func() { _ = f.Close() }()
	tokens, err := ParseTokenFile(f)
	if err != nil {
		return fmt.Errorf("static tokens %s: %w", s.Path, err)
	}
	s.tokens, s.modTime, s.size = tokens, fi.ModTime(), fi.Size()
	return nil
}

// ParseTokenFile reads a token file: token,user,uid[,"group1,group2"] per
// line; blank lines and lines starting with # are skipped.
func ParseTokenFile(r io.Reader) (map[[sha256.Size]byte]Principal, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.Comment = '#'
	cr.TrimLeadingSpace = true
	out := map[[sha256.Size]byte]Principal{}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		line, _ := cr.FieldPos(0)
		if len(rec) < 3 || strings.TrimSpace(rec[0]) == "" || strings.TrimSpace(rec[1]) == "" {
			return nil, fmt.Errorf("line %d: want token,user,uid[,\"group1,group2\"]", line)
		}
		p := Principal{User: strings.TrimSpace(rec[1])}
		if len(rec) > 3 {
			for g := range strings.SplitSeq(rec[3], ",") {
				if g = strings.TrimSpace(g); g != "" {
					p.Groups = append(p.Groups, g)
				}
			}
			slices.Sort(p.Groups)
		}
		out[sha256.Sum256([]byte(strings.TrimSpace(rec[0])))] = p
	}
}
