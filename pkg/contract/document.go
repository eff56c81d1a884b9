package contract

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Document is one version of a catalog as consumers use it. Redis holds it
// split (contract 2): the head at P:head and one entry per tool in P:tools,
// so a version rewrites only the tools it changes; Read assembles it. Its
// JSON shape is the one contract 1 published whole at P:catalog.
type Document struct {
	// Version increases by one with every published change.
	Version int64 `json:"version"`
	// SchemaHash identifies the content (everything but version, time and
	// itself); consumers holding another hash are stale.
	SchemaHash string `json:"schema_hash"`
	// GeneratedAt is when this version was built.
	GeneratedAt time.Time `json:"generated_at"`
	// Catalog is "<namespace>/<name>" of the ToolCatalog.
	Catalog string `json:"catalog"`
	// CatalogUID identifies the ToolCatalog object (its UID): a catalog
	// deleted and created again under the same name has another, so a
	// consumer never mistakes its version 1 for an old version.
	CatalogUID string `json:"catalog_uid,omitempty"`
	// Embedding says which model produced the vectors; consumers embed
	// queries with the same model or fall back to BM25.
	Embedding EmbeddingInfo `json:"embedding"`
	// Search holds the search defaults.
	Search SearchDefaults `json:"search"`
	// Tools are sorted by name.
	Tools []Tool `json:"tools"`
	// Permissions maps a tool name to its allowed principals; a tool absent
	// here is allowed to everyone, as is one listing "*"; an empty list
	// allows nobody.
	Permissions map[string][]string `json:"permissions"`
}

// EmbeddingInfo describes the vectors of a catalog.
type EmbeddingInfo struct {
	Provider   string `json:"provider"`
	Model      string `json:"model"`
	Dimensions int    `json:"dimensions"`
}

// SearchDefaults are the published search settings.
type SearchDefaults struct {
	Method              string   `json:"method"`
	TopK                int      `json:"top_k"`
	SimilarityThreshold *float64 `json:"similarity_threshold,omitempty"`
	AlwaysInclude       []string `json:"always_include"`
	// SemanticWeight and MinLexicalEvidence tune the hybrid method; absent,
	// consumers use their defaults.
	SemanticWeight     *float64 `json:"semantic_weight,omitempty"`
	MinLexicalEvidence *float64 `json:"min_lexical_evidence,omitempty"`
	// AlwaysIncludeTopNUsed asks consumers to include the n most used
	// tools (MostUsed) in every search, after the always-included ones, and
	// to send them directly under progressive disclosure.
	AlwaysIncludeTopNUsed int `json:"always_include_top_n_used,omitempty"`
	// Intents is "off" when consumers search a request as one intent;
	// absent or "on", they search each intent of a request that asks for
	// several things.
	Intents string `json:"intents,omitempty"`
	// LearnFromRequests asks consumers to record the request text that
	// led to each tool call (RecordRequest); the operator folds frequent
	// requests into the tools' query sets.
	LearnFromRequests bool `json:"learn_from_requests,omitempty"`
	// Disclosure is the catalog's progressive-disclosure policy, resolved
	// (every field set); absent in catalogs published before it existed.
	Disclosure *Disclosure `json:"disclosure,omitempty"`
}

// Disclosure is a catalog's progressive-disclosure policy: when a client
// gets the core tools plus tool_search, tool_describe and tool_call instead
// of every tool, and how those bridge tools answer.
type Disclosure struct {
	// Mode is off, on or auto.
	Mode string `json:"mode"`
	// Threshold is the share of the context window the deferrable tools'
	// schemas may take before auto mode defers them.
	Threshold float64 `json:"threshold"`
	// ContextWindow is the window, in tokens, assumed when the client
	// gives none.
	ContextWindow int `json:"context_window"`
	// SearchTopK is how many tools tool_search returns by default;
	// SearchMaxTopK the most a client may ask for.
	SearchTopK    int `json:"search_top_k"`
	SearchMaxTopK int `json:"search_max_top_k"`
	// DescriptionLength is where tool_search cuts descriptions, in
	// characters.
	DescriptionLength int `json:"description_length"`
}

// Tool is one tool of the document.
type Tool struct {
	Name          string          `json:"name"`
	Description   string          `json:"description"`
	Parameters    json.RawMessage `json:"parameters"`
	Toolset       string          `json:"toolset,omitempty"`
	AlwaysInclude bool            `json:"always_include"`
	AllowRepeat   bool            `json:"allow_repeat"`
	NoBackground  bool            `json:"no_background"`
	SpecHash      string          `json:"spec_hash"`
	// Annotations are MCP's hints about the tool's behaviour.
	Annotations *Annotations `json:"annotations,omitempty"`
	// OutputSchema is the JSON Schema (canonical JSON) of the tool's
	// structured result, MCP's outputSchema; absent when it declares none.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	// Icons are images a client may show for the tool (CheckIcons).
	Icons []Icon `json:"icons,omitempty"`
	// Source says where the tool is served.
	Source *Source `json:"source,omitempty"`
}

// Annotations are MCP tool annotations, with MCP's field names.
type Annotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// Source is where a tool is served: an MCP server's Streamable HTTP
// endpoint and the tool's name there.
type Source struct {
	ToolSource string `json:"tool_source,omitempty"`
	MCPURL     string `json:"mcp_url,omitempty"`
	Tool       string `json:"tool"`
}

// emptyParameters is published for a tool without parameters, so consumers
// always receive an object schema.
var emptyParameters = json.RawMessage(`{"properties":{},"type":"object"}`)

// NormalizeTool canonicalises a tool's parameters (empty becomes an empty
// object schema) and output schema (empty stays absent) so equal tools
// encode to equal bytes.
func NormalizeTool(t Tool) (Tool, error) {
	params, err := CanonicalJSON(t.Parameters)
	if err != nil {
		return t, fmt.Errorf("tool %s: parameters: %w", t.Name, err)
	}
	if len(params) == 0 {
		params = emptyParameters
	}
	t.Parameters = params
	if t.OutputSchema, err = CanonicalJSON(t.OutputSchema); err != nil {
		return t, fmt.Errorf("tool %s: output schema: %w", t.Name, err)
	}
	return t, nil
}

// Seal sorts the tools and the always-include list, fills empty lists so
// they encode as [] and {}, and computes the schema hash. Version and
// GeneratedAt are left to the caller.
func (d *Document) Seal() error {
	_, err := d.SealFrom(nil, nil)
	return err
}

// SealFrom is Seal taking from prev, a document sealed before, and its
// entry digests (as SealFrom returned them) the digest of every entry
// unchanged since: sealing a version that changed a few tools of many
// hashes only those. It returns the document's entry digests, in tool
// order.
func (d *Document) SealFrom(prev *Document, prevDigests []string) ([]string, error) {
	return d.SealKept(prev, prevDigests, nil)
}

// SealKept is SealFrom told which of d's entries are copies of prev's:
// kept[i] is the index in prev of the entry d.Tools[i] was copied from,
// unchanged, with the same permissions, or -1 when it was not. A kept
// entry's digest is taken without comparing the entries, and entries
// kept in prev's order are known to be in order without comparing their
// names: at 100,000 tools the comparisons read every entry's strings,
// most of them missing the CPU's caches. kept is the caller's word: an
// entry it says is unchanged when it is not gets a wrong digest. It is
// ignored when its length is not d's, or when d is not sorted.
func (d *Document) SealKept(prev *Document, prevDigests []string, kept []int32) ([]string, error) {
	if prev == nil || len(prevDigests) != len(prev.Tools) {
		prev, prevDigests, kept = &Document{}, nil, nil
	}
	if len(kept) != len(d.Tools) {
		kept = nil
	}
	if !SortedKept(d.Tools, kept) {
		sort.Slice(d.Tools, func(i, j int) bool { return d.Tools[i].Name < d.Tools[j].Name })
		kept = nil
	}
	if d.Tools == nil {
		d.Tools = []Tool{}
	}
	if d.Permissions == nil {
		d.Permissions = map[string][]string{}
	}
	for name, p := range d.Permissions {
		p = append([]string{}, p...) // an empty list (nobody) stays []
		sort.Strings(p)
		d.Permissions[name] = p
	}
	d.Search.AlwaysInclude = append([]string{}, d.Search.AlwaysInclude...)
	sort.Strings(d.Search.AlwaysInclude)
	digests := make([]string, len(d.Tools))
	// The digests computed here are laid side by side in one string, so
	// the next seal's content hash reads them in order.
	var computed []int // by index, each digest's end in packed
	var packed strings.Builder
	j := 0
	for i := range d.Tools {
		if kept != nil && kept[i] >= 0 && int(kept[i]) < len(prevDigests) {
			digests[i], j = prevDigests[kept[i]], int(kept[i])+1
			continue
		}
		e := d.Entry(i)
		// Both documents are sorted by name.
		for j < len(prev.Tools) && prev.Tools[j].Name < e.Name {
			j++
		}
		if j < len(prev.Tools) && prev.Tools[j].Name == e.Name && prev.Entry(j).Equal(e) {
			digests[i] = prevDigests[j]
			continue
		}
		digest, err := e.Digest()
		if err != nil {
			return nil, err
		}
		packed.WriteString(digest)
		computed = append(computed, i, packed.Len())
	}
	all, at := packed.String(), 0
	for k := 0; k < len(computed); k += 2 {
		digests[computed[k]], at = all[at:computed[k+1]], computed[k+1]
	}
	h, err := d.contentHash(digests)
	if err != nil {
		return nil, err
	}
	d.SchemaHash = h
	return digests, nil
}

// SortedKept reports whether tools are in name order, where kept (as
// for SealKept, nil for none) names the entries copied from a sorted
// document: two neighbours copied in that document's order are in order
// without comparing their names.
func SortedKept(tools []Tool, kept []int32) bool {
	if len(kept) != len(tools) {
		return slices.IsSortedFunc(tools, ByName)
	}
	for i := 1; i < len(tools); i++ {
		if kept[i-1] >= 0 && kept[i] > kept[i-1] {
			continue
		}
		if tools[i].Name < tools[i-1].Name {
			return false
		}
	}
	return true
}

// contentHash hashes the document without its version, time and hash:
// the canonical JSON of its head's settings, then each tool's name and
// entry digest in name order, so a tool's entry can be hashed once.
func (d *Document) contentHash(digests []string) (string, error) {
	h := d.Head()
	h.Version, h.GeneratedAt, h.SchemaHash, h.ToolCount = 0, time.Time{}, "", 0
	raw, err := json.Marshal(h)
	if err != nil {
		return "", err
	}
	canon, err := CanonicalJSON(raw)
	if err != nil {
		return "", err
	}
	sum := sha256.New()
	sum.Write(canon)
	var line []byte
	for i := range d.Tools {
		line = append(append(append(append(line[:0], '\n'), d.Tools[i].Name...), ' '), digests[i]...)
		sum.Write(line)
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}

// Head is the document without its tools (P:head).
func (d *Document) Head() Head {
	return Head{Contract: ContractVersion, Version: d.Version, SchemaHash: d.SchemaHash, GeneratedAt: d.GeneratedAt,
		Catalog: d.Catalog, CatalogUID: d.CatalogUID, Embedding: d.Embedding, Search: d.Search, ToolCount: len(d.Tools)}
}

// Entry is the i-th tool with its permissions (P:tools).
func (d *Document) Entry(i int) Entry {
	e := Entry{Tool: d.Tools[i]}
	if p, ok := d.Permissions[d.Tools[i].Name]; ok {
		p := p
		e.AllowedPrincipals = &p
	}
	return e
}

// Entries returns every tool's entry by name.
func (d *Document) Entries() map[string]Entry {
	out := make(map[string]Entry, len(d.Tools))
	for i := range d.Tools {
		out[d.Tools[i].Name] = d.Entry(i)
	}
	return out
}

// Assemble builds the document of a head and its tools' entries.
func Assemble(h Head, entries []Entry) *Document {
	d := &Document{Version: h.Version, SchemaHash: h.SchemaHash, GeneratedAt: h.GeneratedAt, Catalog: h.Catalog, CatalogUID: h.CatalogUID,
		Embedding: h.Embedding, Search: h.Search, Tools: make([]Tool, 0, len(entries)), Permissions: map[string][]string{}}
	for _, e := range entries {
		d.Tools = append(d.Tools, e.Tool)
		if e.AllowedPrincipals != nil {
			d.Permissions[e.Name] = *e.AllowedPrincipals
		}
	}
	slices.SortFunc(d.Tools, ByName)
	return d
}

// Marshal encodes the document.
func (d *Document) Marshal() ([]byte, error) { return json.Marshal(d) }

// ParseDocument decodes a stored document.
func ParseDocument(data []byte) (*Document, error) {
	d := &Document{}
	if err := unmarshal(data, d); err != nil {
		return nil, fmt.Errorf("parsing catalog document: %w", err)
	}
	return d, nil
}

// ByName orders tools by name, as a sealed document holds them.
func ByName(a, b Tool) int { return strings.Compare(a.Name, b.Name) }

// ToolByName returns the document's tool of that name. A sealed
// document is sorted by name and searched in halves; one read from
// Redis is only meant to be, so a name not found that way is looked for
// in every entry.
func (d *Document) ToolByName(name string) (Tool, bool) {
	if d == nil {
		return Tool{}, false
	}
	if i, ok := slices.BinarySearchFunc(d.Tools, name, func(t Tool, name string) int { return strings.Compare(t.Name, name) }); ok {
		return d.Tools[i], true
	}
	for _, t := range d.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// ContractVersion is the version of the Redis contract this package reads
// and writes (P:head's "contract"). A reader refuses a catalog written with
// a newer one (ErrNewerContract); contract 1 (a whole document in
// P:catalog) is still read.
const ContractVersion = 2

// ErrNewerContract means the catalog was written with a newer contract than
// this reader knows: upgrade the reader.
var ErrNewerContract = errors.New("the catalog uses a newer Redis contract than this reader knows; upgrade it")

// Head is P:head: a version's identity and settings, without its tools.
type Head struct {
	// Contract is ContractVersion of the writer.
	Contract    int            `json:"contract"`
	Version     int64          `json:"version"`
	SchemaHash  string         `json:"schema_hash"`
	GeneratedAt time.Time      `json:"generated_at"`
	Catalog     string         `json:"catalog"`
	CatalogUID  string         `json:"catalog_uid,omitempty"`
	Embedding   EmbeddingInfo  `json:"embedding"`
	Search      SearchDefaults `json:"search"`
	// ToolCount is how many entries P:tools holds for this version.
	ToolCount int `json:"tool_count"`
}

// ParseHead decodes P:head, refusing a newer contract.
func ParseHead(data []byte) (*Head, error) {
	h := &Head{}
	if err := unmarshal(data, h); err != nil {
		return nil, fmt.Errorf("parsing catalog head: %w", err)
	}
	if h.Contract > ContractVersion {
		return nil, fmt.Errorf("%w (catalog %s: contract %d, this reader: %d)", ErrNewerContract, h.Catalog, h.Contract, ContractVersion)
	}
	if h.Contract < 2 {
		return nil, fmt.Errorf("parsing catalog head: contract %d, want 2 or later", h.Contract)
	}
	return h, nil
}

// Entry is one tool of P:tools: the tool and who may use it.
type Entry struct {
	Tool
	// AllowedPrincipals is absent when everyone may use the tool; an empty
	// list allows nobody.
	AllowedPrincipals *[]string `json:"allowed_principals,omitempty"`
}

// ParseEntry decodes a P:tools entry.
func ParseEntry(name, data string) (Entry, error) {
	var e Entry
	if err := unmarshalString(data, &e); err != nil {
		return e, fmt.Errorf("parsing the entry of tool %s: %w", name, err)
	}
	if e.Name != name {
		return e, fmt.Errorf("the entry of tool %s names %q", name, e.Name)
	}
	return e, nil
}

// Digest identifies an entry's content: a hash of each field, length
// prefixed, in a fixed order (parameters are canonical JSON already, see
// NormalizeTool), so no JSON is encoded to compute it.
func (e Entry) Digest() (string, error) {
	h := sha256.New()
	// Each field is its length (8 bytes, little-endian), then itself,
	// written from one buffer: the hash copies a string it is given.
	var buf []byte
	field := func(s string) {
		buf = append(binary.LittleEndian.AppendUint64(buf[:0], uint64(len(s))), s...)
		h.Write(buf)
	}
	flag := func(b bool) {
		if b {
			field("1")
		} else {
			field("0")
		}
	}
	field(e.Name)
	field(e.Description)
	field(string(e.Parameters))
	field(e.Toolset)
	flag(e.AlwaysInclude)
	flag(e.AllowRepeat)
	flag(e.NoBackground)
	field(e.SpecHash)
	// Fields added later count only when set, so existing digests stay.
	optional := func(name string, set bool, v any) error {
		if !set {
			return nil
		}
		b, err := json.Marshal(v)
		field(name)
		field(string(b))
		return err
	}
	if err := optional("annotations", e.Annotations != nil, e.Annotations); err != nil {
		return "", err
	}
	if err := optional("source", e.Source != nil, e.Source); err != nil {
		return "", err
	}
	if len(e.OutputSchema) > 0 {
		field("output_schema")
		field(string(e.OutputSchema))
	}
	if err := optional("icons", len(e.Icons) > 0, e.Icons); err != nil {
		return "", err
	}
	flag(e.AllowedPrincipals != nil)
	if e.AllowedPrincipals != nil {
		field(strconv.Itoa(len(*e.AllowedPrincipals)))
		for _, p := range *e.AllowedPrincipals {
			field(p)
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:16]), nil
}

// Equal reports whether two entries say the same.
func (e Entry) Equal(o Entry) bool {
	if e.Name != o.Name || e.Description != o.Description || string(e.Parameters) != string(o.Parameters) || string(e.OutputSchema) != string(o.OutputSchema) || e.Toolset != o.Toolset ||
		e.AlwaysInclude != o.AlwaysInclude || e.AllowRepeat != o.AllowRepeat || e.NoBackground != o.NoBackground || e.SpecHash != o.SpecHash {
		return false
	}
	if !equalPtr(e.Annotations, o.Annotations, (*Annotations).equal) || !equalPtr(e.Source, o.Source, func(a, b *Source) bool { return *a == *b }) {
		return false
	}
	if !slices.EqualFunc(e.Icons, o.Icons, func(a, b Icon) bool {
		return a.Src == b.Src && a.MIMEType == b.MIMEType && a.Theme == b.Theme && slices.Equal(a.Sizes, b.Sizes)
	}) {
		return false
	}
	if (e.AllowedPrincipals == nil) != (o.AllowedPrincipals == nil) {
		return false
	}
	return e.AllowedPrincipals == nil || slices.Equal(*e.AllowedPrincipals, *o.AllowedPrincipals)
}

// equalPtr says whether two optional values are both absent, or both
// present and equal.
func equalPtr[T any](a, b *T, equal func(a, b *T) bool) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return equal(a, b)
}

func (a *Annotations) equal(b *Annotations) bool {
	same := func(x, y *bool) bool { return equalPtr(x, y, func(x, y *bool) bool { return *x == *y }) }
	return a.Title == b.Title && same(a.ReadOnlyHint, b.ReadOnlyHint) && same(a.DestructiveHint, b.DestructiveHint) &&
		same(a.IdempotentHint, b.IdempotentHint) && same(a.OpenWorldHint, b.OpenWorldHint)
}

// Change is P:changes:v<N>: what version N changed, for consumers to reload
// only that, and the previous entries, to rebuild version N-1.
type Change struct {
	Version int64 `json:"version"`
	// Updated are the tools whose entry, vector or metadata version N set.
	Updated []string `json:"updated"`
	// Removed are the tools version N dropped.
	Removed []string `json:"removed"`
	// Before holds the entries the updated and removed tools had in
	// version N-1; a tool absent here was new.
	Before map[string]Entry `json:"before"`
	// HeadBefore is version N-1's head; absent for a first version.
	HeadBefore *Head `json:"head_before,omitempty"`
	// BeforeKept says that P:changes:v<N>:before holds the vectors and
	// metadata the updated and removed tools had in version N-1 (a tool
	// without one there had none), so that version N-1 can be pinned.
	BeforeKept bool `json:"before_kept,omitempty"`
}

// Notice is the pub/sub message announcing a version.
type Notice struct {
	Catalog string `json:"catalog"`
	// CatalogUID is the document's CatalogUID.
	CatalogUID string `json:"catalog_uid,omitempty"`
	Version    int64  `json:"version"`
	SchemaHash string `json:"schema_hash"`
	// Pinned is the version served while the catalog is pinned
	// (spec.publish.pinVersion), absent when it is not: a notice with
	// Pinned set or cleared is sent when a pin is, and readers then serve
	// another version than Version.
	Pinned int64 `json:"pinned,omitempty"`
}

// NoticeOf is the notice announcing a document.
func NoticeOf(d *Document) Notice {
	return Notice{Catalog: d.Catalog, CatalogUID: d.CatalogUID, Version: d.Version, SchemaHash: d.SchemaHash}
}
