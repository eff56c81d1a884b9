// Package redisconn makes Redis clients from a catalog's connection
// settings and keeps one per catalog, so passes reuse connections.
package redisconn

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// Options are the connection settings of one catalog's Redis.
type Options struct {
	Addresses  []string
	Mode       string // standalone, sentinel or cluster
	MasterName string
	DB         int
	Username   string
	Password   string
	// TLS is nil for plain TCP.
	TLS *tls.Config
	// TLSFingerprint identifies the TLS settings (CA bundle, verification)
	// so a change of them replaces the client.
	TLSFingerprint string
}

// Fingerprint identifies the Redis the options reach, and as whom,
// without holding the password itself.
func (o Options) Fingerprint() string { return o.fingerprint() }

// fingerprint identifies the options without holding the password itself.
func (o Options) fingerprint() string {
	h := sha256.New()
	fmt.Fprintf(h, "%q|%s|%s|%d|%s|%s|%t|%s", o.Addresses, o.Mode, o.MasterName, o.DB, o.Username, o.Password, o.TLS != nil, o.TLSFingerprint)
	return hex.EncodeToString(h.Sum(nil))
}

// Pool keeps the catalogs' clients: one per set of options, shared by
// every catalog that uses the same Redis with the same credentials and
// TLS settings, so a manager of many catalogs holds one connection pool
// (and its buffers) per Redis, not per catalog. A catalog whose options
// change moves to the client of its new options; a client no catalog uses
// is closed.
type Pool struct {
	mu sync.Mutex
	// clients holds the clients by their options' fingerprint, and of
	// maps each catalog to the fingerprint of the client it uses.
	clients map[string]*shared
	of      map[string]string
}

type shared struct {
	client redis.UniversalClient
	users  int
}

// NewPool returns an empty pool.
func NewPool() *Pool { return &Pool{clients: map[string]*shared{}, of: map[string]string{}} }

// Get returns the client of a catalog for these options.
func (p *Pool) Get(id string, o Options) redis.UniversalClient {
	fp := o.fingerprint()
	p.mu.Lock()
	defer p.mu.Unlock()
	if had, ok := p.of[id]; ok && had != fp {
		p.release(had)
		delete(p.of, id)
	}
	c := p.clients[fp]
	if c == nil {
		c = &shared{client: NewClient(o)}
		p.clients[fp] = c
	}
	if _, ok := p.of[id]; !ok {
		p.of[id] = fp
		c.users++
	}
	return c.client
}

// release drops a catalog's use of a client, closing it when none is
// left; p.mu is held.
func (p *Pool) release(fp string) {
	c := p.clients[fp]
	if c == nil {
		return
	}
	if c.users--; c.users <= 0 {
		_ = c.client.Close()
		delete(p.clients, fp)
	}
}

// size is how many clients the pool holds.
func (p *Pool) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.clients)
}

// NewClient returns a client for the options, outside any pool: the
// contract's client, which follows failovers (contract.NewClient).
func NewClient(o Options) redis.UniversalClient {
	return contract.NewClient(contract.ClientOptions{Addresses: o.Addresses, Mode: o.Mode, MasterName: o.MasterName, DB: o.DB,
		Username: o.Username, Password: o.Password, TLS: o.TLS})
}

// Forget drops a catalog's use of its client, which is closed when no
// other catalog uses it.
func (p *Pool) Forget(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if fp, ok := p.of[id]; ok {
		p.release(fp)
		delete(p.of, id)
	}
}

// Close closes every client.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for fp, c := range p.clients {
		_ = c.client.Close()
		delete(p.clients, fp)
	}
	clear(p.of)
}
