// Package querystore keeps what catalog passes paid a provider for, by
// what decided it: the query sets a chat model wrote for a tool, and the
// vector an embedding model made of a text. A pass (or a grading) of any
// catalog of the same namespace that needs the same finds it here instead
// of asking the provider again, so catalogs over the same tools pay once,
// and a description edited and then reverted costs nothing the second
// time. Store.Generator and Store.Embedder wrap a catalog's provider
// clients so that every request looks here first.
//
// An entry's key is the SHA-256 of everything that decides its content
// (the generator's identity, the tool's name, description and
// parameters, the count and the curated examples; or the embedder's
// identity and the text), under the namespace of the catalogs that may
// use it:
//
//	toolcatalog:store:<namespace>:queries:<sha256>   string  JSON array of queries
//	toolcatalog:store:<namespace>:vector:<sha256>    string  float32 little-endian vector
//
// Tenancy: only the operator derives keys, from inputs it read itself,
// and a catalog looks only under its own namespace. A catalog of another
// namespace never reads an entry, even of a tool identical to one of its
// own: a hit would tell it that such a tool exists elsewhere. Within a
// namespace, whoever may create a catalog may read its ToolDefinitions,
// whose content decides the entries.
//
// Each entry is written whole in one SET and lives for the grace period
// after it was last written or found; nothing else refers to it (a
// catalog keeps its own copy of what it published), so an entry no pass
// has needed for that long goes on its own. A namespace holds at most
// MaxEntries: its index, a sorted set of the entries by when each was
// last written or found,
//
//	toolcatalog:store:<namespace>:index              zset    entry → last used (Unix ms)
//
// names the least recently used, which a write past the bound deletes.
// What is read is checked as any answer from a provider is: a malformed
// entry is a miss.
package querystore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// DefaultGrace is how long an entry lives after it was last used.
const DefaultGrace = 7 * 24 * time.Hour

// maxQueriesBytes bounds a kept query set: queries are a sentence each,
// and a set larger than this (a provider that answers with pages) is
// used but not kept.
const maxQueriesBytes = 16 << 10

// DefaultMaxEntries bounds the entries of a namespace: a catalog of
// 50,000 tools with 5 queries each needs about 350,000 (a query set and
// the vectors of its texts per tool).
const DefaultMaxEntries = 1_000_000

// Store is the entries of one namespace in one Redis.
type Store struct {
	// Observe, when set, is told what lookups found (see Observer).
	Observe Observer
	// Renew, when set, reads nothing: everything is asked again and what
	// is asked is kept, replacing what was (a refresh someone requested).
	Renew bool
	// Flights, when set, is shared by the stores of one process: a
	// request that another pass is asking the provider for waits for that
	// answer instead of asking again.
	Flights *Flights

	// MaxEntries bounds the namespace's entries (DefaultMaxEntries when
	// zero): a write past it deletes the least recently used.
	MaxEntries int
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	rc     redis.UniversalClient
	prefix string
	grace  time.Duration
}

// New returns the store of a namespace's catalogs in rc; grace is
// DefaultGrace when zero.
func New(rc redis.UniversalClient, namespace string, grace time.Duration) *Store {
	if grace <= 0 {
		grace = DefaultGrace
	}
	return &Store{rc: rc, prefix: "toolcatalog:store:" + namespace + ":", grace: grace}
}

// index is the key of the namespace's index of entries by last use.
func (s *Store) index() string { return s.prefix + "index" }

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Store) maxEntries() int64 {
	if s.MaxEntries > 0 {
		return int64(s.MaxEntries)
	}
	return DefaultMaxEntries
}

// Observer is told how many entries of a kind ("queries",
// "vectors") a lookup found ("hit"), did not ("miss"), or could not read
// or write ("error").
type Observer func(kind, outcome string, n int)

// generation is what decides a generated query set.
type generation struct {
	Generator   string `json:"generator"`
	Name        string `json:"name"`
	Description string `json:"description"`
	// Parameters is the schema's text as sent: a string, so that text
	// that is not JSON still keys its own entry.
	Parameters string   `json:"parameters"`
	Count      int      `json:"count"`
	Existing   []string `json:"existing"`
}

// vector is what decides a text's vector.
type vector struct {
	Embedder string `json:"embedder"`
	Text     string `json:"text"`
}

func (s *Store) key(kind string, v any) string {
	// Marshalling structs of strings and numbers cannot fail.
	raw, _ := json.Marshal(v)
	sum := sha256.Sum256(append([]byte(kind+"\n"), raw...))
	return s.prefix + kind + ":" + hex.EncodeToString(sum[:])
}

// Generator returns g looking here before it asks its provider, and
// keeping what it writes; g itself when it names no identity (the
// builtin generator costs nothing to ask again).
func (s *Store) Generator(g embedding.QueryGenerator) embedding.QueryGenerator {
	id := embedding.IdentityOf(g)
	if s == nil || id == "" {
		return g
	}
	return &storedGenerator{QueryGenerator: g, s: s, id: id}
}

type storedGenerator struct {
	embedding.QueryGenerator
	s  *Store
	id string
}

func (g *storedGenerator) Identity() string { return g.id }

// GenerateQueries returns the queries kept for the request when they are
// a set the generator could have written (exactly Count distinct
// non-empty queries, none of them an example), and otherwise asks the
// generator and keeps its answer.
func (g *storedGenerator) GenerateQueries(ctx context.Context, req embedding.QueryRequest) ([]string, error) {
	key := g.s.key("queries", generation{Generator: g.id, Name: req.Tool.Name, Description: req.Tool.Description,
		Parameters: string(req.Tool.Parameters), Count: req.Count, Existing: req.Existing})
	qs, found, readErr := g.look(ctx, key, req)
	switch {
	case readErr != nil:
		g.s.observe("queries", "error", 1)
	case found:
		g.s.observe("queries", "hit", 1)
		return qs, nil
	default:
		g.s.observe("queries", "miss", 1)
	}
	ask := func() ([]string, error) {
		qs, err := g.QueryGenerator.GenerateQueries(ctx, req)
		if err != nil {
			return nil, err
		}
		raw, _ := json.Marshal(qs)
		if len(raw) > maxQueriesBytes {
			return qs, nil // used, not kept: an entry's size is bounded
		}
		if setErr := g.s.set(ctx, []string{key}, [][]byte{raw}); setErr != nil {
			g.s.observe("queries", "error", 1)
		}
		return qs, nil
	}
	if g.s.Flights == nil {
		return ask()
	}
	v, err, shared := g.s.Flights.queries.Do(key, func() (any, error) {
		// A flight that ended between the look above and this one kept
		// its answer: look again before asking.
		if qs, found, _ := g.look(ctx, key, req); found {
			return qs, nil
		}
		return ask()
	})
	if err != nil && shared && ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// The pass that asked ended; this one has not.
		return ask()
	}
	if err != nil {
		return nil, err
	}
	return slices.Clone(v.([]string)), nil
}

// look returns the query set kept under key when it is one the generator
// could have written for req; a malformed entry is not found.
func (g *storedGenerator) look(ctx context.Context, key string, req embedding.QueryRequest) ([]string, bool, error) {
	raws, err := g.s.get(ctx, []string{key})
	if err != nil || raws[0] == "" {
		return nil, false, err
	}
	qs, err := embedding.ParseQueries(raws[0], req.Count, req.Existing)
	return qs, err == nil, nil
}

// Embedder returns e looking here before it asks its provider, and
// keeping what it embeds; e itself when it names no identity (the
// builtin model costs nothing but time to ask again).
func (s *Store) Embedder(e embedding.Embedder) embedding.Embedder {
	id := embedding.IdentityOf(e)
	if s == nil || id == "" {
		return e
	}
	return &storedEmbedder{Embedder: e, s: s, id: id}
}

type storedEmbedder struct {
	embedding.Embedder
	s  *Store
	id string
}

func (e *storedEmbedder) Identity() string { return e.id }

// Embed returns the vectors kept for the texts, and asks the embedder for
// the others only, keeping what it returns. A kept vector that is not
// one of the embedder's (its length, when that is known, or a value that
// is not finite) is asked again.
func (e *storedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	keys := make([]string, len(texts))
	for i, t := range texts {
		keys[i] = e.s.key("vector", vector{Embedder: e.id, Text: t})
	}
	out := make([][]float32, len(texts))
	raws, err := e.s.get(ctx, keys)
	if err != nil {
		e.s.observe("vectors", "error", len(texts))
		raws = make([]string, len(texts))
	}
	dims := e.Dimensions()
	var at []int
	for i, raw := range raws {
		if v, ok := usableVector([]byte(raw), dims); ok {
			out[i] = v
			continue
		}
		at = append(at, i)
	}
	if err == nil {
		e.s.observe("vectors", "hit", len(texts)-len(at))
		e.s.observe("vectors", "miss", len(at))
	}
	if len(at) == 0 {
		return out, nil
	}
	// Texts another pass is embedding are waited for; this one embeds
	// the rest.
	owned, waits := e.s.Flights.claim(keys, at)
	if len(owned) > 0 && e.s.Flights != nil {
		// A flight that ended between the look above and the claim kept
		// its vectors: look again before asking.
		owned = e.kept(ctx, keys, owned, out)
	}
	if len(owned) > 0 {
		if err := e.embed(ctx, texts, keys, owned, out); err != nil {
			e.s.Flights.land(keys, owned, nil, err)
			return nil, err
		}
		e.s.Flights.land(keys, owned, out, nil)
	}
	var again []int
	for i, f := range waits {
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if f.err != nil {
			again = append(again, i)
			continue
		}
		out[i] = f.vec
	}
	if len(again) > 0 {
		if err := e.embed(ctx, texts, keys, again, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// kept fills in out the vectors the store now holds of the owned
// positions, ends their flights, and returns the positions still to ask.
func (e *storedEmbedder) kept(ctx context.Context, keys []string, owned []int, out [][]float32) []int {
	raws, err := e.s.get(ctx, pick(keys, owned))
	if err != nil {
		return owned
	}
	var found, ask []int
	for j, i := range owned {
		if v, ok := usableVector([]byte(raws[j]), e.Dimensions()); ok {
			out[i] = v
			found = append(found, i)
			continue
		}
		ask = append(ask, i)
	}
	e.s.Flights.land(keys, found, out, nil)
	return ask
}

// pick returns the strings of s at the positions given, in their order.
func pick(s []string, at []int) []string {
	out := make([]string, len(at))
	for j, i := range at {
		out[j] = s[i]
	}
	return out
}

// embed asks the embedder for the texts at the positions given, fills
// them in out and keeps them.
func (e *storedEmbedder) embed(ctx context.Context, texts, keys []string, at []int, out [][]float32) error {
	ask := pick(texts, at)
	vecs, err := e.Embedder.Embed(ctx, ask)
	if err != nil {
		return err
	}
	if len(vecs) != len(ask) {
		return fmt.Errorf("the embedder returned %d vectors for %d texts", len(vecs), len(ask))
	}
	newKeys, values := make([]string, len(at)), make([][]byte, len(at))
	for j, i := range at {
		out[i] = vecs[j]
		newKeys[j], values[j] = keys[i], contract.EncodeVector(vecs[j])
	}
	if err := e.s.set(ctx, newKeys, values); err != nil {
		e.s.observe("vectors", "error", len(at))
	}
	return nil
}

// Flights are the requests the stores of one process are asking a
// provider for. The zero value is ready to use.
type Flights struct {
	queries singleflight.Group

	mu      sync.Mutex
	vectors map[string]*vectorFlight
}

// vectorFlight is one text being embedded: done closes when vec, or err,
// is set.
type vectorFlight struct {
	done chan struct{}
	vec  []float32
	err  error
}

// claim splits the positions at of keys into those this caller embeds
// (no one else is) and, by position, the flights it waits for. A nil
// Flights owns everything.
func (f *Flights) claim(keys []string, at []int) (owned []int, waits map[int]*vectorFlight) {
	if f == nil {
		return at, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.vectors == nil {
		f.vectors = map[string]*vectorFlight{}
	}
	waits = map[int]*vectorFlight{}
	mine := map[string]bool{}
	for _, i := range at {
		k := keys[i]
		if fl, ok := f.vectors[k]; ok && !mine[k] {
			waits[i] = fl
			continue
		}
		if !mine[k] {
			f.vectors[k] = &vectorFlight{done: make(chan struct{})}
			mine[k] = true
		}
		owned = append(owned, i)
	}
	return owned, waits
}

// land ends the flights of the owned positions with their vectors in
// out, or with err.
func (f *Flights) land(keys []string, owned []int, out [][]float32, err error) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, i := range owned {
		fl, ok := f.vectors[keys[i]]
		if !ok {
			continue // a text asked twice in one call, landed already
		}
		delete(f.vectors, keys[i])
		if err != nil {
			fl.err = err
		} else {
			fl.vec = out[i]
		}
		close(fl.done)
	}
}

// usableVector decodes raw when it is dims finite values (any non-zero
// number of them when dims is 0), as the copy others hold when they do.
func usableVector(raw []byte, dims int) ([]float32, bool) {
	if len(raw) == 0 {
		return nil, false
	}
	v, err := contract.DecodeVector(raw)
	if err != nil || len(v) == 0 || dims > 0 && len(v) != dims {
		return nil, false
	}
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, false
		}
	}
	return shared.of(v), true
}

func (s *Store) observe(kind, outcome string, n int) {
	if s.Observe != nil && n > 0 {
		s.Observe(kind, outcome, n)
	}
}

// get reads the keys in one pipeline, renewing each entry found; "" for
// a key not there.
func (s *Store) get(ctx context.Context, keys []string) ([]string, error) {
	if len(keys) == 0 || s.Renew {
		return make([]string, len(keys)), nil
	}
	cmds := make([]*redis.StringCmd, len(keys))
	used := float64(s.now().UnixMilli())
	_, err := s.rc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.GetEx(ctx, k, s.grace)
			// Only an entry the index holds moves: a miss adds nothing.
			p.ZAddXX(ctx, s.index(), redis.Z{Score: used, Member: k[len(s.prefix):]})
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("reading the query store: %w", err)
	}
	out := make([]string, len(keys))
	for i, c := range cmds {
		out[i] = c.Val()
	}
	return out, nil
}

// set writes each key's value, to live for the grace period, in one
// pipeline.
func (s *Store) set(ctx context.Context, keys []string, values [][]byte) error {
	if len(keys) == 0 {
		return nil
	}
	now := s.now()
	var size *redis.IntCmd
	_, err := s.rc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			p.Set(ctx, k, values[i], s.grace)
			p.ZAdd(ctx, s.index(), redis.Z{Score: float64(now.UnixMilli()), Member: k[len(s.prefix):]})
		}
		// Entries that expired leave the index; the index expires with
		// the last of them.
		p.ZRemRangeByScore(ctx, s.index(), "-inf", fmt.Sprint(now.Add(-s.grace).UnixMilli()))
		p.Expire(ctx, s.index(), s.grace)
		size = p.ZCard(ctx, s.index())
		return nil
	})
	if err != nil {
		return fmt.Errorf("writing the query store: %w", err)
	}
	if over := size.Val() - s.maxEntries(); over > 0 {
		return s.evict(ctx, over)
	}
	return nil
}

// evict deletes the n least recently used entries of the namespace.
func (s *Store) evict(ctx context.Context, n int64) error {
	oldest, err := s.rc.ZPopMin(ctx, s.index(), n).Result()
	if err != nil {
		return fmt.Errorf("trimming the query store: %w", err)
	}
	keys := make([]string, len(oldest))
	for i, z := range oldest {
		keys[i] = s.prefix + fmt.Sprint(z.Member)
	}
	_, err = s.rc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Del(ctx, k) // one key a command: the entries may live in several slots
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("trimming the query store: %w", err)
	}
	return nil
}
