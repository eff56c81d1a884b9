package index

import (
	"context"
	"reflect"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/internal/published/versions"

	"github.com/redis/go-redis/v9"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// writeVersion publishes doc after prev (nil for a first version) with the
// given vectors, as the operator does.
func writeVersion(t *testing.T, c redis.UniversalClient, k contract.Keys, prev, doc *contract.Document, vectors map[string][]byte, remove ...string) {
	t.Helper()
	var expect int64
	if prev != nil {
		expect = prev.Version
	}
	meta := map[string][]byte{}
	for name, v := range vectors {
		m, _ := (&contract.Metadata{SpecHash: "h", Model: doc.Embedding.Model, Dimensions: len(v) / 4, SyntheticQueries: []string{"q"}}).Marshal()
		meta[name] = m
	}
	if err := versions.Write(context.Background(), c, k, versions.Update{ExpectVersion: expect, Document: doc, Previous: prev, Rewrite: prev == nil,
		Vectors: vectors, Metadata: meta, Remove: remove, Retain: 5}); err != nil {
		t.Fatal(err)
	}
}

func sameCatalog(t *testing.T, got, want *Catalog) {
	t.Helper()
	if got.Version() != want.Version() || got.SchemaHash() != want.SchemaHash() {
		t.Fatalf("version %d hash %s, want %d %s", got.Version(), got.SchemaHash(), want.Version(), want.SchemaHash())
	}
	if !reflect.DeepEqual(got.Document.Tools, want.Document.Tools) || !reflect.DeepEqual(got.Document.Permissions, want.Document.Permissions) {
		t.Fatalf("tools differ:\n got %+v\nwant %+v", got.Document.Tools, want.Document.Tools)
	}
	if !reflect.DeepEqual(got.Vectors, want.Vectors) {
		t.Fatalf("vectors differ: %d/%d vectors", len(got.Vectors), len(want.Vectors))
	}
}

// A consumer holding a version reads only the tools the versions since
// changed, and ends up with what a full load gives.
func TestUpdateReadsOnlyWhatChanged(t *testing.T) {
	ctx := context.Background()
	c := server.Get(t).Client()
	defer c.Close()
	k := Keys("ns", t.Name())
	base := buildFixture(t, fixture, contract.SearchDefaults{Method: "hybrid", TopK: 3})
	v1 := *base.Document
	v1.CatalogUID = "uid-1"
	if err := v1.Seal(); err != nil {
		t.Fatal(err)
	}
	all := map[string][]byte{}
	for name, v := range base.Vectors {
		all[name] = contract.EncodeVector(v)
	}
	writeVersion(t, c, k, nil, &v1, all)

	reader, read := server.Get(t).CountingClient()
	t.Cleanup(func() { _ = reader.Close() })
	held, err := Load(ctx, reader, k)
	if err != nil {
		t.Fatal(err)
	}
	fullLoad := read.Swap(0)

	// Version 2 edits one tool; version 3 drops another.
	v2 := v1
	v2.Version = 2
	v2.Tools = append([]contract.Tool(nil), v1.Tools...)
	v2.Tools[0].Description = "Edited: " + v2.Tools[0].Description
	if sealErr := v2.Seal(); sealErr != nil {
		t.Fatal(sealErr)
	}
	writeVersion(t, c, k, &v1, &v2, map[string][]byte{v2.Tools[0].Name: contract.EncodeVector(base.Vectors[v2.Tools[1].Name])})
	v3 := v2
	v3.Version = 3
	gone := v2.Tools[len(v2.Tools)-1].Name
	v3.Tools = append([]contract.Tool(nil), v2.Tools[:len(v2.Tools)-1]...)
	v3.Permissions = map[string][]string{}
	for name, p := range v2.Permissions {
		if name != gone {
			v3.Permissions[name] = p
		}
	}
	if sealErr := v3.Seal(); sealErr != nil {
		t.Fatal(sealErr)
	}
	writeVersion(t, c, k, &v2, &v3, nil, gone)

	read.Store(0)
	got, err := Update(ctx, reader, k, held)
	if err != nil {
		t.Fatal(err)
	}
	incremental := read.Load()
	want, err := Load(ctx, c, k)
	if err != nil {
		t.Fatal(err)
	}
	sameCatalog(t, got, want)
	if incremental*3 > fullLoad {
		t.Fatalf("the update read %d bytes, a full load %d: it must read only what changed", incremental, fullLoad)
	}
	if same, updateErr := Update(ctx, reader, k, got); updateErr != nil || same != got {
		t.Fatalf("an update of the current version must return it: %v", updateErr)
	}

	// Without the change records, or for a recreated catalog, a full load.
	c.Del(ctx, k.Changes(2), k.Changes(3))
	if got, err = Update(ctx, reader, k, held); err != nil {
		t.Fatal(err)
	}
	sameCatalog(t, got, want)
	v4 := v3
	v4.Version, v4.CatalogUID = 4, "uid-2"
	if sealErr := v4.Seal(); sealErr != nil {
		t.Fatal(sealErr)
	}
	writeVersion(t, c, k, &v3, &v4, nil)
	if got, err = Update(ctx, reader, k, want); err != nil || got.Document.CatalogUID != "uid-2" {
		t.Fatalf("recreated catalog: %v", err)
	}
}
