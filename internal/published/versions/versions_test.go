package versions

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
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// server is the package's redis-server, started by the first test that
// needs one.
var server = redistest.NewShared()

func TestMain(m *testing.M) { os.Exit(server.Main(m)) }

func newClient(t *testing.T) (redis.UniversalClient, contract.Keys) {
	t.Helper()
	return server.Client(t), contract.Keys{Prefix: contract.DefaultPrefix("ns-"+t.Name(), "cat")}
}

// testDoc is a sealed document of version v with the named tools; a tool
// named "secret" is allowed to nobody.
func testDoc(t *testing.T, v int64, names ...string) *contract.Document {
	t.Helper()
	d := &contract.Document{Version: v, Catalog: "ns/cat", Embedding: contract.EmbeddingInfo{Provider: "openai", Model: "m", Dimensions: 2},
		Search: contract.SearchDefaults{Method: "hybrid", TopK: 5}, Permissions: map[string][]string{}}
	for _, n := range names {
		tool, err := contract.NormalizeTool(contract.Tool{Name: n, Description: "does " + n, SpecHash: "h-" + n})
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

func write(t *testing.T, c redis.UniversalClient, k contract.Keys, prev, d *contract.Document, vectors map[string][]byte, remove ...string) {
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

func readDoc(t *testing.T, c redis.UniversalClient, k contract.Keys) (*contract.Snapshot, *contract.Document) {
	t.Helper()
	s, err := contract.Read(context.Background(), c, k)
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.Document()
	if err != nil {
		t.Fatal(err)
	}
	return s, d
}

func TestWriteFailsWhenRedisIsDown(t *testing.T) {
	s, err := redistest.Start("")
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	_ = s.Stop()
	if err := Write(context.Background(), c, contract.Keys{Prefix: "p"}, Update{Document: testDoc(t, 1, "a"), Retain: 1}); err == nil || errors.Is(err, contract.ErrConflict) {
		t.Fatalf("Write against a stopped server: %v", err)
	}
}

func TestWriteThenRead(t *testing.T) {
	ctx := context.Background()
	c, k := newClient(t)
	vec := contract.EncodeVector([]float32{0.6, 0.8})
	v1 := testDoc(t, 1, "a", "b", "secret")
	write(t, c, k, nil, v1, map[string][]byte{"a": vec, "b": vec, "secret": vec})
	s, d := readDoc(t, c, k)
	if s.Version != 1 || d.SchemaHash != v1.SchemaHash || len(d.Tools) != 3 || len(s.Vectors) != 3 || s.Metadata["b"] != `{"spec_hash":"h-b"}` {
		t.Fatalf("snapshot %+v, document %+v", s, d)
	}
	if p, ok := d.Permissions["secret"]; !ok || len(p) != 0 || len(d.Permissions) != 1 {
		t.Fatalf("permissions: %v (secret must be allowed to nobody, the others to everyone)", d.Permissions)
	}
	got, err := contract.DecodeVector(s.Vectors["a"])
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
	write(t, c, k, v1, v2, map[string][]byte{"a": contract.EncodeVector([]float32{1, 0})}, "b")
	s, d = readDoc(t, c, k)
	if s.Version != 2 || len(s.Vectors) != 2 || len(d.Tools) != 2 || d.Tools[0].Description != "does a better" || d.SchemaHash != v2.SchemaHash {
		t.Fatalf("after version 2: %+v", d)
	}
	after := dump(t, c, k)
	if before[k.Tools()] == after[k.Tools()] {
		t.Fatal("the tools hash did not change")
	}
	var ch contract.Change
	if unmarshalErr := json.Unmarshal([]byte(c.Get(ctx, k.Changes(2)).Val()), &ch); unmarshalErr != nil {
		t.Fatal(unmarshalErr)
	}
	if fmt.Sprint(ch.Updated) != "[a]" || fmt.Sprint(ch.Removed) != "[b]" || ch.Before["a"].Description != "does a" || ch.Before["b"].Name != "b" || ch.HeadBefore.Version != 1 {
		t.Fatalf("change record of version 2: %+v", ch)
	}

	// Version 1 is rebuilt from version 2 and its change record.
	old, err := contract.ReadVersion(ctx, c, k, 1)
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
	vec := contract.EncodeVector([]float32{0.6, 0.8})
	v1 := testDoc(t, 1, "a", "b")
	write(t, c, k, nil, v1, map[string][]byte{"a": vec, "b": vec})
	yes := true
	v2 := testDoc(t, 2, "a", "b")
	v2.Tools[0].Annotations = &contract.Annotations{DestructiveHint: &yes}
	v2.Tools[1].Source = &contract.Source{MCPURL: "http://mcp.example/mcp", Tool: "b"}
	if err := v2.Seal(); err != nil {
		t.Fatal(err)
	}
	write(t, c, k, v1, v2, nil)
	_, d := readDoc(t, c, k)
	if d.Tools[0].Annotations == nil || !*d.Tools[0].Annotations.DestructiveHint || d.Tools[1].Source == nil || d.SchemaHash != v2.SchemaHash {
		t.Fatalf("after version 2: %+v", d.Tools)
	}
	changes, err := contract.ReadChanges(context.Background(), c, k, 1, 2)
	if err != nil || len(changes) != 1 || fmt.Sprint(changes[0].Updated) != "[a b]" {
		t.Fatalf("changes %+v, %v", changes, err)
	}
}

// A contract-1 reader of P:catalog gets an error that says where the
// catalog went, never an empty catalog.
func TestContractOneReadersRefuseClearly(t *testing.T) {
	c, k := newClient(t)
	write(t, c, k, nil, testDoc(t, 1, "a"), nil)
	raw := c.Get(context.Background(), k.Catalog()).Val()
	var v1 struct {
		Tools []contract.Tool `json:"tools"`
	}
	err := json.Unmarshal([]byte(raw), &v1)
	if err == nil {
		t.Fatal("a contract-1 reader decodes P:catalog")
	}
	if !strings.Contains(raw, "version 2 of the Redis contract") {
		t.Fatalf("P:catalog does not say why: %s", raw)
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
	if old, err := contract.ReadVersion(ctx, c, k, 1); err != nil || len(old.Tools) != 2 {
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

func TestWriteRefusesWhenVersionMoved(t *testing.T) {
	c, k := newClient(t)
	v1 := testDoc(t, 1, "a")
	write(t, c, k, nil, v1, nil)
	before := dump(t, c, k)
	// A pass that read version 0 must not overwrite version 1.
	err := Write(context.Background(), c, k, Update{ExpectVersion: 0, Document: testDoc(t, 1, "b"), Rewrite: true, Retain: 5, Vectors: map[string][]byte{"x": {1, 2, 3, 4}}})
	if !errors.Is(err, contract.ErrConflict) {
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
	shuffled.Tools = []contract.Tool{inOrder.Tools[3], stale, inOrder.Tools[0], inOrder.Tools[2], inOrder.Tools[1]}
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
	var prev *contract.Document
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
	if _, err := contract.ReadVersion(ctx, c, k, 4); !errors.Is(err, contract.ErrNotRetained) {
		t.Fatalf("version 4 is past retention: %v", err)
	}
	if d, err := contract.ReadVersion(ctx, c, k, 5); err != nil || d.Tools[0].Name != "t5" {
		t.Fatalf("version 5: %+v, %v", d, err)
	}
}

func TestDeleteRemovesEveryKeyAndNothingElse(t *testing.T) {
	ctx := context.Background()
	c, k := newClient(t)
	other := contract.Keys{Prefix: contract.DefaultPrefix("ns-"+t.Name(), "other")}
	for _, kk := range []contract.Keys{k, other} {
		var prev *contract.Document
		for v := int64(1); v <= 3; v++ {
			d := testDoc(t, v, "a", fmt.Sprintf("t%d", v))
			write(t, c, kk, prev, d, map[string][]byte{"a": {0, 0, 128, 63}})
			prev = d
		}
		if kk == k {
			if _, err := Pin(ctx, c, k, prev, 2, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := c.Set(ctx, k.StagedEmbeddings(), "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Time{time.Now(), time.Now().AddDate(0, 0, -contract.UsageWindow+1)} {
		if _, err := contract.RecordUse(ctx, c, k, "user:ana", "a", at); err != nil {
			t.Fatal(err)
		}
	}
	if err := Delete(ctx, c, k); err != nil {
		t.Fatal(err)
	}
	if keys := c.Keys(ctx, k.Prefix+"*").Val(); len(keys) != 0 {
		t.Fatalf("keys left after Delete: %v", keys)
	}
	// version, head, catalog, tools, embeddings, metadata, 3 change
	// records, what versions 2 and 3 replaced
	if n := len(c.Keys(ctx, other.Prefix+"*").Val()); n != 11 {
		t.Fatalf("another catalog's keys were touched: %d left, want 11", n)
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

// BenchmarkDiff50k finds what one edited description changes in a
// 50,000-tool document.
func BenchmarkDiff50k(b *testing.B) {
	prev := &contract.Document{Version: 1, Catalog: "ns/cat", Permissions: map[string][]string{}}
	for i := range 50000 {
		tool, err := contract.NormalizeTool(contract.Tool{Name: fmt.Sprintf("tool_%05d", i), Description: fmt.Sprintf("does thing %d", i), SpecHash: fmt.Sprintf("h-%d", i)})
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

// dump returns every key of a catalog with its DUMP serialisation.
func dump(t *testing.T, c redis.UniversalClient, k contract.Keys) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, key := range c.Keys(context.Background(), k.Prefix+"*").Val() {
		out[key] = c.Dump(context.Background(), key).Val()
	}
	return out
}

// A write told which entries are kept from the previous version finds
// the same entries to set and remove, and the same change record, as one
// that walks both documents whole: for edits, additions in the middle,
// removals, changes of permissions, a kept entry moved by a removal
// before it, and a tool removed and another added in its place.
func TestAWriteToldWhatWasKeptDiffsAsAWholeWalk(t *testing.T) {
	doc := func(names ...string) *contract.Document {
		d := &contract.Document{Catalog: "ns/c", Version: 1, Permissions: map[string][]string{}}
		for _, n := range names {
			d.Tools = append(d.Tools, contract.Tool{Name: n, Description: "Does " + n + ".", Parameters: json.RawMessage(`{"type":"object"}`), SpecHash: "h" + n})
		}
		if err := d.Seal(); err != nil {
			t.Fatal(err)
		}
		return d
	}
	prev := doc("a", "b", "c", "d")
	prev.Permissions["c"] = []string{"alice"}
	if err := prev.Seal(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		next func() *contract.Document
		kept []int32
	}{
		{"nothing changed", func() *contract.Document { return prev }, []int32{0, 1, 2, 3}},
		{"an edit", func() *contract.Document {
			d := doc("a", "b", "c", "d")
			d.Tools[1].Description = "Does b better."
			d.Permissions["c"] = []string{"alice"}
			return d
		}, []int32{0, -1, 2, 3}},
		{"an addition in the middle", func() *contract.Document {
			d := doc("a", "b", "bb", "c", "d")
			d.Permissions["c"] = []string{"alice"}
			return d
		}, []int32{0, 1, -1, 2, 3}},
		{"a removal", func() *contract.Document {
			d := doc("a", "c", "d")
			d.Permissions["c"] = []string{"alice"}
			return d
		}, []int32{0, 2, 3}},
		{"permissions changed", func() *contract.Document {
			d := doc("a", "b", "c", "d")
			d.Permissions["c"] = []string{"alice", "bob"}
			return d
		}, []int32{0, 1, -1, 3}},
		{"removed and added in its place", func() *contract.Document {
			d := doc("a", "bb", "c", "d")
			d.Permissions["c"] = []string{"alice"}
			return d
		}, []int32{0, -1, 2, 3}},
		{"a kept entry not said to be", func() *contract.Document {
			d := doc("a", "b", "c", "d")
			d.Permissions["c"] = []string{"alice"}
			return d
		}, []int32{0, -1, -1, 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			next := c.next()
			if next != prev {
				if err := next.Seal(); err != nil {
					t.Fatal(err)
				}
			}
			next.Version = 2
			u := Update{ExpectVersion: 1, Document: next, Previous: prev, Retain: 3, Vectors: map[string][]byte{"a": []byte("v")}}
			wholeSet, wholeRemoved, wholeChange, err := diff(u)
			if err != nil {
				t.Fatal(err)
			}
			u.Kept = c.kept
			set, removed, change, err := diff(u)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(set, wholeSet) || !reflect.DeepEqual(removed, wholeRemoved) || !reflect.DeepEqual(change, wholeChange) {
				t.Fatalf("told what was kept: set %v, removed %v, change %+v; walking whole: %v, %v, %+v", keys(set), removed, change, keys(wholeSet), wholeRemoved, wholeChange)
			}
		})
	}
	// A name listed twice is refused told what was kept too.
	twice := doc("a", "b", "c")
	twice.Tools = append(twice.Tools[:2], twice.Tools[1:]...)
	if _, _, _, err := diff(Update{ExpectVersion: 1, Document: twice, Previous: prev, Retain: 3, Kept: []int32{0, -1, 1, 2}}); err == nil {
		t.Fatal("a document listing b twice was diffed")
	}
}

func keys(m map[string][]byte) []string {
	out := slices.Collect(maps.Keys(m))
	slices.Sort(out)
	return out
}
