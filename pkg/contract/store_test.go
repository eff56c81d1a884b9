package contract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/toolcatalog/tool-catalog-operator/internal/testing/redistest"
)

// server is the package's redis-server, started by the first test that
// needs one.
var server = redistest.NewShared()

func TestMain(m *testing.M) { os.Exit(server.Main(m)) }

func newClient(t *testing.T) (redis.UniversalClient, Keys) {
	t.Helper()
	return server.Client(t), Keys{Prefix: DefaultPrefix("ns-"+t.Name(), "cat")}
}

func TestReadEmptyCatalog(t *testing.T) {
	c, k := newClient(t)
	s, err := Read(context.Background(), c, k)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := s.Document()
	if s.Version != 0 || doc != nil || err != nil || len(s.Metadata) != 0 || len(s.Vectors) != 0 {
		t.Fatalf("snapshot of an absent catalog: %+v, %v, %v", s, doc, err)
	}
}

// testDoc is a sealed document of version v with the named tools; a tool
// named "secret" is allowed to nobody.
func testDoc(t *testing.T, v int64, names ...string) *Document {
	t.Helper()
	d := &Document{Version: v, Catalog: "ns/cat", Embedding: EmbeddingInfo{Provider: "openai", Model: "m", Dimensions: 2},
		Search: SearchDefaults{Method: "hybrid", TopK: 5}, Permissions: map[string][]string{}}
	for _, n := range names {
		tool, err := NormalizeTool(Tool{Name: n, Description: "does " + n, SpecHash: "h-" + n})
		if err != nil {
			t.Fatal(err)
		}
		d.Tools = append(d.Tools, tool)
		if n == "secret" {
			d.Permissions[n] = []string{}
		}
	}
	if err := d.Seal(); err != nil {
		t.Fatal(err)
	}
	return d
}

// publish stores d as a writer does (docs/redis-contract.md): P:version,
// P:head, one entry per tool in P:tools, the vectors given, and metadata
// for each tool with a vector unless given. The writer itself, with its
// diffs, retention and guard, is tested where it lives
// (internal/published/versions).
func publish(t testing.TB, c redis.UniversalClient, k Keys, d *Document, vectors, metadata map[string][]byte) {
	t.Helper()
	ctx := context.Background()
	head, err := json.Marshal(d.Head())
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string][]byte{}
	for i := range d.Tools {
		e := d.Entry(i)
		if entries[e.Name], err = json.Marshal(e); err != nil {
			t.Fatal(err)
		}
	}
	if metadata == nil {
		metadata = map[string][]byte{}
		for name := range vectors {
			metadata[name] = []byte(`{"spec_hash":"h-` + name + `"}`)
		}
	}
	_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, k.Version(), d.Version, 0)
		p.Set(ctx, k.Head(), head, 0)
		p.Del(ctx, k.Tools())
		if len(entries) > 0 {
			p.HSet(ctx, k.Tools(), flatten(entries)...)
		}
		if len(vectors) > 0 {
			p.HSet(ctx, k.Embeddings(), flatten(vectors)...)
		}
		if len(metadata) > 0 {
			p.HSet(ctx, k.Metadata(), flatten(metadata)...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func flatten(m map[string][]byte) []any {
	out := make([]any, 0, 2*len(m))
	for k, v := range m {
		out = append(out, k, v)
	}
	return out
}

func TestEntryEqual(t *testing.T) {
	yes, no := true, false
	base := Entry{Tool: Tool{Name: "a", Description: "d", SpecHash: "h"}}
	with := func(edit func(*Entry)) Entry {
		e := base
		edit(&e)
		return e
	}
	tests := []struct {
		name string
		a, b Entry
		want bool
	}{
		{"same", base, base, true},
		{"description", base, with(func(e *Entry) { e.Description = "other" }), false},
		{"annotations added", base, with(func(e *Entry) { e.Annotations = &Annotations{Title: "A"} }), false},
		{"same hints at other addresses", with(func(e *Entry) { e.Annotations = &Annotations{ReadOnlyHint: &yes} }),
			with(func(e *Entry) { v := true; e.Annotations = &Annotations{ReadOnlyHint: &v} }), true},
		{"hint flipped", with(func(e *Entry) { e.Annotations = &Annotations{ReadOnlyHint: &yes} }),
			with(func(e *Entry) { e.Annotations = &Annotations{ReadOnlyHint: &no} }), false},
		{"hint unset", with(func(e *Entry) { e.Annotations = &Annotations{OpenWorldHint: &no} }),
			with(func(e *Entry) { e.Annotations = &Annotations{} }), false},
		{"source", base, with(func(e *Entry) { e.Source = &Source{Tool: "a"} }), false},
		{"source url", with(func(e *Entry) { e.Source = &Source{Tool: "a", MCPURL: "http://x"} }),
			with(func(e *Entry) { e.Source = &Source{Tool: "a", MCPURL: "http://y"} }), false},
		{"output schema", base, with(func(e *Entry) { e.OutputSchema = json.RawMessage(`{"type":"object"}`) }), false},
		{"output schema changed", with(func(e *Entry) { e.OutputSchema = json.RawMessage(`{"type":"object"}`) }),
			with(func(e *Entry) { e.OutputSchema = json.RawMessage(`{"required":["n"],"type":"object"}`) }), false},
	}
	for _, tt := range tests {
		if got := tt.a.Equal(tt.b); got != tt.want {
			t.Errorf("%s: Equal = %v, want %v", tt.name, got, tt.want)
		}
		da, _ := tt.a.Digest()
		db, _ := tt.b.Digest()
		if (da == db) != tt.want {
			t.Errorf("%s: digests %s and %s, want equal %v", tt.name, da, db, tt.want)
		}
	}
}

// A catalog written with a newer contract is refused with an error that
// says to upgrade.
func TestNewerContractIsRefused(t *testing.T) {
	c, k := newClient(t)
	publish(t, c, k, testDoc(t, 1, "a"), nil, nil)
	c.Set(context.Background(), k.Head(), `{"contract":3,"version":1,"catalog":"ns/cat","tool_count":1}`, 0)
	s, err := Read(context.Background(), c, k)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Document(); !errors.Is(err, ErrNewerContract) || !strings.Contains(err.Error(), "upgrade") {
		t.Fatalf("got %v", err)
	}
}

// ReadTools reads part of a version and refuses a version that moved on.
func TestReadTools(t *testing.T) {
	ctx := context.Background()
	c, k := newClient(t)
	v1 := testDoc(t, 1, "a", "b")
	publish(t, c, k, v1, map[string][]byte{"a": {0, 0, 128, 63}}, nil)
	got, err := ReadTools(ctx, c, k, 1, []string{"a", "gone"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Head.Version != 1 || len(got.Entries) != 1 || got.Entries["a"].Description != "does a" || len(got.Vectors["a"]) != 4 {
		t.Fatalf("read %+v", got)
	}
	if _, err := ReadTools(ctx, c, k, 2, []string{"a"}); !errors.Is(err, ErrConflict) {
		t.Fatalf("reading version 2 while 1 is current: %v", err)
	}
	if _, err := ReadChanges(ctx, c, k, 0, 2); !errors.Is(err, ErrNotRetained) {
		t.Fatalf("reading a change record that does not exist: %v", err)
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
}

// ReadVectors reads the named vectors in bounded round trips and leaves
// out a name without one.
func TestReadVectors(t *testing.T) {
	c, k := newClient(t)
	ctx := context.Background()
	want := map[string][]byte{}
	var names []string
	for i := range maxFieldsPerRead + 5 {
		name := fmt.Sprintf("t%d", i)
		want[name] = EncodeVector([]float32{float32(i), 1})
		names = append(names, name)
	}
	if err := c.HSet(ctx, k.Embeddings(), flatten(want)...).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadVectors(ctx, c, k, append(names, "absent"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("read %d vectors; want %d", len(got), len(want))
	}
	for name, vec := range want {
		if string(got[name]) != string(vec) {
			t.Fatalf("vector of %s = %x; want %x", name, got[name], vec)
		}
	}
}

// ReadWithStaged digests the published vectors instead of returning them,
// with the digest VectorDigest gives their bytes, and stamps the snapshot
// as Read does.
func TestReadWithStagedDigestsTheVectors(t *testing.T) {
	c, k := newClient(t)
	ctx := context.Background()
	vecs := map[string][]byte{"a": EncodeVector([]float32{1, 2}), "b": EncodeVector([]float32{3, 4})}
	if err := c.HSet(ctx, k.Embeddings(), flatten(vecs)...).Err(); err != nil {
		t.Fatal(err)
	}
	full, err := Read(ctx, c, k)
	if err != nil {
		t.Fatal(err)
	}
	digested, err := ReadWithStaged(ctx, c, k)
	if err != nil {
		t.Fatal(err)
	}
	if len(digested.Vectors) != 0 || len(digested.VectorDigests) != len(vecs) {
		t.Fatalf("ReadWithStaged: %d vectors, %d digests; want 0 and %d", len(digested.Vectors), len(digested.VectorDigests), len(vecs))
	}
	for name, vec := range vecs {
		if digested.VectorDigests[name] != VectorDigest(vec) {
			t.Fatalf("digest of %s is not VectorDigest of its bytes", name)
		}
	}
	if full.Stamp() != digested.Stamp() {
		t.Fatalf("stamps %+v and %+v differ", full.Stamp(), digested.Stamp())
	}
}

// ReadWithStaged reads the entries and metadata a round trip at a time,
// parsing each round trip's before the next, and gives what Read and its
// parsing give: the same document, metadata and stamp. An unreadable
// metadata field is marked, and an unreadable entry is the document's
// error, as with Read.
func TestReadWithStagedParsesAsItReads(t *testing.T) {
	c, k := newClient(t)
	ctx := context.Background()
	var names []string
	vectors, meta := map[string][]byte{}, map[string][]byte{}
	for i := range 2*maxFieldsPerRead + 5 {
		name := fmt.Sprintf("t%04d", i)
		names = append(names, name)
		vectors[name] = EncodeVector([]float32{float32(i), 1})
		meta[name] = []byte(`{"spec_hash":"h-` + name + `","model":"m","synthetic_queries":["use ` + name + `"]}`)
	}
	publish(t, c, k, testDoc(t, 1, names...), vectors, meta)
	unreadable := names[maxFieldsPerRead+7]
	if err := c.HSet(ctx, k.Metadata(), unreadable, `{"spec_hash":`).Err(); err != nil {
		t.Fatal(err)
	}
	full, err := Read(ctx, c, k)
	if err != nil {
		t.Fatal(err)
	}
	chunked, err := ReadWithStaged(ctx, c, k)
	if err != nil {
		t.Fatal(err)
	}
	if len(chunked.Entries) != 0 || len(chunked.Metadata) != 0 || len(chunked.ParsedMetadata) != len(names) {
		t.Fatalf("ReadWithStaged: %d raw entries, %d raw metadata, %d parsed; want 0, 0 and %d", len(chunked.Entries), len(chunked.Metadata), len(chunked.ParsedMetadata), len(names))
	}
	fullDoc, err := full.Document()
	if err != nil {
		t.Fatal(err)
	}
	chunkedDoc, err := chunked.Document()
	if err != nil || !reflect.DeepEqual(chunkedDoc, fullDoc) {
		t.Fatalf("ReadWithStaged's document differs from Read's (%v)", err)
	}
	for name, raw := range full.Metadata {
		m, parseMetadataErr := ParseMetadata(raw)
		p := chunked.ParsedMetadata[name]
		if !reflect.DeepEqual(p.Metadata, m) || (p.Err == nil) != (parseMetadataErr == nil) {
			t.Fatalf("metadata of %s: %+v (%v); Read's parses to %+v (%v)", name, p.Metadata, p.Err, m, parseMetadataErr)
		}
	}
	if chunked.ParsedMetadata[unreadable].Err == nil {
		t.Fatalf("unreadable metadata of %s was read", unreadable)
	}
	if full.Stamp() != chunked.Stamp() {
		t.Fatalf("stamps %+v and %+v differ", full.Stamp(), chunked.Stamp())
	}

	if errErr := c.HSet(ctx, k.Tools(), names[2*maxFieldsPerRead], `{"name":`).Err(); errErr != nil {
		t.Fatal(errErr)
	}
	chunked, err = ReadWithStaged(ctx, c, k)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chunked.Document(); err == nil || !strings.Contains(err.Error(), "entry") {
		t.Fatalf("a document with an unreadable entry: %v", err)
	}
}

// A version published while ReadWithStaged reads the vectors is noticed:
// the catalog is read again, and the snapshot is the new version's, its
// digests included. One that changes during every read is an error.
func TestReadWithStagedRereadsAChangingCatalog(t *testing.T) {
	c, k := newClient(t)
	ctx := context.Background()
	old, updated := EncodeVector([]float32{1, 2}), EncodeVector([]float32{5, 6})
	if err := c.HSet(ctx, k.Embeddings(), "a", old).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, k.Version(), 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	publish := func(version int, vec []byte) {
		_, err := server.Get(t).Client().TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.HSet(ctx, k.Embeddings(), "a", vec)
			p.Set(ctx, k.Version(), version, 0)
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	}
	writes := &redistest.BeforeEach{Name: "hmget", Run: func(n int) {
		if n == 1 {
			publish(2, updated)
		}
	}}
	c.AddHook(writes)
	s, err := ReadWithStaged(ctx, c, k)
	if err != nil {
		t.Fatal(err)
	}
	if writes.N != 2 || s.Version != 2 || s.VectorDigests["a"] != VectorDigest(updated) {
		t.Fatalf("after %d vector reads: version %d, digest of a is the new vector's: %v", writes.N, s.Version, s.VectorDigests["a"] == VectorDigest(updated))
	}

	always := &redistest.BeforeEach{Name: "hmget"}
	always.Run = func(n int) { publish(2+n, old) }
	c2, _ := newClient(t)
	c2.AddHook(always)
	if _, err := ReadWithStaged(ctx, c2, k); err == nil || always.N != maxReadAttempts {
		t.Fatalf("a catalog changing during each of %d reads: %v", always.N, err)
	}
}

// So is one published while it reads the entries and metadata: their
// fields are read after the round trip that reads P:version.
func TestReadWithStagedRereadsMetadataThatChanged(t *testing.T) {
	c, k := newClient(t)
	ctx := context.Background()
	d := testDoc(t, 1, "a")
	publish(t, c, k, d, nil, map[string][]byte{"a": []byte(`{"spec_hash":"h-a","model":"old"}`)})
	writes := &redistest.BeforeEach{Name: "hmget", Run: func(n int) {
		if n == 1 {
			next := testDoc(t, 2, "a")
			publish(t, server.Get(t).Client(), k, next, nil, map[string][]byte{"a": []byte(`{"spec_hash":"h-a","model":"new"}`)})
		}
	}}
	c.AddHook(writes)
	s, err := ReadWithStaged(ctx, c, k)
	if err != nil {
		t.Fatal(err)
	}
	if m := s.ParsedMetadata["a"].Metadata; s.Version != 2 || m == nil || m.Model != "new" {
		t.Fatalf("after %d field reads: version %d, metadata of a %+v", writes.N, s.Version, m)
	}
}

// BenchmarkReadWithStaged10k reads a 10,000-tool catalog's stored state
// as the operator does, its 256-dimension vectors as digests.
func BenchmarkReadWithStaged10k(b *testing.B) {
	c := server.Get(b).Client()
	defer c.Close()
	k := Keys{Prefix: DefaultPrefix("ns-bench", "read10k")}
	ctx := context.Background()
	vecs := map[string][]byte{}
	for i := range 10000 {
		v := make([]float32, 256)
		v[i%256] = float32(i)
		vecs[fmt.Sprintf("tool-%05d", i)] = EncodeVector(v)
	}
	if err := c.HSet(ctx, k.Embeddings(), flatten(vecs)...).Err(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadWithStaged(ctx, c, k); err != nil {
			b.Fatal(err)
		}
	}
}
