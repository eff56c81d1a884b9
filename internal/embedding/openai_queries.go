package embedding

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// OpenAIQueryGeneratorConfig configures query generation over an
// OpenAI-compatible /v1/chat/completions endpoint.
type OpenAIQueryGeneratorConfig struct {
	OpenAIConfig
	// Models are tried in order: when one fails after its retries (or is
	// refused), the next is used.
	Models []string
	// Fallback, when set, is a second endpoint tried after every model.
	Fallback *OpenAIFallback
}

// OpenAIFallback is the endpoint of last resort.
type OpenAIFallback struct {
	OpenAIConfig
	Model string
}

// OpenAIQueryGenerator writes synthetic queries with a chat model.
type OpenAIQueryGenerator struct {
	routes []chatRoute
}

var _ QueryGenerator = (*OpenAIQueryGenerator)(nil)

// chatRoute is one (endpoint, model) pair to try.
type chatRoute struct {
	cfg      OpenAIConfig
	model    string
	fallback bool
}

// NewOpenAIQueryGenerator validates the configuration and returns a generator.
func NewOpenAIQueryGenerator(cfg OpenAIQueryGeneratorConfig) (*OpenAIQueryGenerator, error) {
	if len(cfg.Models) == 0 {
		return nil, errors.New("at least one query generation model is required")
	}
	if err := cfg.checkBaseURL(); err != nil {
		return nil, err
	}
	g := &OpenAIQueryGenerator{}
	for _, m := range cfg.Models {
		if m == "" {
			return nil, errors.New("query generation model names must not be empty")
		}
		g.routes = append(g.routes, chatRoute{cfg: cfg.OpenAIConfig, model: m})
	}
	if fb := cfg.Fallback; fb != nil {
		if fb.Model == "" {
			return nil, errors.New("fallback model is required")
		}
		if err := fb.checkBaseURL(); err != nil {
			return nil, fmt.Errorf("fallback: %w", err)
		}
		g.routes = append(g.routes, chatRoute{cfg: fb.OpenAIConfig, model: fb.Model, fallback: true})
	}
	return g, nil
}

func (r chatRoute) label() string {
	if r.fallback {
		return "openai-chat-fallback"
	}
	return "openai-chat"
}

func (r chatRoute) provider() string {
	if r.fallback {
		return "fallback chat at " + r.cfg.baseURL()
	}
	return "openai chat at " + r.cfg.baseURL()
}

// GenerateQueries tries each model in order, then the fallback endpoint. A
// rejected key skips the remaining models of that endpoint. When every
// route fails, the error names each attempt and its cause.
func (g *OpenAIQueryGenerator) GenerateQueries(ctx context.Context, req QueryRequest) ([]string, error) {
	if req.Count <= 0 {
		return nil, nil
	}
	var failures []string
	var last *Error
	authFailed := false
	for _, r := range g.routes {
		if authFailed && !r.fallback {
			continue
		}
		queries, err := r.generate(ctx, req)
		if err == nil {
			return queries, nil
		}
		failures = append(failures, fmt.Sprintf("model %s: %v", r.model, err))
		if !errors.As(err, &last) {
			return nil, err
		}
		if ctx.Err() != nil {
			break
		}
		if last.Kind == KindAuth && !r.fallback {
			authFailed = true
		}
	}
	kind := KindServer
	if last != nil {
		kind = last.Kind
	}
	return nil, &Error{Kind: kind, Provider: "query generation", Err: fmt.Errorf("every model failed for tool %s: %s", req.Tool.Name, strings.Join(failures, "; "))}
}

func (r chatRoute) generate(ctx context.Context, req QueryRequest) ([]string, error) {
	body := chatRequest{
		Model: r.model,
		Messages: []chatMessage{
			{Role: "system", Content: querySystemPrompt},
			{Role: "user", Content: queryUserPrompt(req)},
		},
		Temperature: 0.7,
	}
	var queries []string
	err := r.cfg.call(ctx, r.label(), r.provider(), r.model, func(ctx context.Context) error {
		var resp chatResponse
		if err := r.cfg.post(ctx, "/chat/completions", body, &resp, maxChatResponseBytes); err != nil {
			return err
		}
		if len(resp.Choices) == 0 {
			return &Error{Kind: KindMalformed, Provider: r.provider(), Model: r.model, Err: errors.New("answer has no choices")}
		}
		var err error
		if queries, err = ParseQueries(resp.Choices[0].Message.Content, req.Count, req.Existing); err != nil {
			return &Error{Kind: KindMalformed, Provider: r.provider(), Model: r.model, Err: err}
		}
		return nil
	})
	return queries, err
}

// chatRequest is the body of POST /chat/completions.
type chatRequest struct {
	Model       string        `json:"model"`
	Messages    []chatMessage `json:"messages"`
	Temperature float64       `json:"temperature"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// chatResponse is what is read of a chat completion: the first choice's
// text.
type chatResponse struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
}

// maxChatResponseBytes bounds a chat completion's answer: a few hundred
// short queries, with room to spare.
const maxChatResponseBytes = 4 << 20

const querySystemPrompt = `You write realistic requests that users send to an AI assistant, each of which the assistant can only fulfil by calling one given tool.
Vary wording, length and detail; write as a user would, in the first person or as an instruction; never mention the tool's name or that a tool exists.
Answer with JSON only, in the form {"queries": ["...", "..."]}, with exactly the number of queries asked for, all distinct.`

func queryUserPrompt(req QueryRequest) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Write %d distinct user requests for this tool.\n\nTool name: %s\nDescription: %s\n", req.Count, req.Tool.Name, req.Tool.Description)
	if len(req.Tool.Parameters) > 0 {
		fmt.Fprintf(&b, "Parameters (JSON Schema): %s\n", req.Tool.Parameters)
	}
	if len(req.Existing) > 0 {
		b.WriteString("\nThese requests exist already; do not repeat them:\n")
		for _, q := range req.Existing {
			fmt.Fprintf(&b, "- %s\n", q)
		}
	}
	return b.String()
}

// Identity names what decides the queries the generator writes: each
// endpoint and model it tries, in order, and the prompt. Two generators of
// one identity write queries alike for one request; API keys play no
// part.
func (g *OpenAIQueryGenerator) Identity() string {
	parts := []string{"openai-chat", shortDigest(querySystemPrompt)}
	for _, r := range g.routes {
		parts = append(parts, r.cfg.baseURL()+" "+r.model+" "+r.cfg.keyIdentity())
	}
	return strings.Join(parts, "\n")
}
