package embedding

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"golang.org/x/sync/errgroup"
)

// DefaultConcurrency bounds query generation when a caller names no limit.
const DefaultConcurrency = 3

// QueryResult is the outcome of one QueryRequest.
type QueryResult struct {
	Queries []string
	Err     error
}

// GenerateAll runs the requests with at most concurrency generator calls in
// flight (DefaultConcurrency when concurrency <= 0) and returns one result
// per request, in request order. One request failing does not stop the
// others; a cancelled context fails the requests not yet started.
func GenerateAll(ctx context.Context, gen QueryGenerator, reqs []QueryRequest, concurrency int) []QueryResult {
	if concurrency <= 0 {
		concurrency = DefaultConcurrency
	}
	results := make([]QueryResult, len(reqs))
	var g errgroup.Group
	g.SetLimit(concurrency)
	for i := range reqs {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				results[i].Err = err
				return nil
			}
			results[i].Queries, results[i].Err = gen.GenerateQueries(ctx, reqs[i])
			return nil
		})
	}
	_ = g.Wait()
	return results
}

// normalizeQuery is the form in which two queries count as the same.
func normalizeQuery(q string) string {
	return strings.ToLower(strings.Join(strings.Fields(q), " "))
}

// ParseQueries reads a model's answer strictly: a JSON object
// {"queries": [...]} or a JSON array, optionally in a Markdown code fence,
// holding exactly want non-empty strings that are distinct from each other
// and from existing. Anything else is an error; nothing is returned
// half-parsed.
func ParseQueries(content string, want int, existing []string) ([]string, error) {
	body := strings.TrimSpace(content)
	if strings.HasPrefix(body, "```") {
		body = strings.TrimPrefix(body, "```")
		body = strings.TrimPrefix(body, "json")
		var ok bool
		if body, ok = strings.CutSuffix(strings.TrimSpace(body), "```"); !ok {
			return nil, fmt.Errorf("unterminated code fence")
		}
		body = strings.TrimSpace(body)
	}
	var raw []any
	if strings.HasPrefix(body, "[") {
		if err := json.Unmarshal([]byte(body), &raw); err != nil {
			return nil, fmt.Errorf("answer is not a JSON array of strings: %v", err)
		}
	} else {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(body), &obj); err != nil {
			return nil, fmt.Errorf("answer is not JSON: %v", err)
		}
		list, ok := obj["queries"]
		if !ok {
			return nil, fmt.Errorf(`answer has no "queries" list`)
		}
		if err := json.Unmarshal(list, &raw); err != nil {
			return nil, fmt.Errorf(`"queries" is not a list: %v`, err)
		}
	}
	if len(raw) != want {
		return nil, fmt.Errorf("answer has %d queries, want %d", len(raw), want)
	}
	seen := make(map[string]bool, len(raw)+len(existing))
	for _, q := range existing {
		seen[normalizeQuery(q)] = true
	}
	out := make([]string, 0, len(raw))
	for i, v := range raw {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("query %d is not a string", i+1)
		}
		s = strings.TrimSpace(s)
		if s == "" {
			return nil, fmt.Errorf("query %d is empty", i+1)
		}
		key := normalizeQuery(s)
		if seen[key] {
			return nil, fmt.Errorf("query %d (%q) is a duplicate", i+1, s)
		}
		seen[key] = true
		out = append(out, s)
	}
	return out, nil
}
