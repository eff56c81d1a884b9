package contract

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolcatalog/tool-catalog-operator/internal/redistest"
)

var server *redistest.Server

func TestMain(m *testing.M) { os.Exit(redistest.Main(m, &server)) }

func newClient(t *testing.T) (redis.UniversalClient, Keys) {
	t.Helper()
	c := server.Client()
	t.Cleanup(func() { _ = c.Close() })
	return c, Keys{Prefix: DefaultPrefix("ns-"+t.Name(), "cat")}
}

func TestReadEmptyCatalog(t *testing.T) {
	c, k := newClient(t)
	s, err := Read(context.Background(), c, k)
	if err != nil {
		t.Fatal(err)
	}
	if s.Version != 0 || s.Document != nil || len(s.Metadata) != 0 || len(s.Vectors) != 0 {
		t.Fatalf("snapshot of an absent catalog: %+v", s)
	}
}

func TestWriteThenRead(t *testing.T) {
	ctx := context.Background()
	c, k := newClient(t)
	vec := EncodeVector([]float32{0.6, 0.8})
	err := Write(ctx, c, k, Update{
		ExpectVersion: 0, Version: 1, Document: []byte(`{"version":1}`), Retain: 5,
		Vectors:  map[string][]byte{"a": vec, "b": vec},
		Metadata: map[string][]byte{"a": []byte(`{"spec_hash":"x"}`), "b": []byte(`{"spec_hash":"y"}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Read(ctx, c, k)
	if err != nil {
		t.Fatal(err)
	}
	if s.Version != 1 || string(s.Document) != `{"version":1}` || len(s.Vectors) != 2 || s.Metadata["b"] != `{"spec_hash":"y"}` {
		t.Fatalf("snapshot %+v", s)
	}
	got, err := DecodeVector(s.Vectors["a"])
	if err != nil || len(got) != 2 || got[0] != 0.6 || got[1] != 0.8 {
		t.Fatalf("vector %v, %v", got, err)
	}
	if v, _ := c.Get(ctx, k.CatalogVersion(1)).Result(); v != `{"version":1}` {
		t.Fatalf("%s = %q", k.CatalogVersion(1), v)
	}

	// Version 2 removes b and updates a.
	err = Write(ctx, c, k, Update{ExpectVersion: 1, Version: 2, Document: []byte(`{"version":2}`), Retain: 5,
		Vectors: map[string][]byte{"a": EncodeVector([]float32{1, 0})}, Metadata: map[string][]byte{"a": []byte(`{}`)}, Remove: []string{"b"}})
	if err != nil {
		t.Fatal(err)
	}
	s, _ = Read(ctx, c, k)
	if s.Version != 2 || len(s.Vectors) != 1 || len(s.Metadata) != 1 || s.Metadata["a"] != `{}` {
		t.Fatalf("after version 2: %+v", s)
	}
}

func TestWriteRefusesWhenVersionMoved(t *testing.T) {
	ctx := context.Background()
	c, k := newClient(t)
	if err := Write(ctx, c, k, Update{Version: 1, Document: []byte(`v1`), Retain: 5}); err != nil {
		t.Fatal(err)
	}
	before := dump(t, c, k)
	// A pass that read version 0 must not overwrite version 1.
	err := Write(ctx, c, k, Update{ExpectVersion: 0, Version: 1, Document: []byte(`other`), Retain: 5, Vectors: map[string][]byte{"x": {1, 2, 3, 4}}})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("want ErrConflict, got %v", err)
	}
	if after := dump(t, c, k); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a refused write changed Redis:\nbefore %v\nafter  %v", before, after)
	}
}

func TestWriteKeepsOnlyRetainedVersions(t *testing.T) {
	ctx := context.Background()
	c, k := newClient(t)
	for v := int64(1); v <= 8; v++ {
		if err := Write(ctx, c, k, Update{ExpectVersion: v - 1, Version: v, Document: []byte(fmt.Sprint(v)), Retain: 3}); err != nil {
			t.Fatal(err)
		}
	}
	for v := int64(1); v <= 8; v++ {
		exists := c.Exists(ctx, k.CatalogVersion(v)).Val() == 1
		if want := v >= 6; exists != want {
			t.Errorf("version %d kept = %v, want %v (retain 3 of 8)", v, exists, want)
		}
	}
	// Lowering retention deletes the surplus at the next publish.
	if err := Write(ctx, c, k, Update{ExpectVersion: 8, Version: 9, Document: []byte("9"), Retain: 1}); err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= 9; v++ {
		if exists := c.Exists(ctx, k.CatalogVersion(v)).Val() == 1; exists != (v == 9) {
			t.Errorf("after retain 1: version %d kept = %v", v, exists)
		}
	}
}

func TestDeleteRemovesEveryKey(t *testing.T) {
	ctx := context.Background()
	c, k := newClient(t)
	other := Keys{Prefix: DefaultPrefix("ns-"+t.Name(), "other")}
	for v := int64(1); v <= 3; v++ {
		for _, kk := range []Keys{k, other} {
			if err := Write(ctx, c, kk, Update{ExpectVersion: v - 1, Version: v, Document: []byte("d"), Retain: 5,
				Vectors: map[string][]byte{"a": {0, 0, 128, 63}}, Metadata: map[string][]byte{"a": []byte("{}")}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := Delete(ctx, c, k); err != nil {
		t.Fatal(err)
	}
	if keys := c.Keys(ctx, k.Prefix+"*").Val(); len(keys) != 0 {
		t.Fatalf("keys left after Delete: %v", keys)
	}
	if n := len(c.Keys(ctx, other.Prefix+"*").Val()); n != 7 {
		t.Fatalf("another catalog's keys were touched: %d left, want 7", n)
	}
	if err := Delete(ctx, c, k); err != nil {
		t.Fatalf("deleting twice: %v", err)
	}
}

func TestNotifyReachesSubscriber(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _ := newClient(t)
	sub := c.Subscribe(ctx, "chan-"+t.Name())
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if err := Notify(ctx, c, "chan-"+t.Name(), []byte(`{"version":3}`)); err != nil {
		t.Fatal(err)
	}
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil || msg.Payload != `{"version":3}` {
		t.Fatalf("got %v, %v", msg, err)
	}
}

func TestReadFailsWhenRedisIsDown(t *testing.T) {
	s, err := redistest.Start("")
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	_ = s.Stop()
	k := Keys{Prefix: "p"}
	if _, err := Read(context.Background(), c, k); err == nil {
		t.Fatal("Read succeeded against a stopped server")
	}
	if err := Write(context.Background(), c, k, Update{Version: 1, Document: []byte("d"), Retain: 1}); err == nil || errors.Is(err, ErrConflict) {
		t.Fatalf("Write against a stopped server: %v", err)
	}
}

// dump returns every key of a catalog with its DUMP serialisation.
func dump(t *testing.T, c redis.UniversalClient, k Keys) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, key := range c.Keys(context.Background(), k.Prefix+"*").Val() {
		out[key] = c.Dump(context.Background(), key).Val()
	}
	return out
}
