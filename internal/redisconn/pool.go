// Package redisconn makes Redis clients from a catalog's connection
// settings and keeps one per catalog, so passes reuse connections.
package redisconn

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
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

// fingerprint identifies the options without holding the password itself.
func (o Options) fingerprint() string {
	h := sha256.New()
	fmt.Fprintf(h, "%q|%s|%s|%d|%s|%s|%t|%s", o.Addresses, o.Mode, o.MasterName, o.DB, o.Username, o.Password, o.TLS != nil, o.TLSFingerprint)
	return hex.EncodeToString(h.Sum(nil))
}

func (o Options) universal() *redis.UniversalOptions {
	return &redis.UniversalOptions{
		Addrs:         o.Addresses,
		MasterName:    o.MasterName,
		IsClusterMode: o.Mode == "cluster",
		DB:            o.DB,
		Username:      o.Username,
		Password:      o.Password,
		TLSConfig:     o.TLS,
		// Fail fast: the reconciler's queue does the backing off.
		DialTimeout:  5 * time.Second,
		ReadTimeout:  10 * time.Second,
		WriteTimeout: 10 * time.Second,
		MaxRetries:   1,
	}
}

// Pool keeps one client per catalog, replaced when its options change, so
// passes reuse connections.
type Pool struct {
	mu      sync.Mutex
	clients map[string]pooled
}

type pooled struct {
	fingerprint string
	client      redis.UniversalClient
}

// NewPool returns an empty pool.
func NewPool() *Pool { return &Pool{clients: map[string]pooled{}} }

// Get returns the client of a catalog for these options.
func (p *Pool) Get(id string, o Options) redis.UniversalClient {
	fp := o.fingerprint()
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[id]; ok {
		if c.fingerprint == fp {
			return c.client
		}
		_ = c.client.Close()
	}
	c := NewClient(o)
	p.clients[id] = pooled{fingerprint: fp, client: c}
	return c
}

// NewClient returns a client for the options, outside any pool.
func NewClient(o Options) redis.UniversalClient { return redis.NewUniversalClient(o.universal()) }

// Forget closes and drops a catalog's client.
func (p *Pool) Forget(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[id]; ok {
		_ = c.client.Close()
		delete(p.clients, id)
	}
}

// Close closes every client.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, c := range p.clients {
		_ = c.client.Close()
		delete(p.clients, id)
	}
}
