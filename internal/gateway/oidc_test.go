package gateway

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/time/rate"
	"k8s.io/client-go/rest"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
)

// testIssuer is an OpenID Connect provider on loopback: a discovery
// document and a JWKS of keys it rotates, and tokens it signs.
type testIssuer struct {
	srv       *httptest.Server
	jwksReads atomic.Int64
	mu        sync.Mutex
	key       *rsa.PrivateKey
	kid       string
	rotations int
}

func newTestIssuer(t *testing.T) *testIssuer {
	t.Helper()
	i := &testIssuer{}
	i.rotate(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": i.srv.URL, "jwks_uri": i.srv.URL + "/keys",
			"authorization_endpoint": i.srv.URL + "/authorize", "token_endpoint": i.srv.URL + "/token",
			"response_types_supported": []string{"code"}, "subject_types_supported": []string{"public"},
			"id_token_signing_alg_values_supported": []string{"RS256"},
		})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, _ *http.Request) {
		i.jwksReads.Add(1)
		i.mu.Lock()
		set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &i.key.PublicKey, KeyID: i.kid, Algorithm: "RS256", Use: "sig"}}}
		i.mu.Unlock()
		_ = json.NewEncoder(w).Encode(set)
	})
	i.srv = httptest.NewServer(mux)
	t.Cleanup(i.srv.Close)
	return i
}

// rotate replaces the signing key; the JWKS then holds only the new one.
func (i *testIssuer) rotate(t *testing.T) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.rotations++
	i.key, i.kid = key, fmt.Sprintf("key-%d", i.rotations)
}

// claims are a token's claims for audience aud, valid for an hour.
func (i *testIssuer) claims(sub, aud string) map[string]any {
	now := time.Now()
	return map[string]any{"iss": i.srv.URL, "sub": sub, "aud": aud, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "groups": []string{"staff", "oncall"}}
}

// sign signs claims with the current key.
func (i *testIssuer) sign(t *testing.T, claims map[string]any) string {
	t.Helper()
	i.mu.Lock()
	key, kid := i.key, i.kid
	i.mu.Unlock()
	return signWith(t, key, kid, claims)
}

func signWith(t *testing.T, key *rsa.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (i *testIssuer) config(t *testing.T, extra string) *OIDCIssuer {
	t.Helper()
	iss, err := ParseOIDCIssuer("url=" + i.srv.URL + ",audience=toolcatalog,groups-claim=groups" + extra)
	if err != nil {
		t.Fatal(err)
	}
	return iss
}

// Tokens of an OpenID Connect issuer are verified against its keys: the
// signature, the issuer, the audience and the expiry, whatever the token
// claims about itself. Keys are read again when the issuer rotates them.
func TestOIDCTokens(t *testing.T) {
	iss := newTestIssuer(t)
	a := &Authenticator{Verifiers: []Verifier{iss.config(t, "")}}
	ctx := context.Background()
	valid := iss.sign(t, iss.claims("alice", "toolcatalog"))
	p, err := a.Authenticate(ctx, valid)
	if err != nil || p.User != iss.srv.URL+"#alice" || !slices.Equal(p.Groups, []string{iss.srv.URL + "#oncall", iss.srv.URL + "#staff"}) {
		t.Fatalf("a valid token: %+v, %v; want %s#alice in %[3]s#oncall and %[3]s#staff", p, err, iss.srv.URL)
	}
	if printed := fmt.Sprintf("%v %+v %s", p, p, p); strings.Contains(printed, valid) {
		t.Fatal("printing a principal prints its token")
	}

	stranger, _ := rsa.GenerateKey(rand.Reader, 2048)
	expired := iss.claims("alice", "toolcatalog")
	expired["exp"] = time.Now().Add(-time.Minute).Unix()
	noSub := iss.claims("", "toolcatalog")
	delete(noSub, "sub")
	header, _ := json.Marshal(map[string]string{"alg": "none", "typ": "JWT"})
	body, _ := json.Marshal(iss.claims("mallory", "toolcatalog"))
	unsigned := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(body) + "."
	forged := strings.Split(valid, ".")
	forged[1] = base64.RawURLEncoding.EncodeToString(body)
	for name, token := range map[string]string{
		"expired":                    iss.sign(t, expired),
		"for another audience":       iss.sign(t, iss.claims("alice", "another-service")),
		"signed by a stranger's key": signWith(t, stranger, iss.kid, iss.claims("mallory", "toolcatalog")),
		"alg none":                   unsigned,
		"payload swapped":            strings.Join(forged, "."),
		"without a subject":          iss.sign(t, noSub),
	} {
		if p, err := a.Authenticate(ctx, token); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("a token %s: %+v, %v; want ErrUnauthenticated", name, p, err)
		}
	}

	// The issuer rotates its key: a token of the new key is accepted (the
	// keys are read again), one of the old key no longer is.
	reads := iss.jwksReads.Load()
	oldKey, oldKid := iss.key, iss.kid
	iss.rotate(t)
	if _, err := a.Authenticate(ctx, iss.sign(t, iss.claims("bob", "toolcatalog"))); err != nil {
		t.Fatalf("a token of the rotated key: %v", err)
	}
	if iss.jwksReads.Load() <= reads {
		t.Fatal("the keys were not read again after a token named a new key")
	}
	// go-oidc signals the new keys to the request that asked for them a
	// moment before it stores them for the next: a token of the retired
	// key may pass in that moment, and is refused once they are stored.
	// Each try is a new token, so no kept answer decides.
	tries := 0
	waitFor(t, "a token of the retired key to be refused", func() bool {
		tries++
		_, err := a.Authenticate(ctx, signWith(t, oldKey, oldKid, iss.claims(fmt.Sprintf("carol-%d", tries), "toolcatalog")))
		return errors.Is(err, ErrUnauthenticated)
	})

	t.Run("an unverified email names nobody", func(t *testing.T) {
		byEmail := &Authenticator{Verifiers: []Verifier{iss.config(t, ",user-claim=email")}}
		c := iss.claims("u1", "toolcatalog")
		c["email"] = "alice@example.com"
		if p, err := byEmail.Authenticate(ctx, iss.sign(t, c)); err != nil || p.User != "alice@example.com" {
			t.Fatalf("email claim: %+v, %v; want alice@example.com, unprefixed", p, err)
		}
		c["email_verified"] = false
		if _, err := byEmail.Authenticate(ctx, iss.sign(t, c)); !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("an unverified email: %v; want ErrUnauthenticated", err)
		}
	})

	t.Run("an issuer the token names is never contacted unless configured", func(t *testing.T) {
		evil := newTestIssuer(t)
		if _, err := a.Authenticate(ctx, evil.sign(t, evil.claims("mallory", "toolcatalog"))); !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("a token of an unconfigured issuer: %v", err)
		}
		// The same token shape from the configured issuer does read keys
		// (above), so zero here is the defence, not an idle server.
		if n := evil.jwksReads.Load(); n != 0 {
			t.Fatalf("the gateway read the keys of an issuer the token named: %d reads", n)
		}
	})

	t.Run("unknown key IDs cannot make the gateway hammer the issuer", func(t *testing.T) {
		a := &Authenticator{Verifiers: []Verifier{iss.config(t, "")}, Limiter: rate.NewLimiter(rate.Every(time.Hour), 3)}
		before := iss.jwksReads.Load()
		limited := 0
		for n := range 20 {
			_, err := a.Authenticate(ctx, signWith(t, stranger, fmt.Sprintf("kid-%d", n), iss.claims("mallory", "toolcatalog")))
			if errors.Is(err, ErrTooManyReviews) {
				limited++
			}
		}
		if reads := iss.jwksReads.Load() - before; reads > 4 || limited < 16 {
			t.Fatalf("20 tokens with unknown key IDs: %d key reads, %d limited; want at most 4 reads", reads, limited)
		}
	})
}

// A claim cannot make a principal pose as a Kubernetes identity or as a
// group, nor collide with another principal: such a token is refused,
// unless the operator's prefix maps the claim there on purpose.
func TestOIDCClaimsCannotPose(t *testing.T) {
	iss := newTestIssuer(t)
	ctx := context.Background()
	token := func(sub string, groups ...any) string {
		c := iss.claims(sub, "toolcatalog")
		c["groups"] = groups
		return iss.sign(t, c)
	}
	unprefixed := &Authenticator{Verifiers: []Verifier{iss.config(t, ",user-prefix=,groups-prefix=")}}
	prefixed := &Authenticator{Verifiers: []Verifier{iss.config(t, "")}}
	mapped := &Authenticator{Verifiers: []Verifier{iss.config(t, ",user-prefix=,groups-prefix=system:serviceaccounts:")}}
	for _, tt := range []struct {
		name  string
		a     *Authenticator
		token string
		// user and groups when accepted; refused when user is "".
		user   string
		groups []string
	}{
		{"a NUL in the user claim", unprefixed, token("alice\x00admins", "users"), "", nil},
		{"a line break in a group", unprefixed, token("bob", "ops\nadmins"), "", nil},
		{"a Kubernetes group", unprefixed, token("bob", "system:serviceaccounts:team-b"), "", nil},
		{"a service account's name", unprefixed, token("system:serviceaccount:team-b:default"), "", nil},
		{"a user named as a group", unprefixed, token("group:admins"), "", nil},
		{"a plain user and group", unprefixed, token("bob", "ops"), "bob", []string{"ops"}},
		{"the default prefix keeps the IdP's group its own", prefixed, token("bob", "system:serviceaccounts:team-b"),
			iss.srv.URL + "#bob", []string{iss.srv.URL + "#system:serviceaccounts:team-b"}},
		{"a prefix that maps there on purpose", mapped, token("bob", "team-b"), "bob", []string{"system:serviceaccounts:team-b"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tt.a.Authenticate(ctx, tt.token)
			if tt.user == "" {
				if !errors.Is(err, ErrUnauthenticated) {
					t.Fatalf("%+v, %v; want ErrUnauthenticated", p, err)
				}
				return
			}
			if err != nil || p.User != tt.user || !slices.Equal(p.Groups, tt.groups) {
				t.Fatalf("%+v, %v; want %s in %v", p, err, tt.user, tt.groups)
			}
		})
	}
}

// Principals are told apart by every name, however the names are made:
// a user whose name holds a separator is not another user with groups.
func TestPrincipalKeysDoNotCollide(t *testing.T) {
	principals := []Principal{
		{User: "alice", Groups: []string{"admins", "users"}},
		{User: "alice\x00admins", Groups: []string{"users"}},
		{User: "alice\x00admins\x00users"},
		{User: "alice", Groups: []string{"admins\x00users"}},
		{User: "5:alice", Groups: []string{"users"}},
		{User: "alice", Groups: []string{"5:admins", "users"}},
	}
	seen := map[string]int{}
	for i, p := range principals {
		if j, dup := seen[p.key()]; dup {
			t.Fatalf("%q and %q share key %q", principals[j], p, p.key())
		}
		seen[p.key()] = i
		if c := (caller{principal: p, window: 8000}); c.viewKey() == (caller{principal: p, window: 80000}).viewKey() {
			t.Fatalf("two windows of %q share a view", p)
		}
	}
}

// The gateway does not start with issuers and no public URL, nor with a
// public URL that is more than a scheme and a host.
func TestPublicURLIsChecked(t *testing.T) {
	for _, tt := range []struct {
		public  string
		issuers bool
		ok      bool
	}{
		{"", false, true},
		{"", true, false},
		{"https://tools.example.com", true, true},
		{"https://tools.example.com/", true, true},
		{"http://127.0.0.1:8080", true, true},
		{"tools.example.com", true, false},
		{"https://tools.example.com/mcp", true, false},
		{"https://user@tools.example.com", true, false},
		{"ftp://tools.example.com", false, false},
	} {
		if err := checkPublicURL(tt.public, tt.issuers); (err == nil) != tt.ok {
			t.Errorf("public URL %q, issuers %v: %v", tt.public, tt.issuers, err)
		}
	}
}

func TestParseOIDCIssuer(t *testing.T) {
	for spec, want := range map[string]string{
		"url=https://id.example.com,audience=tc":                     "https://id.example.com#",
		"url=https://id.example.com,audience=tc,user-claim=email":    "",
		"url=https://id.example.com,audience=tc,user-prefix=oidc:":   "oidc:",
		"url=https://id.example.com,audience=tc,user-prefix=":        "",
		"url=http://127.0.0.1:9999,audience=tc,cluster=true":         "http://127.0.0.1:9999#",
		"url=http://id.example.com,audience=tc":                      "error",
		"url=https://id.example.com":                                 "error",
		"url=https://id.example.com,audience=tc,secret=x":            "error",
		"https://id.example.com":                                     "error",
		"url=https://id.example.com,audience=tc,user-claim=sub,ca=x": "error",
	} {
		iss, err := ParseOIDCIssuer(spec)
		switch {
		case want == "error" && err == nil:
			t.Errorf("%s: accepted", spec)
		case want != "error" && (err != nil || iss.UserPrefix != want):
			t.Errorf("%s: %+v, %v; want user prefix %q", spec, iss, err, want)
		}
	}
	for spec, want := range map[string]string{
		"url=https://id.example.com,audience=tc":                             "https://id.example.com#",
		"url=https://id.example.com,audience=tc,user-claim=email":            "https://id.example.com#",
		"url=https://id.example.com,audience=tc,groups-prefix=":              "",
		"url=https://id.example.com,audience=tc,groups-prefix=corp:":         "corp:",
		"url=https://id.example.com,audience=tc,user-prefix=,groups-claim=g": "https://id.example.com#",
	} {
		if iss, err := ParseOIDCIssuer(spec); err != nil || iss.GroupsPrefix != want {
			t.Errorf("%s: %+v, %v; want groups prefix %q", spec, iss, err, want)
		}
	}
}

// An MCP client that meets a 401 finds the authorization server through
// the catalog's protected resource metadata, then calls with its token.
func TestOIDCThroughTheGateway(t *testing.T) {
	ns := newNamespace(t)
	create(t, testCatalog(ns, "oidc", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOff}))
	create(t, standardTools(ns, "oidc")...)
	published(t, ns, "oidc", 5)
	iss := newTestIssuer(t)
	const public = "https://tools.example.com"
	_, base := ownGateway(t, Limits{}, func(o *Options) {
		o.Auth.Verifiers = append(o.Auth.Verifiers, iss.config(t, ",groups-prefix="))
		o.PublicURL = public
	})

	// The metadata is named from the public URL, whatever Host a client
	// sends: a Host of the attacker's would point every client that met
	// the 401 (or a cache's copy, kept 300 s) to the attacker.
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp/"+ns+"/oidc", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	req.Host = "attacker.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	metadata := "/.well-known/oauth-protected-resource/mcp/" + ns + "/oidc"
	if challenge := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(challenge, `resource_metadata="`+public+metadata+`"`) {
		t.Fatalf("no token: %d %q; want 401 naming %s", resp.StatusCode, challenge, public+metadata)
	}
	req, _ = http.NewRequest(http.MethodGet, base+metadata, nil)
	req.Host = "attacker.example"
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var doc oauthex.ProtectedResourceMetadata
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err = json.Unmarshal(raw, &doc); err != nil || doc.Resource != public+"/mcp/"+ns+"/oidc" || !slices.Equal(doc.AuthorizationServers, []string{iss.srv.URL}) {
		t.Fatalf("protected resource metadata: %s (%v)", raw, err)
	}

	// Without a public URL there is no metadata, and the 401 names none.
	_, bare := ownGateway(t, Limits{}, func(o *Options) { o.Auth.Verifiers = append(o.Auth.Verifiers, iss.config(t, "")) })
	resp, err = http.Post(bare+"/mcp/"+ns+"/oidc", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if challenge := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || strings.Contains(challenge, "resource_metadata") {
		t.Fatalf("no public URL: %d %q; want 401 without resource_metadata", resp.StatusCode, challenge)
	}
	if resp, err = http.Get(bare + metadata); err != nil || resp.Body.Close() != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("metadata without a public URL: %v %v", resp, err)
	}
	for _, path := range []string{"/mcp/Not_A_Namespace/oidc", "/mcp/" + ns + "/%22%20x"} {
		resp, err = http.Get(base + "/.well-known/oauth-protected-resource" + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("metadata of %s: %d, want 404", path, resp.StatusCode)
		}
	}

	cs := connectAt(t, base, ns, "oidc", iss.sign(t, iss.claims("alice", "toolcatalog")), "", nil)
	staff := listed(t, connectAt(t, base, ns, "oidc", aliceToken, "", nil))
	if names := listed(t, cs); len(names) == 0 || !slices.Equal(names, staff) {
		t.Fatalf("an OIDC token in group staff lists %v; want what staff see: %v", names, staff)
	}
	notStaff := iss.claims("eve", "toolcatalog")
	notStaff["groups"] = []string{"contractors"}
	req, _ = http.NewRequest(http.MethodPost, base+"/mcp/"+ns+"/oidc", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+iss.sign(t, notStaff))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a valid token outside allowedPrincipals: %d, want it refused", resp.StatusCode)
	}
}

// The cluster's own service-account issuer is an OpenID Connect issuer:
// tokens from TokenRequest verify as JWTs against the API server's keys,
// read with the gateway's credentials, without a TokenReview.
func TestClusterIssuerTokensVerifyWithoutTokenReview(t *testing.T) {
	ns := newNamespace(t)
	httpClient, err := rest.HTTPClientFor(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	issuerURL := strings.TrimSuffix(restConfig.Host, "/") + "/"
	iss, err := ParseOIDCIssuer("url=" + issuerURL + ",audience=" + DefaultTokenAudience + ",user-prefix=,cluster=true")
	if err != nil {
		t.Fatal(err)
	}
	iss.HTTPClient, iss.KeysURL = httpClient, strings.TrimSuffix(restConfig.Host, "/")+"/openid/v1/jwks"
	// No TokenReviewer: a TokenReview cannot be what accepts the token.
	a := &Authenticator{Verifiers: []Verifier{iss}}
	tr := serviceAccountToken(t, ns, "agent", DefaultTokenAudience)
	p, err := a.Authenticate(context.Background(), tr.Status.Token)
	if err != nil || p.User != "system:serviceaccount:"+ns+":agent" {
		t.Fatalf("a service-account token: %+v, %v", p, err)
	}
	other := serviceAccountToken(t, ns, "agent", "")
	if _, err := a.Authenticate(context.Background(), other.Status.Token); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("a token for the API server's audience: %v; want ErrUnauthenticated", err)
	}
}

// A token goes to the first verifier that accepts it and to no other: a
// token that names a configured issuer but fails its check is refused,
// never passed on to the TokenReview API (whose answer could take it).
func TestATokenHasOneVerifier(t *testing.T) {
	shared.Use(t)
	iss := newTestIssuer(t)
	reviews := &countingCreates{Client: kube}
	a := &Authenticator{Verifiers: []Verifier{iss.config(t, ""), &TokenReviewer{Reviews: reviews}}}
	attacker, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	forged := signWith(t, attacker, "forged", iss.claims("alice", "toolcatalog"))
	if _, err := a.Authenticate(t.Context(), forged); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("a token the issuer did not sign: %v; want ErrUnauthenticated", err)
	}
	// The reviewer takes a token of an issuer not configured: proof it
	// would have been asked.
	other := iss.claims("alice", "toolcatalog")
	other["iss"] = "https://elsewhere.example"
	if _, err := a.Authenticate(t.Context(), signWith(t, attacker, "forged", other)); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("a token of another issuer: %v; want ErrUnauthenticated", err)
	}
	if n := reviews.n.Load(); n != 1 {
		t.Fatalf("%d reviews; want 1, of the token of the issuer not configured only", n)
	}
}
