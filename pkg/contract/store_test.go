package contract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolcatalog/tool-catalog-operator/internal/testing/redistest"
)

// server is the package's redis-server, started by the first test that
// needs one.
var server = redistest.NewShared()

func TestMain(m *testing.M) { os.Exit(server.Main(m)) }

func newClient(t *testing.T) (redis.UniversalClient, Keys) {
	t.Helper()
	c := server.Get(t).Client()
	t.Cleanup(func() { _ = c.Close() })
	return c, Keys{Prefix: DefaultPrefix("ns-"+t.Name(), "cat")}
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

func write(t *testing.T, c redis.UniversalClient, k Keys, prev, d *Document, vectors map[string][]byte, remove ...string) {
	t.Helper()
	var expect int64
	if prev != nil {
		expect = prev.Version
	}
	meta := map[string][]byte{}
	for name := range vectors {
		meta[name] = []byte(`{"spec_hash":"h-` + name + `"}`)
	}
	if err := Write(context.Background(), c, k, Update{ExpectVersion: expect, Document: d, Previous: prev, Rewrite: prev == nil,
		Vectors: vectors, Metadata: meta, Remove: remove, Retain: 5}); err != nil {
		t.Fatal(err)
	}
}

func readDoc(t *testing.T, c redis.UniversalClient, k Keys) (*Snapshot, *Document) {
	t.Helper()
	s, err := Read(context.Background(), c, k)
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.Document()
	if err != nil {
		t.Fatal(err)
	}
	return s, d
}

func TestWriteThenRead(t *testing.T) {
	ctx := context.Background()
	c, k := newClient(t)
	vec := EncodeVector([]float32{0.6, 0.8})
	v1 := testDoc(t, 1, "a", "b", "secret")
	write(t, c, k, nil, v1, map[string][]byte{"a": vec, "b": vec, "secret": vec})
	s, d := readDoc(t, c, k)
	if s.Version != 1 || d.SchemaHash != v1.SchemaHash || len(d.Tools) != 3 || len(s.Vectors) != 3 || s.Metadata["b"] != `{"spec_hash":"h-b"}` {
		t.Fatalf("snapshot %+v, document %+v", s, d)
	}
	if p, ok := d.Permissions["secret"]; !ok || len(p) != 0 || len(d.Permissions) != 1 {
		t.Fatalf("permissions: %v (secret must be allowed to nobody, the others to everyone)", d.Permissions)
	}
	got, err := DecodeVector(s.Vectors["a"])
	if err != nil || len(got) != 2 || got[0] != 0.6 || got[1] != 0.8 {
		t.Fatalf("vector %v, %v", got, err)
	}

	// Version 2 removes b and updates a: only a's entry is written.
	v2 := testDoc(t, 2, "a", "secret")
	v2.Tools[0].Description = "does a better"
	if sealErr := v2.Seal(); sealErr != nil {
		t.Fatal(sealErr)
	}
	before := dump(t, c, k)
	write(t, c, k, v1, v2, map[string][]byte{"a": EncodeVector([]float32{1, 0})}, "b")
	s, d = readDoc(t, c, k)
	if s.Version != 2 || len(s.Vectors) != 2 || len(d.Tools) != 2 || d.Tools[0].Description != "does a better" || d.SchemaHash != v2.SchemaHash {
		t.Fatalf("after version 2: %+v", d)
	}
	after := dump(t, c, k)
	if before[k.Tools()] == after[k.Tools()] {
		t.Fatal("the tools hash did not change")
	}
	var ch Change
	if unmarshalErr := json.Unmarshal([]byte(c.Get(ctx, k.Changes(2)).Val()), &ch); unmarshalErr != nil {
		t.Fatal(unmarshalErr)
	}
	if fmt.Sprint(ch.Updated) != "[a]" || fmt.Sprint(ch.Removed) != "[b]" || ch.Before["a"].Description != "does a" || ch.Before["b"].Name != "b" || ch.HeadBefore.Version != 1 {
		t.Fatalf("change record of version 2: %+v", ch)
	}

	// Version 1 is rebuilt from version 2 and its change record.
	old, err := ReadVersion(ctx, c, k, 1)
	if err != nil {
		t.Fatal(err)
	}
	if old.Version != 1 || old.SchemaHash != v1.SchemaHash || len(old.Tools) != 3 {
		t.Fatalf("version 1 rebuilt: %+v", old)
	}
	if err := old.Seal(); err != nil || old.SchemaHash != v1.SchemaHash {
		t.Fatalf("the rebuilt version 1 does not hash as it did: %v", err)
	}
}

// A version that changes only a tool's annotations or source (no spec
// hash, no vector) still writes that tool's entry.
func TestWriteAnnotationOnlyChange(t *testing.T) {
	c, k := newClient(t)
	vec := EncodeVector([]float32{0.6, 0.8})
	v1 := testDoc(t, 1, "a", "b")
	write(t, c, k, nil, v1, map[string][]byte{"a": vec, "b": vec})
	yes := true
	v2 := testDoc(t, 2, "a", "b")
	v2.Tools[0].Annotations = &Annotations{DestructiveHint: &yes}
	v2.Tools[1].Source = &Source{MCPURL: "http://mcp.example/mcp", Tool: "b"}
	if err := v2.Seal(); err != nil {
		t.Fatal(err)
	}
	write(t, c, k, v1, v2, nil)
	_, d := readDoc(t, c, k)
	if d.Tools[0].Annotations == nil || !*d.Tools[0].Annotations.DestructiveHint || d.Tools[1].Source == nil || d.SchemaHash != v2.SchemaHash {
		t.Fatalf("after version 2: %+v", d.Tools)
	}
	changes, err := ReadChanges(context.Background(), c, k, 1, 2)
	if err != nil || len(changes) != 1 || fmt.Sprint(changes[0].Updated) != "[a b]" {
		t.Fatalf("changes %+v, %v", changes, err)
	}
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

// A contract-1 reader of P:catalog gets an error that says where the
// catalog went, never an empty catalog.
func TestContractOneReadersRefuseClearly(t *testing.T) {
	c, k := newClient(t)
	write(t, c, k, nil, testDoc(t, 1, "a"), nil)
	raw := c.Get(context.Background(), k.Catalog()).Val()
	var v1 struct {
		Tools []Tool `json:"tools"`
	}
	err := json.Unmarshal([]byte(raw), &v1)
	if err == nil {
		t.Fatal("a contract-1 reader decodes P:catalog")
	}
	if !strings.Contains(raw, "version 2 of the Redis contract") {
		t.Fatalf("P:catalog does not say why: %s", raw)
	}
}

// A catalog written with a newer contract is refused with an error that
// says to upgrade.
func TestNewerContractIsRefused(t *testing.T) {
	c, k := newClient(t)
	write(t, c, k, nil, testDoc(t, 1, "a"), nil)
	c.Set(context.Background(), k.Head(), `{"contract":3,"version":1,"catalog":"ns/cat","tool_count":1}`, 0)
	s, err := Read(context.Background(), c, k)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Document(); !errors.Is(err, ErrNewerContract) || !strings.Contains(err.Error(), "upgrade") {
		t.Fatalf("got %v", err)
	}
}

// A contract-1 catalog is read, and its first contract-2 version rewrites
// the tools and deletes the contract-1 version documents.
func TestContractOneCatalogIsMigrated(t *testing.T) {
	ctx := context.Background()
	c, k := newClient(t)
	v1 := testDoc(t, 1, "a", "b")
	raw, _ := v1.Marshal()
	c.Set(ctx, k.Catalog(), raw, 0)
	c.Set(ctx, k.CatalogVersion(1), raw, 0)
	c.Set(ctx, k.Version(), 1, 0)
	s, d := readDoc(t, c, k)
	if s.Head != nil || len(d.Tools) != 2 {
		t.Fatalf("contract-1 catalog read as %+v", d)
	}
	if old, err := ReadVersion(ctx, c, k, 1); err != nil || len(old.Tools) != 2 {
		t.Fatalf("contract-1 version 1: %v", err)
	}
	v2 := testDoc(t, 2, "a", "b")
	if err := Write(ctx, c, k, Update{ExpectVersion: 1, Document: v2, Previous: d, Rewrite: true, Retain: 5}); err != nil {
		t.Fatal(err)
	}
	_, d = readDoc(t, c, k)
	if d.Version != 2 || len(d.Tools) != 2 || d.SchemaHash != v2.SchemaHash {
		t.Fatalf("migrated: %+v", d)
	}
	if n := c.Exists(ctx, k.CatalogVersion(1)).Val(); n != 0 {
		t.Fatal("the contract-1 version document is left behind")
	}
}

// ReadTools reads part of a version and refuses a version that moved on.
func TestReadTools(t *testing.T) {
	ctx := context.Background()
	c, k := newClient(t)
	v1 := testDoc(t, 1, "a", "b")
	write(t, c, k, nil, v1, map[string][]byte{"a": {0, 0, 128, 63}})
	got, err := ReadTools(ctx, c, k, 1, []string{"a", "gone"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Head.Version != 1 || len(got.Entries) != 1 || got.Entries["a"].Description != "does a" || len(got.Vectors["a"]) != 4 || got.Metadata["a"] == "" {
		t.Fatalf("read %+v", got)
	}
	if _, err := ReadTools(ctx, c, k, 2, []string{"a"}); !errors.Is(err, ErrConflict) {
		t.Fatalf("reading version 2 while 1 is current: %v", err)
	}
	if _, err := ReadChanges(ctx, c, k, 0, 2); !errors.Is(err, ErrNotRetained) {
		t.Fatalf("reading a change record that does not exist: %v", err)
	}
}

func TestWriteRefusesWhenVersionMoved(t *testing.T) {
	c, k := newClient(t)
	v1 := testDoc(t, 1, "a")
	write(t, c, k, nil, v1, nil)
	before := dump(t, c, k)
	// A pass that read version 0 must not overwrite version 1.
	err := Write(context.Background(), c, k, Update{ExpectVersion: 0, Document: testDoc(t, 1, "b"), Rewrite: true, Retain: 5, Vectors: map[string][]byte{"x": {1, 2, 3, 4}}})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("want ErrConflict, got %v", err)
	}
	if after := dump(t, c, k); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a refused write changed Redis:\nbefore %v\nafter  %v", before, after)
	}
}

// A document that lists a name twice cannot be stored: P:tools would
// hold fewer entries than its head counts, and every reader would refuse
// the catalog. The write is refused and Redis keeps the last version.
func TestWriteRefusesATwiceListedTool(t *testing.T) {
	c, k := newClient(t)
	v1 := testDoc(t, 1, "a")
	write(t, c, k, nil, v1, nil)
	before := dump(t, c, k)
	// b is new; a is in the previous version too.
	for _, twice := range []string{"b", "a"} {
		err := Write(context.Background(), c, k, Update{ExpectVersion: 1, Document: testDoc(t, 2, "a", "b", twice), Previous: v1, Retain: 5})
		if err == nil || err.Error() != "the document lists tool "+twice+" twice" {
			t.Fatalf("want a refusal naming %s, got %v", twice, err)
		}
	}
	if after := dump(t, c, k); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a refused write changed Redis:\nbefore %v\nafter  %v", before, after)
	}
}

// The change of a version is the same whether the previous document,
// as read from Redis, is in name order or not, and of a name it lists
// twice the last entry counts.
func TestDiffOfAPreviousDocumentOutOfOrder(t *testing.T) {
	inOrder := testDoc(t, 1, "a", "b", "c", "d")
	shuffled := *inOrder
	stale := inOrder.Tools[1]
	stale.Description = "an older b"
	shuffled.Tools = []Tool{inOrder.Tools[3], stale, inOrder.Tools[0], inOrder.Tools[2], inOrder.Tools[1]}
	next := testDoc(t, 2, "a", "c", "e")
	next.Tools[1].Description = "does c better"
	vectors := map[string][]byte{"a": {1}}

	set, removed, change, err := diff(Update{Document: next, Previous: inOrder, Vectors: vectors})
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(set)); !slices.Equal(got, []string{"c", "e"}) {
		t.Fatalf("entries set: %v, want c and e", got)
	}
	if !slices.Equal(removed, []string{"b", "d"}) || !slices.Equal(change.Updated, []string{"a", "c", "e"}) {
		t.Fatalf("removed %v, updated %v", removed, change.Updated)
	}
	if len(change.Before) != 4 || change.Before["b"].Description != "does b" {
		t.Fatalf("entries before: %+v", change.Before)
	}
	set2, removed2, change2, err := diff(Update{Document: next, Previous: &shuffled, Vectors: vectors})
	if err != nil {
		t.Fatal(err)
	}
	change.HeadBefore, change2.HeadBefore = nil, nil
	if !reflect.DeepEqual(set, set2) || !slices.Equal(removed, removed2) || !reflect.DeepEqual(change, change2) {
		t.Fatalf("against the shuffled document: set %v, removed %v, change %+v; in order: %v, %v, %+v", set2, removed2, change2, set, removed, change)
	}
}

func TestWriteKeepsOnlyRetainedChangeRecords(t *testing.T) {
	ctx := context.Background()
	c, k := newClient(t)
	var prev *Document
	for v := int64(1); v <= 8; v++ {
		d := testDoc(t, v, fmt.Sprintf("t%d", v))
		if err := Write(ctx, c, k, Update{ExpectVersion: v - 1, Document: d, Previous: prev, Rewrite: prev == nil, Retain: 3}); err != nil {
			t.Fatal(err)
		}
		prev = d
	}
	for v := int64(1); v <= 8; v++ {
		exists := c.Exists(ctx, k.Changes(v)).Val() == 1
		if want := v >= 6; exists != want {
			t.Errorf("%s exists=%v, want %v", k.Changes(v), exists, want)
		}
	}
	// The records of versions 6-8 rebuild versions 5-7.
	if _, err := ReadVersion(ctx, c, k, 4); !errors.Is(err, ErrNotRetained) {
		t.Fatalf("version 4 is past retention: %v", err)
	}
	if d, err := ReadVersion(ctx, c, k, 5); err != nil || d.Tools[0].Name != "t5" {
		t.Fatalf("version 5: %+v, %v", d, err)
	}
}

func TestDeleteRemovesEveryKeyAndNothingElse(t *testing.T) {
	ctx := context.Background()
	c, k := newClient(t)
	other := Keys{Prefix: DefaultPrefix("ns-"+t.Name(), "other")}
	for _, kk := range []Keys{k, other} {
		var prev *Document
		for v := int64(1); v <= 3; v++ {
			d := testDoc(t, v, "a", fmt.Sprintf("t%d", v))
			write(t, c, kk, prev, d, map[string][]byte{"a": {0, 0, 128, 63}})
			prev = d
		}
	}
	if err := c.Set(ctx, k.StagedEmbeddings(), "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Time{time.Now(), time.Now().AddDate(0, 0, -UsageWindow+1)} {
		if _, err := RecordUse(ctx, c, k, "user:ana", "a", at); err != nil {
			t.Fatal(err)
		}
	}
	if err := Delete(ctx, c, k); err != nil {
		t.Fatal(err)
	}
	if keys := c.Keys(ctx, k.Prefix+"*").Val(); len(keys) != 0 {
		t.Fatalf("keys left after Delete: %v", keys)
	}
	// version, head, catalog, tools, embeddings, metadata, 3 change records
	if n := len(c.Keys(ctx, other.Prefix+"*").Val()); n != 9 {
		t.Fatalf("another catalog's keys were touched: %d left, want 9", n)
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
	if err := Write(context.Background(), c, k, Update{Document: testDoc(t, 1, "a"), Retain: 1}); err == nil || errors.Is(err, ErrConflict) {
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
	if err := Write(ctx, c, k, Update{Document: testDoc(t, 1, names...), Rewrite: true, Vectors: vectors, Metadata: meta, Retain: 1}); err != nil {
		t.Fatal(err)
	}
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
	writes := &writeOnVectorRead{publish: func(n int) {
		if n == 1 {
			publish(2, updated)
		}
	}}
	c.AddHook(writes)
	s, err := ReadWithStaged(ctx, c, k)
	if err != nil {
		t.Fatal(err)
	}
	if writes.reads != 2 || s.Version != 2 || s.VectorDigests["a"] != VectorDigest(updated) {
		t.Fatalf("after %d vector reads: version %d, digest of a is the new vector's: %v", writes.reads, s.Version, s.VectorDigests["a"] == VectorDigest(updated))
	}

	always := &writeOnVectorRead{}
	always.publish = func(n int) { publish(2+n, old) }
	c2, _ := newClient(t)
	c2.AddHook(always)
	if _, err := ReadWithStaged(ctx, c2, k); err == nil || always.reads != maxReadAttempts {
		t.Fatalf("a catalog changing during each of %d reads: %v", always.reads, err)
	}
}

// So is one published while it reads the entries and metadata: their
// fields are read after the round trip that reads P:version.
func TestReadWithStagedRereadsMetadataThatChanged(t *testing.T) {
	c, k := newClient(t)
	ctx := context.Background()
	d := testDoc(t, 1, "a")
	if err := Write(ctx, c, k, Update{Document: d, Rewrite: true, Metadata: map[string][]byte{"a": []byte(`{"spec_hash":"h-a","model":"old"}`)}, Retain: 1}); err != nil {
		t.Fatal(err)
	}
	writes := &writeOnVectorRead{publish: func(n int) {
		if n == 1 {
			next := testDoc(t, 2, "a")
			if err := Write(ctx, server.Get(t).Client(), k, Update{ExpectVersion: 1, Document: next, Previous: d, Metadata: map[string][]byte{"a": []byte(`{"spec_hash":"h-a","model":"new"}`)}, Retain: 1}); err != nil {
				t.Error(err)
			}
		}
	}}
	c.AddHook(writes)
	s, err := ReadWithStaged(ctx, c, k)
	if err != nil {
		t.Fatal(err)
	}
	if m := s.ParsedMetadata["a"].Metadata; s.Version != 2 || m == nil || m.Model != "new" {
		t.Fatalf("after %d field reads: version %d, metadata of a %+v", writes.reads, s.Version, m)
	}
}

// writeOnVectorRead calls publish before each HMGET (of vectors, entries or metadata), with how
// many there were.
type writeOnVectorRead struct {
	reads   int
	publish func(n int)
}

func (*writeOnVectorRead) DialHook(next redis.DialHook) redis.DialHook { return next }
func (*writeOnVectorRead) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (w *writeOnVectorRead) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "hmget" {
			w.reads++
			w.publish(w.reads)
		}
		return next(ctx, cmd)
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

// BenchmarkDiff50k finds what one edited description changes in a
// 50,000-tool document.
func BenchmarkDiff50k(b *testing.B) {
	prev := &Document{Version: 1, Catalog: "ns/cat", Permissions: map[string][]string{}}
	for i := range 50000 {
		tool, err := NormalizeTool(Tool{Name: fmt.Sprintf("tool_%05d", i), Description: fmt.Sprintf("does thing %d", i), SpecHash: fmt.Sprintf("h-%d", i)})
		if err != nil {
			b.Fatal(err)
		}
		prev.Tools = append(prev.Tools, tool)
	}
	next := *prev
	next.Version = 2
	next.Tools = slices.Clone(prev.Tools)
	next.Tools[4242].Description = "does another thing"
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := diff(Update{Document: &next, Previous: prev}); err != nil {
			b.Fatal(err)
		}
	}
}
