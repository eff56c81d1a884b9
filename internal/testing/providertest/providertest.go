// Package providertest is the embedding and query-generation provider of
// the catalog tests: an in-process OpenAI-compatible server
// (openaitest) that embeds over real HTTP, and a query generator whose
// queries depend on the description, as a real model's do, that counts
// its calls per tool and fails on command.
package providertest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/openaitest"
)

// The models and the dimensions a Provider serves.
const (
	EmbeddingModel = "text-embedding-3-small"
	ChatModel      = "gpt-4o-mini"
	Dims           = 16
)

// Provider is what a test's catalog generates queries and embeds with.
// Queries come from the Provider itself, as an embedding.QueryGenerator
// a test hands to the pass, or, for a wire provider, from the server over
// HTTP; vectors come from the real OpenAI-compatible client talking to
// the server, so batching is exercised over HTTP.
type Provider struct {
	*openaitest.Server
	mu      sync.Mutex
	failing map[string]int // tool name ("*" for all) → HTTP status to fail with
	calls   map[string]int // generator calls per tool
	wire    bool
	vary    bool
}

// New is a Provider whose queries a test injects as the generator.
func New(t testing.TB) *Provider {
	p := &Provider{Server: openaitest.New(t), failing: map[string]int{}, calls: map[string]int{}}
	p.OnEmbeddings = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.EmbeddingsRequest) {
		openaitest.WriteEmbeddings(w, req, Dims, nil)
	}
	return p
}

// NewWire is a Provider whose chat requests go over HTTP to the server,
// for tests of what reaches it: the server reads the tool name, the
// count and the description from the prompt.
func NewWire(t testing.TB) *Provider {
	p := New(t)
	p.wire = true
	p.OnChat = func(w http.ResponseWriter, r *http.Request, n int, req openaitest.ChatRequest) {
		user := req.Messages[len(req.Messages)-1].Content
		tool := toolNameLine.FindStringSubmatch(user)[1]
		count, _ := strconv.Atoi(countLine.FindStringSubmatch(user)[1])
		desc := descriptionLine.FindStringSubmatch(user)[1]
		qs := make([]string, count)
		for i := range qs {
			qs[i] = fmt.Sprintf("%s request number %d about %s", tool, i+1, ShortHash(desc))
		}
		openaitest.WriteChat(w, req.Model, openaitest.QueriesJSON(qs...))
	}
	return p
}

var (
	toolNameLine    = regexp.MustCompile(`(?m)^Tool name: (\S+)$`)
	countLine       = regexp.MustCompile(`Write (\d+) distinct user requests`)
	descriptionLine = regexp.MustCompile(`(?m)^Description: (.*)$`)
)

// ShortHash is the digest of a description the queries name.
func ShortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:3])
}

// Vary makes every generator call write new queries, so a forced refresh
// always changes the catalog.
func (p *Provider) Vary() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.vary = true
}

// GenerateQueries implements embedding.QueryGenerator.
func (p *Provider) GenerateQueries(_ context.Context, req embedding.QueryRequest) ([]string, error) {
	tool := req.Tool.Name
	p.mu.Lock()
	p.calls[tool]++
	call, vary := p.calls[tool], p.vary
	status := p.failing[tool]
	if all, ok := p.failing["*"]; ok {
		status = all
	}
	p.mu.Unlock()
	if status != 0 {
		return nil, &embedding.Error{Kind: KindOfStatus(status), Provider: "test generator", Model: ChatModel, StatusCode: status,
			Err: fmt.Errorf("cannot serve %s", tool)}
	}
	qs := make([]string, req.Count)
	for i := range qs {
		qs[i] = fmt.Sprintf("%s request number %d about %s", tool, i+1, ShortHash(req.Tool.Description))
		if vary {
			qs[i] += fmt.Sprintf(" (call %d)", call)
		}
	}
	return qs, nil
}

// KindOfStatus classifies an HTTP status the way the OpenAI client does.
func KindOfStatus(status int) embedding.ErrorKind {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return embedding.KindAuth
	case status == http.StatusTooManyRequests:
		return embedding.KindRateLimited
	case status >= 500:
		return embedding.KindServer
	}
	return embedding.KindBadRequest
}

// Fail makes query generation for a tool ("*" for all) fail as an HTTP
// status would; 0 heals.
func (p *Provider) Fail(tool string, status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if status == 0 {
		delete(p.failing, tool)
		return
	}
	p.failing[tool] = status
}

// ChatCalls counts query generation calls per tool.
func (p *Provider) ChatCalls() map[string]int {
	if p.wire {
		out := map[string]int{}
		for _, req := range p.ChatRequests() {
			if m := toolNameLine.FindStringSubmatch(req.Messages[len(req.Messages)-1].Content); m != nil {
				out[m[1]]++
			}
		}
		return out
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.calls)
}

// EmbeddingCalls counts the embeddings requests and the texts they held.
func (p *Provider) EmbeddingCalls() (requests, texts int) {
	for _, r := range p.EmbeddingRequests() {
		requests++
		texts += len(r.Input)
	}
	return requests, texts
}

// EmbeddedTexts is how many distinct texts were embedded.
func (p *Provider) EmbeddedTexts() int {
	seen := map[string]bool{}
	for _, r := range p.EmbeddingRequests() {
		for _, text := range r.Input {
			seen[text] = true
		}
	}
	return len(seen)
}
