// Package mcpdemo is a small MCP server over a folder of Markdown pages
// (the project's docs): search_docs finds the sections that best match
// some words, read_doc returns a page. `make run` serves it on loopback
// so the sample ToolSource has a real server to import from and calls
// have somewhere to go.
package mcpdemo

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Name and Version are the server's implementation info.
const (
	Name    = "docs"
	Version = "1.0.0"
)

// section is a part of a page under one heading.
type section struct {
	page, heading, text string
	words               map[string]int
	length              int
}

// Docs serves the pages of a folder.
type Docs struct {
	pages    map[string]string
	sections []section
}

// Load reads every .md file of dir.
func Load(dir string) (*Docs, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no Markdown pages in %s", dir)
	}
	d := &Docs{pages: map[string]string{}}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		page := strings.TrimSuffix(filepath.Base(f), ".md")
		d.pages[page] = string(raw)
		d.sections = append(d.sections, split(page, string(raw))...)
	}
	return d, nil
}

// split cuts a page at its headings.
func split(page, text string) []section {
	var out []section
	cur := section{page: page, heading: page}
	flush := func() {
		if strings.TrimSpace(cur.text) != "" {
			all := words(cur.heading + " " + cur.text)
			cur.words, cur.length = map[string]int{}, len(all)
			for _, w := range all {
				cur.words[w]++
			}
			out = append(out, cur)
		}
	}
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, "#") {
			flush()
			cur = section{page: page, heading: strings.TrimSpace(strings.TrimLeft(line, "#"))}
			continue
		}
		cur.text += line
	}
	flush()
	return out
}

func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// SearchArgs are search_docs's arguments.
type SearchArgs struct {
	Query string `json:"query" jsonschema:"words to look for, for example: approve an upstream change"`
	Limit int    `json:"limit,omitempty" jsonschema:"how many sections to return, 1 to 10 (default 3)"`
}

// ReadArgs are read_doc's arguments.
type ReadArgs struct {
	Page string `json:"page" jsonschema:"the page's name, as search_docs returns it (for example sources)"`
}

// Search returns the sections that best match the query words, best
// first: BM25 over the sections, so rare words and short sections count
// more.
func (d *Docs) Search(query string, limit int) string {
	if limit <= 0 {
		limit = 3
	}
	limit = min(limit, 10)
	q := slices.Compact(slices.Sorted(slices.Values(words(query))))
	df := map[string]int{}
	total := 0
	for _, s := range d.sections {
		for _, w := range q {
			if s.words[w] > 0 {
				df[w]++
			}
		}
		total += s.length
	}
	n := float64(len(d.sections))
	avg := float64(total) / n
	type hit struct {
		s     *section
		score float64
	}
	var hits []hit
	for i := range d.sections {
		s := &d.sections[i]
		score := 0.0
		for _, w := range q {
			if tf := float64(s.words[w]); tf > 0 {
				idf := math.Log(1 + (n-float64(df[w])+0.5)/(float64(df[w])+0.5))
				score += idf * tf * 2.2 / (tf + 1.2*(0.25+0.75*float64(s.length)/avg))
			}
		}
		if score > 0 {
			hits = append(hits, hit{s, score})
		}
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].score > hits[j].score })
	if len(hits) == 0 {
		return "no section matches " + query
	}
	var b strings.Builder
	for _, h := range hits[:min(limit, len(hits))] {
		text := strings.TrimSpace(h.s.text)
		if r := []rune(text); len(r) > 600 {
			text = string(r[:600]) + "…"
		}
		fmt.Fprintf(&b, "## %s — %s\n%s\n\n", h.s.page, h.s.heading, text)
	}
	return strings.TrimSpace(b.String())
}

// Server is the MCP server with search_docs and read_doc.
func (d *Docs) Server() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: Name, Version: Version}, nil)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "search_docs",
		Description: "Search the tool-catalog-operator documentation for words and return the best matching sections, each with its page and heading.",
		Annotations: &mcp.ToolAnnotations{Title: "Search the docs", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(false)},
	}, func(_ context.Context, _ *mcp.CallToolRequest, a SearchArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: d.Search(a.Query, a.Limit)}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        "read_doc",
		Description: "Read a whole page of the tool-catalog-operator documentation by its name.",
		Annotations: &mcp.ToolAnnotations{Title: "Read a docs page", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(false)},
	}, func(_ context.Context, _ *mcp.CallToolRequest, a ReadArgs) (*mcp.CallToolResult, any, error) {
		text, ok := d.pages[strings.TrimSuffix(a.Page, ".md")]
		if !ok {
			names := slices.Sorted(maps.Keys(d.pages))
			return nil, nil, fmt.Errorf("no page %q; the pages are %s", a.Page, strings.Join(names, ", "))
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
	})
	return s
}

// Handler serves the server over Streamable HTTP.
func (d *Docs) Handler() http.Handler {
	s := d.Server()
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
}
