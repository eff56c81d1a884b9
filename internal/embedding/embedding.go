// Package embedding turns tool queries into vectors and writes synthetic
// queries for tools, behind two small interfaces: Embedder and
// QueryGenerator. It has no Kubernetes dependency.
//
// Providers: the builtin ones run in-process with no network and no key (the
// default); the OpenAI-compatible ones speak /v1/embeddings and
// /v1/chat/completions to OpenAI, Azure OpenAI, OpenRouter, Ollama, vLLM,
// TEI or LiteLLM, with batching, retries and model rotation.
package embedding

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Embedder turns texts into vectors.
type Embedder interface {
	// Embed returns one vector per text, in input order. It fails as a
	// whole: no partial result is returned with an error.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Model identifies the model that produces the vectors. Vectors of
	// different models are never compared; a change of Model makes stored
	// vectors stale.
	Model() string
	// Dimensions is the vector length: the configured one, or the one
	// observed so far (0 before the first call when not configured).
	Dimensions() int
}

// ToolSpec is what a query generator knows of a tool.
type ToolSpec struct {
	// Name is the function name the model sees.
	Name string
	// Description is the tool's description.
	Description string
	// Parameters is the tool's JSON Schema, possibly empty.
	Parameters json.RawMessage
}

// QueryRequest asks for Count new queries for a tool, distinct from each
// other and from Existing (curated example queries, for instance).
type QueryRequest struct {
	Tool     ToolSpec
	Count    int
	Existing []string
}

// QueryGenerator writes synthetic user queries a tool answers.
type QueryGenerator interface {
	// GenerateQueries returns exactly req.Count non-empty, trimmed queries,
	// distinct from each other and from req.Existing, or an error; never a
	// partial set.
	GenerateQueries(ctx context.Context, req QueryRequest) ([]string, error)
}

// Identified is a provider client that can name what decides its output
// (see OpenAIQueryGenerator.Identity and OpenAIEmbedder.Identity): what
// it produced can be kept and reused for the same request. The builtin
// providers cost nothing to ask again and name nothing.
type Identified interface {
	Identity() string
}

// IdentityOf is v's Identity, or "" when it has none.
func IdentityOf(v any) string {
	if id, ok := v.(Identified); ok {
		return id.Identity()
	}
	return ""
}

// shortDigest is the first 16 hex digits of s's SHA-256.
func shortDigest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}
