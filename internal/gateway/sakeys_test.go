package gateway

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

// Tokens naming key IDs the cluster does not have read the keys again at
// most once every Every, however many come; a token the cluster's key
// signed is told from one another key signed, and from a forged one.
func TestServiceAccountKeysAreReadAgainAtABoundedRate(t *testing.T) {
	sign := func(key *ecdsa.PrivateKey, kid string) string {
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		jws, err := signer.Sign([]byte(`{"iss":"https://kubernetes.default.svc","sub":"system:serviceaccount:a:b"}`))
		if err != nil {
			t.Fatal(err)
		}
		out, err := jws.CompactSerialize()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	cluster, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	set, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: cluster.Public(), KeyID: "cluster", Algorithm: "ES256", Use: "sig"}}})
	reads := 0
	keys := &ServiceAccountKeys{Fetch: func(context.Context) ([]byte, error) { reads++; return set, nil }}
	ctx := context.Background()
	if got := keys.check(ctx, sign(cluster, "cluster")); got != signedByCluster {
		t.Fatalf("a token the cluster signed: %v", got)
	}
	if got := keys.check(ctx, sign(other, "cluster")); got != notSignedByCluster {
		t.Fatalf("a token another key signed under the cluster's key ID: %v", got)
	}
	if got := keys.check(ctx, madeUpToken("x")); got != notSignedByCluster {
		t.Fatalf("a forged token: %v", got)
	}
	for i := range 100 {
		if got := keys.check(ctx, sign(other, fmt.Sprintf("made-up-%d", i))); got != notSignedByCluster {
			t.Fatalf("a token of a made-up key ID: %v", got)
		}
	}
	if reads > 2 {
		t.Fatalf("the keys were read %d times for 100 made-up key IDs, want at most 2", reads)
	}
}
