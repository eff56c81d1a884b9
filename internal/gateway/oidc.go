package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/coreos/go-oidc/v3/oidc"
)

// OIDCIssuer is an OpenID Connect provider whose JWTs (ID or access tokens)
// the gateway accepts: signed with a key of the issuer's JWKS, issued by
// it, for the audience, and not expired.
type OIDCIssuer struct {
	// URL is the issuer identifier (the tokens' iss); the discovery
	// document is read from URL/.well-known/openid-configuration.
	URL string
	// Audience must be among the token's aud.
	Audience string
	// UserClaim names the principal's user (sub when empty); UserPrefix is
	// put before it. A token without the claim is refused.
	UserClaim, UserPrefix string
	// GroupsClaim names the principal's groups (none when empty), a list
	// of strings or one string; GroupsPrefix is put before each.
	//
	// A name a claim gives that would pose as a Kubernetes user, group or
	// service account ("system:...") or, for a user, as a group
	// ("group:..."), or that holds control characters, is refused with
	// the token, unless the prefix itself maps the claim there.
	GroupsClaim, GroupsPrefix string
	// Cluster says the issuer is the cluster's own service-account
	// issuer: its keys are read from the API server the gateway talks to
	// (KeysURL), with the gateway's Kubernetes credentials and CA (Run sets
	// HTTPClient), rather than from the address its discovery document
	// advertises, which pods may not reach.
	Cluster bool
	// KeysURL, when set, is the JWKS to verify with, without discovery.
	KeysURL string
	// HTTPClient reads the discovery document and the keys;
	// http.DefaultClient when nil.
	HTTPClient *http.Client

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier
}

// ParseOIDCIssuer reads an issuer from its flag form:
// url=https://issuer,audience=toolcatalog[,user-claim=email][,user-prefix=P][,groups-claim=groups][,groups-prefix=P][,cluster=true].
// The user prefix defaults to the issuer URL and "#", as the Kubernetes
// API server does, unless the user claim is email; user-prefix= (empty)
// removes it. The groups prefix defaults to the issuer URL and "#" too,
// so an identity provider's group never passes for a Kubernetes group;
// groups-prefix= (empty) removes it.
func ParseOIDCIssuer(s string) (*OIDCIssuer, error) {
	iss := &OIDCIssuer{}
	prefixSet, groupsPrefixSet := false, false
	for part := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("%q is not key=value", part)
		}
		switch k {
		case "url":
			iss.URL = v
		case "audience":
			iss.Audience = v
		case "user-claim":
			iss.UserClaim = v
		case "user-prefix":
			iss.UserPrefix, prefixSet = v, true
		case "groups-claim":
			iss.GroupsClaim = v
		case "groups-prefix":
			iss.GroupsPrefix, groupsPrefixSet = v, true
		case "cluster":
			iss.Cluster = v == "true"
		default:
			return nil, fmt.Errorf("unknown key %q (url, audience, user-claim, user-prefix, groups-claim, groups-prefix, cluster)", k)
		}
	}
	u, err := url.Parse(iss.URL)
	if err != nil || u.Host == "" || (u.Scheme != "https" && !loopbackHost(u.Hostname())) {
		return nil, fmt.Errorf("url=%q: an issuer must be an https URL (http only on loopback)", iss.URL)
	}
	if iss.Audience == "" {
		return nil, errors.New("audience= is required: a token issued for another service must not be accepted")
	}
	if iss.UserClaim == "" {
		iss.UserClaim = "sub"
	}
	if !prefixSet && iss.UserClaim != "email" {
		iss.UserPrefix = iss.URL + "#"
	}
	if !groupsPrefixSet {
		iss.GroupsPrefix = iss.URL + "#"
	}
	return iss, nil
}

func loopbackHost(h string) bool {
	if ip := net.ParseIP(h); ip != nil {
		return ip.IsLoopback()
	}
	return h == "localhost"
}

// verifierFor returns the issuer's token verifier, reading its discovery
// document on first use; a failed read is tried again on the next token.
func (i *OIDCIssuer) verifierFor(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.verifier != nil {
		return i.verifier, nil
	}
	if i.HTTPClient != nil {
		ctx = oidc.ClientContext(ctx, i.HTTPClient)
	}
	config := &oidc.Config{ClientID: i.Audience}
	// The key set outlives this request: its context only carries the
	// HTTP client.
	keep := context.WithoutCancel(ctx)
	if i.KeysURL != "" {
		config.SupportedSigningAlgs = []string{oidc.RS256, oidc.ES256, oidc.ES384, oidc.PS256}
		i.verifier = oidc.NewVerifier(i.URL, oidc.NewRemoteKeySet(keep, i.KeysURL), config)
		return i.verifier, nil
	}
	discover, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(discover, i.URL)
	if err != nil {
		return nil, fmt.Errorf("reading the discovery document of OIDC issuer %s: %w", i.URL, err)
	}
	i.verifier = p.VerifierContext(keep, config)
	return i.verifier, nil
}

// verify checks a token of this issuer and returns its principal and
// expiry. A token that does not verify is ErrUnauthenticated; an issuer
// that cannot be read is another error.
// Accepts takes the JWTs this issuer names as theirs.
func (i *OIDCIssuer) Accepts(token string) bool { return unverifiedClaims(token).Issuer == i.URL }

// Costly is true: a token signed with a key the gateway has not seen
// costs a read of the issuer's keys.
func (i *OIDCIssuer) Costly() bool { return true }

// Verify checks the token's signature against the issuer's keys, its
// audience and expiry, and maps its claims to a principal.
func (i *OIDCIssuer) Verify(ctx context.Context, token string) (Principal, time.Time, error) {
	v, err := i.verifierFor(ctx)
	if err != nil {
		return Principal{}, time.Time{}, err
	}
	idt, err := v.Verify(ctx, token)
	if err != nil {
		var expired *oidc.TokenExpiredError
		if errors.As(err, &expired) || !isFetchError(err) {
			return Principal{}, time.Time{}, fmt.Errorf("%w: %v", ErrUnauthenticated, err)
		}
		return Principal{}, time.Time{}, fmt.Errorf("verifying a token of OIDC issuer %s: %w", i.URL, err)
	}
	var claims map[string]any
	if claimsErr := idt.Claims(&claims); claimsErr != nil {
		return Principal{}, time.Time{}, fmt.Errorf("%w: %v", ErrUnauthenticated, claimsErr)
	}
	user, _ := claims[i.UserClaim].(string)
	if user == "" {
		return Principal{}, time.Time{}, fmt.Errorf("%w: the token has no %s claim", ErrUnauthenticated, i.UserClaim)
	}
	if i.UserClaim == "email" {
		// An address the provider has not verified names nobody.
		if verified, ok := claims["email_verified"].(bool); ok && !verified {
			return Principal{}, time.Time{}, fmt.Errorf("%w: email_verified is false", ErrUnauthenticated)
		}
	}
	name, err := i.claimName(i.UserPrefix, user)
	if err != nil {
		return Principal{}, time.Time{}, fmt.Errorf("%w: claim %s: %v", ErrUnauthenticated, i.UserClaim, err)
	}
	p := Principal{User: name, token: token, audiences: idt.Audience}
	var groups []string
	switch g := claims[i.GroupsClaim].(type) {
	case string:
		groups = []string{g}
	case []any:
		for _, v := range g {
			if s, ok := v.(string); ok {
				groups = append(groups, s)
			}
		}
	}
	for _, g := range groups {
		name, err := i.claimName(i.GroupsPrefix, g)
		if err != nil {
			return Principal{}, time.Time{}, fmt.Errorf("%w: claim %s: %v", ErrUnauthenticated, i.GroupsClaim, err)
		}
		p.Groups = append(p.Groups, name)
	}
	slices.Sort(p.Groups)
	p.Groups = slices.Compact(p.Groups)
	return p, idt.Expiry, nil
}

// claimName is the principal's name for the value of a claim: prefix and
// value. A value with control characters is refused, and so is a name
// that would pose as a Kubernetes identity (system:...), unless the prefix
// itself says so (the operator mapped the claim there on purpose) or the
// issuer is the cluster's own, whose names are Kubernetes identities. A
// user that poses as a group (group:...) is refused by Authenticate,
// whatever source named it.
func (i *OIDCIssuer) claimName(prefix, value string) (string, error) {
	if !utf8.ValidString(value) || strings.IndexFunc(value, unicode.IsControl) >= 0 {
		return "", fmt.Errorf("%q holds control characters or is not UTF-8", value)
	}
	name := prefix + value
	const reserved = "system:"
	if !i.Cluster && strings.HasPrefix(name, reserved) && !strings.HasPrefix(prefix, reserved) {
		return "", fmt.Errorf("%q would pose as %s...: set a prefix for the claim", value, reserved)
	}
	return name, nil
}

// isFetchError says the keys could not be read, as opposed to a token that
// does not verify against them.
func isFetchError(err error) bool {
	return strings.Contains(err.Error(), "fetching keys")
}

// jwtClaims are the claims read from a JWT without verifying it.
type jwtClaims struct {
	Issuer   string   `json:"iss"`
	Audience audience `json:"aud"`
}

// audience is a JWT's aud: one string or a list of them.
type audience []string

func (a *audience) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*a = audience{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*a = many
	return nil
}

// unverifiedClaims reads the claims of a JWT without verifying it: to pick
// the issuer that will verify it, or the audiences of a token a
// TokenReview has just verified. Zero when the token is not a JWT.
func unverifiedClaims(token string) jwtClaims {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || len(parts[1]) > maxTokenBytes {
		return jwtClaims{}
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return jwtClaims{}
	}
	var claims jwtClaims
	if json.Unmarshal(payload, &claims) != nil {
		return jwtClaims{}
	}
	return claims
}

// maxTokenBytes bounds a bearer token's payload that is decoded.
const maxTokenBytes = 16 << 10
