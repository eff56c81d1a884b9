package contract

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

// SealFrom takes a digest from the document before only for an entry
// that is equal in every field the digest covers: each field of a tool,
// changed alone, changes the schema hash exactly as sealing afresh does.
func TestSealFromHashesWhatChanged(t *testing.T) {
	base := func() *Document {
		d := &Document{Catalog: "ns/c", Embedding: EmbeddingInfo{Model: "m", Dimensions: 4}, Permissions: map[string][]string{"b": {"alice"}}}
		for _, name := range []string{"c", "a", "b"} {
			d.Tools = append(d.Tools, Tool{Name: name, Description: "Does " + name + ".", Parameters: json.RawMessage(`{"type":"object"}`), SpecHash: "h" + name})
		}
		return d
	}
	prev := base()
	digests, err := prev.SealFrom(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	yes, no := true, false
	changes := map[string]func(d *Document){
		"Name":          func(d *Document) { d.Tools[0].Name = "a2" },
		"Description":   func(d *Document) { d.Tools[0].Description = "Does more." },
		"Parameters":    func(d *Document) { d.Tools[0].Parameters = json.RawMessage(`{"type":"object","properties":{}}`) },
		"Toolset":       func(d *Document) { d.Tools[0].Toolset = "ops" },
		"AlwaysInclude": func(d *Document) { d.Tools[0].AlwaysInclude = true },
		"AllowRepeat":   func(d *Document) { d.Tools[0].AllowRepeat = true },
		"NoBackground":  func(d *Document) { d.Tools[0].NoBackground = true },
		"SpecHash":      func(d *Document) { d.Tools[0].SpecHash = "other" },
		"Annotations":   func(d *Document) { d.Tools[0].Annotations = &Annotations{ReadOnlyHint: &yes, DestructiveHint: &no} },
		"OutputSchema":  func(d *Document) { d.Tools[0].OutputSchema = json.RawMessage(`{"type":"object"}`) },
		"Icons":         func(d *Document) { d.Tools[0].Icons = []Icon{{Src: "https://example.com/i.png"}} },
		"Source":        func(d *Document) { d.Tools[0].Source = &Source{ToolSource: "s", Tool: "t"} },
		"permissions":   func(d *Document) { d.Permissions["b"] = []string{"alice", "bob"} },
		"nobody":        func(d *Document) { d.Permissions["a"] = []string{} },
	}
	// Every field of a tool is changed above: a field added later must be
	// added there too.
	for i := range reflect.TypeFor[Tool]().NumField() {
		if f := reflect.TypeFor[Tool]().Field(i).Name; changes[f] == nil {
			t.Errorf("no change of field %s is checked", f)
		}
	}
	for what, change := range changes {
		fresh, next := base(), base()
		// The tools are sorted by the first seal: a is first.
		if err := fresh.Seal(); err != nil {
			t.Fatal(err)
		}
		if _, err := next.SealFrom(nil, nil); err != nil {
			t.Fatal(err)
		}
		change(fresh)
		change(next)
		if err := fresh.Seal(); err != nil {
			t.Fatal(err)
		}
		got, err := next.SealFrom(prev, digests)
		if err != nil {
			t.Fatal(err)
		}
		if next.SchemaHash != fresh.SchemaHash {
			t.Errorf("%s changed: SealFrom hashes %s, Seal %s", what, next.SchemaHash, fresh.SchemaHash)
		}
		if next.SchemaHash == prev.SchemaHash {
			t.Errorf("%s changed: the schema hash did not", what)
		}
		if fmt.Sprint(got[1:]) != fmt.Sprint(digests[1:]) && what != "permissions" && what != "Name" {
			t.Errorf("%s changed in tool a only, yet the digests of the others moved", what)
		}
	}
	// Unchanged, every digest is taken and the hash is the same.
	same := base()
	if got, err := same.SealFrom(prev, digests); err != nil || same.SchemaHash != prev.SchemaHash || fmt.Sprint(got) != fmt.Sprint(digests) {
		t.Fatalf("an unchanged document sealed from its previous one: hash %s (want %s), err %v", same.SchemaHash, prev.SchemaHash, err)
	}
}

// SealKept takes a kept entry's digest on the caller's word and hashes
// the rest as SealFrom does; a document whose order the kept entries do
// not vouch for is sorted and sealed as SealFrom would.
func TestSealKeptTakesTheKeptDigestsAndHashesTheRest(t *testing.T) {
	doc := func(names ...string) *Document {
		d := &Document{Catalog: "ns/c", Embedding: EmbeddingInfo{Model: "m", Dimensions: 4}}
		for _, name := range names {
			d.Tools = append(d.Tools, Tool{Name: name, Description: "Does " + name + ".", Parameters: json.RawMessage(`{"type":"object"}`), SpecHash: "h" + name})
		}
		return d
	}
	prev := doc("a", "b", "d", "e")
	digests, err := prev.SealFrom(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// b edited, c added, d removed.
	next := func() *Document {
		d := doc("a", "b", "c", "e")
		d.Tools[1].Description = "Does b better."
		return d
	}
	fresh := next()
	if err = fresh.Seal(); err != nil {
		t.Fatal(err)
	}
	kept := next()
	got, err := kept.SealKept(prev, digests, []int32{0, -1, -1, 3})
	if err != nil || kept.SchemaHash != fresh.SchemaHash {
		t.Fatalf("sealed with the kept entries named: hash %s, %v; want %s, as sealed afresh", kept.SchemaHash, err, fresh.SchemaHash)
	}
	if got[0] != digests[0] || got[3] != digests[3] || got[1] == digests[1] {
		t.Fatalf("digests %v from %v: want a's and e's taken, b's hashed", got, digests)
	}
	// The caller's word is taken: an entry said to be kept keeps its
	// digest though it changed.
	lied := next()
	if got, _ := lied.SealKept(prev, digests, []int32{0, 1, -1, 3}); got[1] != digests[1] {
		t.Fatal("an entry said to be kept was hashed again")
	}
	// Out of order, and no kept entries in the way: sorted, kept ignored.
	unsorted := doc("e", "c", "b", "a")
	unsorted.Tools[2].Description = "Does b better."
	if _, err := unsorted.SealKept(prev, digests, []int32{3, -1, -1, 0}); err != nil || unsorted.SchemaHash != fresh.SchemaHash || unsorted.Tools[0].Name != "a" {
		t.Fatalf("an unsorted document sealed with kept entries: hash %s, first %s, %v; want it sorted and hashed as afresh", unsorted.SchemaHash, unsorted.Tools[0].Name, err)
	}
}

func TestSortedKeptComparesOnlyWhatTheKeptEntriesDoNotVouchFor(t *testing.T) {
	tools := func(names ...string) []Tool {
		var ts []Tool
		for _, n := range names {
			ts = append(ts, Tool{Name: n})
		}
		return ts
	}
	for _, c := range []struct {
		names []string
		kept  []int32
		want  bool
	}{
		{[]string{"a", "b", "c"}, nil, true},
		{[]string{"b", "a", "c"}, nil, false},
		{[]string{"b", "a", "c"}, []int32{-1, -1, 2}, false},
		{[]string{"b", "a", "c"}, []int32{4, 7, 9}, true}, // the caller's word
		{[]string{"b", "a", "c"}, []int32{7, 4, 9}, false},
		{[]string{"a", "c", "b"}, []int32{0, 1, -1}, false},
		{[]string{"a", "b"}, []int32{0}, true}, // the wrong length: names compared
	} {
		if got := SortedKept(tools(c.names...), c.kept); got != c.want {
			t.Errorf("SortedKept(%v, %v) = %t; want %t", c.names, c.kept, got, c.want)
		}
	}
}

// An entry's digest is what earlier releases stored: a change of the
// hashing would make every consumer re-read every tool.
func TestEntryDigestIsStable(t *testing.T) {
	principals := []string{"a", "b"}
	for want, e := range map[string]Entry{
		"4616a7cf7f27ef107d0dec50f8981334": {Tool: Tool{Name: "x", Description: "d", Parameters: []byte(`{"type":"object"}`), SpecHash: "h", AlwaysInclude: true}},
		"2b71ce643fe17ebabfcf5b3fbfd80dc8": {Tool: Tool{Name: "y", OutputSchema: []byte(`{}`), Annotations: &Annotations{Title: "T"}}, AllowedPrincipals: &principals},
	} {
		if got, err := e.Digest(); err != nil || got != want {
			t.Errorf("digest of %s: %s (%v), want %s", e.Name, got, err, want)
		}
	}
}

// What sits in Redis is read by a decoder that recurses: a value nested
// millions deep, which anyone who can write to Redis can store, is refused
// with an error instead of exhausting the stack and killing the reader
// (it did, with segmentio's decoder alone).
func TestDeeplyNestedValuesAreRefused(t *testing.T) {
	const depth = 5_000_000
	deep := strings.Repeat("[", depth) + strings.Repeat("]", depth)
	if _, err := ParseEntry("x", `{"name":"x","parameters":`+deep+`}`); err == nil {
		t.Error("an entry nested 5,000,000 deep was read")
	}
	if _, err := ParseMetadata(`{"spec_hash":"h","model":"m","synthetic_queries":` + deep + `}`); err == nil {
		t.Error("metadata nested 5,000,000 deep was read")
	}
	if _, err := ParseHead([]byte(`{"catalog":` + deep + `}`)); err == nil {
		t.Error("a head nested 5,000,000 deep was read")
	}
	if _, err := ParseDocument([]byte(`{"tools":` + deep + `}`)); err == nil {
		t.Error("a document nested 5,000,000 deep was read")
	}
	if p := Parameters([]byte(`{"properties":{"a":` + deep + `}}`)); p != nil {
		t.Errorf("parameters nested 5,000,000 deep gave %v", p)
	}
	// Stray closers lend the openers after them no room (the decoder
	// stops at the first, but the scan does not lean on that).
	if err := checkNesting([]byte(strings.Repeat("]", depth) + deep)); err == nil {
		t.Error("nesting 5,000,000 deep after as many closers passed the scan")
	}
	// Brackets in strings, escaped quotes among them, are text: they do
	// not count, and do not hide the nesting after them.
	text := strings.Repeat(`[{\"\\`, depth/4)
	e, err := ParseEntry("x", `{"name":"x","description":"`+text+`"}`)
	if err != nil || e.Description != strings.Repeat(`[{"\`, depth/4) {
		t.Errorf("an entry whose description holds brackets and escaped quotes: %v", err)
	}
	if _, err := ParseEntry("x", `{"name":"x","description":"`+text+`","parameters":`+deep+`}`); err == nil {
		t.Error("an entry nested 5,000,000 deep after a description of brackets was read")
	}
	// Nesting as deep as real schemas go is read.
	nested := `{"properties":{"a":{"description":"d","items":` + strings.Repeat(`{"items":`, 50) + `{}` + strings.Repeat("}", 50) + `}}}`
	if p := Parameters([]byte(nested)); len(p) != 1 || p[0].Description != "d" {
		t.Errorf("a schema nested 50 deep gave %v", p)
	}
}

// ToolByName finds every tool of a sealed document, and of one read
// from Redis out of name order (written by something else): a search in
// halves that misses falls back to every entry.
func TestToolByNameFindsEveryTool(t *testing.T) {
	sealed := &Document{}
	for i := range 50 {
		sealed.Tools = append(sealed.Tools, Tool{Name: fmt.Sprintf("tool_%02d", (i*7)%50)})
	}
	if err := sealed.Seal(); err != nil {
		t.Fatal(err)
	}
	unsorted := &Document{Tools: append([]Tool(nil), sealed.Tools...)}
	unsorted.Tools[3], unsorted.Tools[40] = unsorted.Tools[40], unsorted.Tools[3]
	for _, d := range []*Document{sealed, unsorted} {
		for _, want := range d.Tools {
			if got, ok := d.ToolByName(want.Name); !ok || got.Name != want.Name {
				t.Errorf("%s: found %v %q", want.Name, ok, got.Name)
			}
		}
		if _, ok := d.ToolByName("tool_99"); ok {
			t.Error("found a tool the document lacks")
		}
	}
	var none *Document
	if _, ok := none.ToolByName("tool_01"); ok {
		t.Error("found a tool in no document")
	}
}

// An entry and metadata are decoded from the Redis reply where it is, and
// keep none of it: a consumer holding a catalog holds its parsed tools,
// not the replies they were read from besides.
func TestParsedValuesKeepNoneOfTheReply(t *testing.T) {
	raw := strings.Clone(`{"name":"get_weather","description":"Gets the weather.","parameters":{"type":"object"},"spec_hash":"h1","allowed_principals":["alice"]}`)
	e, err := ParseEntry("get_weather", raw)
	if err != nil {
		t.Fatal(err)
	}
	start := uintptr(unsafe.Pointer(unsafe.StringData(raw)))
	within := func(p unsafe.Pointer) bool { return uintptr(p) >= start && uintptr(p) < start+uintptr(len(raw)) }
	held := map[string]unsafe.Pointer{"name": unsafe.Pointer(unsafe.StringData(e.Name)), "description": unsafe.Pointer(unsafe.StringData(e.Description)),
		"parameters": unsafe.Pointer(unsafe.SliceData(e.Parameters)), "spec hash": unsafe.Pointer(unsafe.StringData(e.SpecHash)), "principal": unsafe.Pointer(unsafe.StringData((*e.AllowedPrincipals)[0]))}
	for what, p := range held {
		if within(p) {
			t.Errorf("the entry's %s points into the reply it was parsed from", what)
		}
	}
	rawMeta := strings.Clone(`{"spec_hash":"h1","description":"Gets the weather.","model":"m","dimensions":4,"synthetic_queries":["weather in Paris"]}`)
	m, err := ParseMetadata(rawMeta)
	if err != nil {
		t.Fatal(err)
	}
	start = uintptr(unsafe.Pointer(unsafe.StringData(rawMeta)))
	raw = rawMeta
	for what, s := range map[string]string{"spec hash": m.SpecHash, "description": m.Description, "model": m.Model, "query": m.SyntheticQueries[0]} {
		if within(unsafe.Pointer(unsafe.StringData(s))) {
			t.Errorf("the metadata's %s points into the reply it was parsed from", what)
		}
	}
}
