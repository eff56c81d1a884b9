package redisconn

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Catalogs with the same options share one client; other credentials get
// a client of their own; a client is closed when the last catalog using it
// leaves or moves to other options.
func TestPoolSharesAClientPerOptions(t *testing.T) {
	p := NewPool()
	defer p.Close()
	teamA := Options{Addresses: []string{"127.0.0.1:1"}, Username: "tools", Password: "a-secret"}
	teamB := teamA
	teamB.Password = "b-secret"

	a, b := p.Get("ns/a", teamA), p.Get("ns/b", teamA)
	if a != b || p.size() != 1 {
		t.Fatalf("two catalogs of the same options: clients %p and %p, %d in the pool", a, b, p.size())
	}
	if p.Get("ns/a", teamA) != a || p.size() != 1 {
		t.Fatal("asking again gave another client")
	}
	other := p.Get("other/c", teamB)
	if other == a || p.size() != 2 {
		t.Fatalf("a catalog with other credentials shares a client (%d in the pool)", p.size())
	}

	closed := func(c redis.UniversalClient) bool {
		return errors.Is(c.Ping(context.Background()).Err(), redis.ErrClosed)
	}
	// ns/a moves to teamB's options; ns/b still uses the first client.
	if p.Get("ns/a", teamB) != other || closed(a) {
		t.Fatal("a catalog that moved did not get the client of its new options, or the old one closed under ns/b")
	}
	p.Forget("ns/b")
	if !closed(a) || p.size() != 1 {
		t.Fatalf("the client no catalog uses is not closed (%d in the pool)", p.size())
	}
	p.Forget("ns/a")
	if closed(other) {
		t.Fatal("the client other/c uses was closed")
	}
	p.Forget("other/c")
	p.Forget("never/seen")
	if !closed(other) || p.size() != 0 {
		t.Fatalf("%d clients left", p.size())
	}
}
