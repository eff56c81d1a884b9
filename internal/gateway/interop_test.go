package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/mcptest"
)

// Third-party MCP software this project did not write, from npm, pinned
// in test/interop/package-lock.json: the official TypeScript SDK client
// and the reference server-everything.

var interop struct {
	once sync.Once
	dir  string
	err  error
}

// interopPackages installs test/interop's pinned packages (npm ci) when
// they are missing or older than the lockfile, and returns the directory.
func interopPackages(t *testing.T) string {
	t.Helper()
	interop.once.Do(func() {
		dir, err := filepath.Abs("../../test/interop")
		if err != nil {
			interop.err = err
			return
		}
		for _, bin := range []string{"node", "npm"} {
			if _, lookPathErr := exec.LookPath(bin); lookPathErr != nil {
				interop.err = fmt.Errorf("%s not found in PATH: install Node.js 18 or newer (make prereqs does: apt-get install nodejs npm)", bin)
				return
			}
		}
		lock, err := os.Stat(filepath.Join(dir, "package-lock.json"))
		if err != nil {
			interop.err = err
			return
		}
		if installed, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err != nil || installed.ModTime().Before(lock.ModTime()) {
			cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				interop.err = fmt.Errorf("npm ci in %s: %v\n%s", dir, err, out)
				return
			}
		}
		interop.dir = dir
	})
	if interop.err != nil {
		t.Fatal(interop.err)
	}
	return interop.dir
}

// tsSession is what test/interop/client.mjs printed.
type tsSession struct {
	Server struct {
		Name, Version string
	}
	ProtocolVersion string
	Results         []json.RawMessage
}

type tsStep map[string]any

func tsList() tsStep { return tsStep{"list": true} }
func tsCall(name string, args map[string]any) tsStep {
	return tsStep{"call": name, "arguments": args}
}

// runTSClient runs the TypeScript SDK client against an MCP endpoint.
func runTSClient(t *testing.T, url, token string, steps ...tsStep) tsSession {
	t.Helper()
	dir := interopPackages(t)
	script, _ := json.Marshal(steps)
	cmd := exec.CommandContext(t.Context(), "node", "client.mjs", url, token, string(script))
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("the TypeScript client failed: %v\n%s", err, exit.Stderr)
		}
		t.Fatal(err)
	}
	var s tsSession
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("the TypeScript client printed %s: %v", out, err)
	}
	for i, step := range steps {
		if i < len(s.Results) {
			t.Logf("TypeScript client %v → %.300s", step, s.Results[i])
		}
	}
	if len(s.Results) != len(steps) {
		t.Fatalf("the TypeScript client ran %d of %d steps: %s", len(s.Results), len(steps), out)
	}
	return s
}

// tsTool is a tool as the TypeScript client listed it.
type tsTool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema"`
}

// tsResult is a tool call's result as the TypeScript client got it.
type tsResult struct {
	Error   string `json:"error"`
	IsError bool   `json:"isError"`
	Content []struct {
		Type, Text, MimeType, Data string
	} `json:"content"`
	StructuredContent map[string]any `json:"structuredContent"`
}

func decodeTS[T any](t *testing.T, raw json.RawMessage) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
	return v
}

func tsToolNames(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	listed := decodeTS[struct{ Tools []tsTool }](t, raw)
	var names []string
	for _, tool := range listed.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// The official TypeScript SDK client lists, searches, describes and calls
// through the gateway, the call proxied to the tool's MCP server.
func TestTypeScriptClientSearchesDescribesAndCalls(t *testing.T) {
	ns := newNamespace(t)
	srv := mcptest.New(t, mcptest.Options{Name: "weather", Version: "2.0.0"})
	srv.Tool("get_weather", "Get the current weather and the forecast for a city.",
		map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
		&mcp.ToolAnnotations{ReadOnlyHint: true})
	create(t,
		sourceFor(ns, "weather", srv.URL, "ts"),
		testCatalog(ns, "ts", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOn}),
		testTool(ns, "ts", "web_search", "Search the web for recent information.", params(`{"type":"object","properties":{"query":{"type":"string"}}}`)),
		testTool(ns, "ts", "send_email", "Send an email message to a recipient.", params(`{"type":"object","properties":{"to":{"type":"string"}}}`)),
	)
	published(t, ns, "ts", 3)

	s := runTSClient(t, fmt.Sprintf("%s/mcp/%s/ts", gatewayURL, ns), aliceToken,
		tsList(),
		tsCall("tool_search", map[string]any{"query": "what is the weather in Oslo tomorrow"}),
		tsCall("tool_describe", map[string]any{"name": "get_weather"}),
		tsCall("tool_call", map[string]any{"name": "get_weather", "arguments": map[string]any{"city": "Oslo"}}),
		tsCall("tool_call", map[string]any{"name": "get_weather", "arguments": map[string]any{"city": 7}}),
	)
	if s.ProtocolVersion == "" || s.Server.Name == "" {
		t.Fatalf("session: %+v", s)
	}
	t.Logf("TypeScript SDK client: server %s %s, protocol %s", s.Server.Name, s.Server.Version, s.ProtocolVersion)
	if names := tsToolNames(t, s.Results[0]); !slices.Equal(names, []string{"tool_call", "tool_describe", "tool_search", "web_search"}) {
		t.Fatalf("tools/list: %v", names)
	}
	texts := func(i int) (string, bool) {
		r := decodeTS[tsResult](t, s.Results[i])
		if r.Error != "" {
			t.Fatalf("step %d: %s", i, r.Error)
		}
		var b strings.Builder
		for _, c := range r.Content {
			b.WriteString(c.Text)
		}
		return b.String(), r.IsError
	}
	if found, isErr := texts(1); isErr || !strings.Contains(found, `"get_weather"`) {
		t.Fatalf("tool_search: %s", found)
	}
	if described, isErr := texts(2); isErr || !strings.Contains(described, `"required":["city"]`) {
		t.Fatalf("tool_describe: %s", described)
	}
	if called, isErr := texts(3); isErr || called != `get_weather {"city":"Oslo"}` {
		t.Fatalf("tool_call: %q (error %v)", called, isErr)
	}
	calls := srv.Calls()
	if refused, isErr := texts(4); !isErr || !strings.Contains(refused, "city") {
		t.Fatalf("tool_call with a number for city: %q (error %v)", refused, isErr)
	}
	if srv.Calls() != calls {
		t.Fatal("arguments that do not match the schema reached the upstream server")
	}
}

// startEverything runs the reference server-everything over Streamable
// HTTP on a free loopback port and returns its MCP endpoint.
func startEverything(t *testing.T) string {
	t.Helper()
	dir := interopPackages(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("node", "node_modules/@modelcontextprotocol/server-everything/dist/index.js", "streamableHttp")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		<-exited
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return "http://" + addr + "/mcp"
		}
		select {
		case <-exited:
			t.Fatalf("server-everything exited: %s", stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("server-everything did not listen on %s within 30s: %s", addr, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A ToolSource imports the reference server-everything; its tools are
// served by the gateway, their output schemas listed, and its structured
// content, text, images and resource links come back from calls, to the
// Go and the TypeScript SDK clients alike.
func TestImportsTheReferenceEverythingServer(t *testing.T) {
	ns := newNamespace(t)
	url := startEverything(t)
	create(t,
		sourceFor(ns, "everything", url, "everything"),
		testCatalog(ns, "everything", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOff}),
	)
	doc := published(t, ns, "everything", 14) // as the pinned version lists them to an importing client
	var imported []string
	for _, tool := range doc.Tools {
		imported = append(imported, tool.Name)
	}
	for _, want := range []string{"echo", "get-sum", "get-structured-content", "get-tiny-image"} {
		if !slices.Contains(imported, want) {
			t.Fatalf("published tools %v lack %s", imported, want)
		}
	}

	cs := connect(t, ns, "everything", aliceToken, "", nil)
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(tools.Tools, func(tool *mcp.Tool) bool { return tool.Name == "get-structured-content" })
	if i < 0 || tools.Tools[i].OutputSchema == nil {
		t.Fatalf("get-structured-content is not listed with its output schema: %+v", tools.Tools)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get-structured-content", Arguments: map[string]any{"location": "Chicago"}})
	if err != nil || res.IsError {
		t.Fatalf("get-structured-content: %v %+v", err, res)
	}
	if sc, _ := res.StructuredContent.(map[string]any); sc["temperature"] == nil {
		t.Fatalf("structured content: %#v", res.StructuredContent)
	}
	// Resource links pass through as they are.
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get-resource-links", Arguments: map[string]any{"count": 2}})
	if err != nil || res.IsError {
		t.Fatalf("get-resource-links: %v %+v", err, res)
	}
	var links []string
	for _, c := range res.Content {
		if l, ok := c.(*mcp.ResourceLink); ok && l.URI != "" && l.Name != "" {
			links = append(links, l.URI)
		}
	}
	if len(links) != 2 {
		t.Fatalf("get-resource-links: resource links %v in %d contents", links, len(res.Content))
	}

	s := runTSClient(t, fmt.Sprintf("%s/mcp/%s/everything", gatewayURL, ns), aliceToken,
		tsList(),
		tsCall("get-structured-content", map[string]any{"location": "New York"}),
		tsCall("get-sum", map[string]any{"a": 2, "b": 3}),
		tsCall("get-tiny-image", nil),
	)
	listed := decodeTS[struct{ Tools []tsTool }](t, s.Results[0])
	if j := slices.IndexFunc(listed.Tools, func(tool tsTool) bool { return tool.Name == "get-structured-content" }); j < 0 || len(listed.Tools[j].OutputSchema) == 0 {
		t.Fatalf("the TypeScript client does not see the output schema: %+v", listed.Tools)
	}
	if r := decodeTS[tsResult](t, s.Results[1]); r.Error != "" || r.IsError || r.StructuredContent["conditions"] == nil {
		t.Fatalf("get-structured-content through the TypeScript client: %s", s.Results[1])
	}
	if r := decodeTS[tsResult](t, s.Results[2]); len(r.Content) == 0 || r.Content[0].Text != "The sum of 2 and 3 is 5." {
		t.Fatalf("get-sum: %s", s.Results[2])
	}
	r := decodeTS[tsResult](t, s.Results[3])
	if !slices.ContainsFunc(r.Content, func(c struct{ Type, Text, MimeType, Data string }) bool {
		return c.Type == "image" && c.MimeType == "image/png" && len(c.Data) > 100
	}) {
		t.Fatalf("get-tiny-image: %.300s", s.Results[3])
	}
}
