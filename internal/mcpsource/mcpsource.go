// Package mcpsource reads the tools an MCP server offers, with the official
// MCP Go SDK over Streamable HTTP, and turns them into ToolDefinition specs:
// prefixed names, the input schema as parameters, MCP's annotations and a
// reference to where the tool is served.
package mcpsource

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/egress"
	"github.com/toolcatalog/tool-catalog-operator/internal/telemetry"
	"github.com/toolcatalog/tool-catalog-operator/internal/toolschema"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// ClientName is how the operator introduces itself to MCP servers.
const ClientName = "tool-catalog-operator"

// Config says how to reach an MCP server.
type Config struct {
	// URL is the server's Streamable HTTP endpoint.
	URL string
	// Pinned, when set, are the only addresses dialled for URL, whatever
	// its host resolves to: the Pods a ToolSource's serverRef was followed
	// to (egress.Policy.PinnedClient).
	Pinned []netip.AddrPort
	// Header is sent with every request (an Authorization header holds a
	// bearer token).
	Header http.Header
	// RootCAs verify the server's certificate; the system roots when nil.
	RootCAs *x509.CertPool
	// Egress decides which addresses may be reached; egress.Default() when
	// nil. Redirects are never followed, and Header is sent only to the
	// URL's own host.
	Egress *egress.Policy
	// MaxResponseBytes bounds the answer to one request (a tools/list
	// page, a tool's result); DefaultMaxResponseBytes when zero. Reading
	// past it fails with ErrResponseTooLarge.
	MaxResponseBytes int64
	// MaxResponseValues bounds the JSON values (objects, arrays, and the
	// members and elements after the first of each) of one answer;
	// DefaultMaxResponseValues when zero. What an answer costs once
	// decoded follows its values more than its bytes: 4 MiB of small
	// objects decode to about 100 MiB. Reading past it fails with
	// ErrResponseTooLarge too.
	MaxResponseValues int64
	// Version is the client version announced at initialization.
	Version string
	// OnToolsChanged, when set, is called when the server sends
	// notifications/tools/list_changed.
	OnToolsChanged func()
}

// Server describes a connected server, as it said of itself at
// initialization: each text cut to MaxServerText runes (Instructions to
// MaxInstructions), with what a person would not see escaped (Visible).
type Server struct {
	Name, Version, ProtocolVersion string
	// Instructions are the server's instructions to a client.
	Instructions string
}

// MaxServerText and MaxInstructions bound what a server's initialization
// puts in a ToolSource's status.
const (
	MaxServerText   = 128
	MaxInstructions = 1024
)

// said is a server's text as status may carry it: what a person would
// not see escaped, cut to max runes.
func said(text string, max int) string {
	text = Visible(strings.TrimSpace(text))
	if r := []rune(text); len(r) > max {
		return string(r[:max]) + "…"
	}
	return text
}

// Session is a connection to an MCP server.
type Session struct {
	Server   Server
	cs       *mcp.ClientSession
	status   *lastStatus
	progress *progressRoutes
}

// Oversized counts the answers of the server cut at MaxResponseBytes so
// far: the SDK reports a cut answer only as a request without response,
// so a caller compares the count before and after a failed request.
func (s *Session) Oversized() int64 { return s.status.oversized.Load() }

// DefaultMaxResponseBytes is Config.MaxResponseBytes's default.
const DefaultMaxResponseBytes = 4 << 20

// DefaultMaxResponseValues is Config.MaxResponseValues's default.
const DefaultMaxResponseValues = 100_000

// ErrResponseTooLarge means an answer of the server was larger than
// Config.MaxResponseBytes.
var ErrResponseTooLarge = errors.New("the server's answer is larger than allowed")

// ErrUnauthorized means the server refused the credentials.
var ErrUnauthorized = errors.New("the server refused the credentials (HTTP 401 or 403)")

// IdleConnections is how many connections to the server a session keeps
// open between requests. A session carries the concurrent calls of many
// clients (a gateway's), each an HTTP request of its own: with Go's
// default of two, all but two of them would dial the server again.
const IdleConnections = 64

// Connect initializes a session with the server.
func Connect(ctx context.Context, cfg Config) (*Session, error) {
	policy := cfg.Egress
	if policy == nil {
		policy = egress.Default()
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = IdleConnections
	if cfg.RootCAs != nil {
		transport.TLSClientConfig = &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12}
	}
	var hc *http.Client
	var err error
	if len(cfg.Pinned) > 0 {
		hc, err = policy.PinnedClient(cfg.URL, cfg.Pinned, transport)
	} else {
		hc, err = policy.Client(cfg.URL, transport)
	}
	if err != nil {
		return nil, fmt.Errorf("connecting to MCP server %s: %w", cfg.URL, err)
	}
	target, _ := url.Parse(cfg.URL)
	status := &lastStatus{}
	limit := cfg.MaxResponseBytes
	if limit <= 0 {
		limit = DefaultMaxResponseBytes
	}
	values := cfg.MaxResponseValues
	if values <= 0 {
		values = DefaultMaxResponseValues
	}
	hc.Transport = &headerTransport{base: hc.Transport, host: target.Host, header: cfg.Header, status: status, limit: limit, values: values}
	progress := &progressRoutes{}
	opts := &mcp.ClientOptions{ProgressNotificationHandler: progress.route}
	if cfg.OnToolsChanged != nil {
		opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) { cfg.OnToolsChanged() }
	}
	version := cfg.Version
	if version == "" {
		version = "dev"
	}
	client := mcp.NewClient(&mcp.Implementation{Name: ClientName, Version: version}, opts)
	cctx, cancel := withoutValues(ctx)
	defer cancel()
	cs, err := client.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: cfg.URL, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		if code := status.get(); code == http.StatusUnauthorized || code == http.StatusForbidden {
			return nil, fmt.Errorf("connecting to MCP server %s: %w", cfg.URL, ErrUnauthorized)
		}
		return nil, fmt.Errorf("connecting to MCP server %s: %w", cfg.URL, err)
	}
	s := &Session{cs: cs, status: status, progress: progress}
	if r := cs.InitializeResult(); r != nil {
		s.Server.ProtocolVersion = said(r.ProtocolVersion, MaxServerText)
		s.Server.Instructions = said(r.Instructions, MaxInstructions)
		if r.ServerInfo != nil {
			s.Server.Name, s.Server.Version = said(r.ServerInfo.Name, MaxServerText), said(r.ServerInfo.Version, MaxServerText)
		}
	}

	return s, nil
}

// withoutValues is ctx's deadline and cancellation without its values.
// The SDK's client reads values a server handler's context carries (the
// protocol version of the request being served): a gateway that connects
// upstream while it serves a client must not pass them on.
func withoutValues(ctx context.Context) (context.Context, context.CancelFunc) {
	clean, cancel := context.WithCancel(context.Background())
	if d, ok := ctx.Deadline(); ok {
		clean, cancel = context.WithDeadline(context.Background(), d)
	}
	stop := context.AfterFunc(ctx, cancel)
	return clean, func() { stop(); cancel() }
}

// DefaultMaxTools is the default bound of Session.Tools.
const DefaultMaxTools = 5000

// Bounds of a whole tool list, every page together: 5,000 tools of 2 KiB
// each fit, and what they decode to stays within tens of MiB.
const (
	MaxListBytes  = 16 << 20
	MaxListValues = 400_000
)

// ErrTooManyTools means a server lists more tools than allowed.
var ErrTooManyTools = errors.New("the server lists more tools than allowed")

// ErrListTooLarge means a server's tool list, every page together, is
// larger than MaxListBytes or MaxListValues.
var ErrListTooLarge = fmt.Errorf("the server's tool list is larger than allowed (%d MiB or %d JSON values, all pages together)", MaxListBytes>>20, MaxListValues)

// Tools lists the tools the server offers, following pagination, and
// fails with ErrTooManyTools past maxTools tools (DefaultMaxTools when 0)
// or when pages hold nothing new, and with ErrListTooLarge past
// MaxListBytes or MaxListValues: a server that paginates forever, or
// sends huge tools, is stopped there, not when memory runs out. Callers
// bound the time with ctx.
func (s *Session) Tools(ctx context.Context, maxTools int) ([]*mcp.Tool, error) {
	if maxTools <= 0 {
		maxTools = DefaultMaxTools
	}
	var out []*mcp.Tool
	var cursor string
	read, values := s.status.read.Load(), s.status.values.Load()
	for pages := 0; ; pages++ {
		cut := s.Oversized()
		res, err := s.cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			if s.Oversized() > cut {
				return nil, fmt.Errorf("listing tools: page %d: %w", pages+1, ErrResponseTooLarge)
			}
			return nil, fmt.Errorf("listing tools: %w", err)
		}
		for _, t := range res.Tools {
			compactSchemas(t)
		}
		out = append(out, res.Tools...)
		switch {
		case s.status.read.Load()-read > MaxListBytes || s.status.values.Load()-values > MaxListValues:
			return nil, ErrListTooLarge
		case len(out) > maxTools:
			return nil, fmt.Errorf("%w: more than %d", ErrTooManyTools, maxTools)
		case res.NextCursor == "":
			return out, nil
		case len(res.Tools) == 0:
			return nil, fmt.Errorf("%w: page %d holds no tools but points to another", ErrTooManyTools, pages+1)
		}
		cursor = res.NextCursor
	}
}

// compactSchemas keeps a listed tool's schemas as the JSON they encode
// to, not as the maps the SDK decoded: a list is held whole until it
// ends, and decoded, a schema of small objects takes thirty times its
// bytes. What is imported is the same: importing encodes them again.
func compactSchemas(t *mcp.Tool) {
	for _, schema := range []*any{&t.InputSchema, &t.OutputSchema} {
		if *schema == nil {
			continue
		}
		if raw, err := json.Marshal(*schema); err == nil {
			*schema = json.RawMessage(raw)
		}
	}
}

// CallTool calls a tool of the server with its arguments (a JSON object).
// A tool that fails returns a result with IsError set, not an error; an
// error means the call did not complete.
//
// When ctx carries a progress receiver (WithProgress), the call asks the
// server for progress under a token of its own, unique on the session, and
// the server's notifications for it reach the receiver. Cancelling ctx
// cancels the call on the server (notifications/cancelled).
func (s *Session) CallTool(ctx context.Context, name string, arguments json.RawMessage) (*mcp.CallToolResult, error) {
	params := &mcp.CallToolParams{Name: name, Arguments: arguments}
	if receive, ok := ctx.Value(progressKey{}).(ProgressFunc); ok {
		token := s.progress.add(receive)
		defer s.progress.remove(token)
		params.SetProgressToken(token)
	}
	params.Meta = telemetry.InjectMeta(ctx, params.Meta)
	return s.cs.CallTool(ctx, params)
}

// Close ends the session.
func (s *Session) Close() error { return s.cs.Close() }

// Options select and name the imported tools.
type Options struct {
	// Prefix is put before every tool name.
	Prefix string
	// Include and Exclude are glob patterns (path.Match) on the server's
	// tool names: a tool is imported when it matches an Include pattern
	// (or there are none) and no Exclude pattern.
	Include, Exclude []string
	// ToolSource and URL go into each tool's source reference.
	ToolSource, URL string
}

// Imported is a tool turned into a ToolDefinition spec.
type Imported struct {
	// Upstream is the tool's name on the server.
	Upstream string
	Spec     v1alpha1.ToolDefinitionSpec
}

// Rejected is a tool that cannot be imported, and why.
type Rejected struct {
	Upstream string
	Reason   string
}

var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// reservedNames are the bridge tools of progressive disclosure.
var reservedNames = map[string]bool{"tool_search": true, "tool_describe": true, "tool_call": true}

// maxDescription is spec.description's limit.
const maxDescription = 4096

// Convert selects the tools and turns each into a ToolDefinition spec. A
// tool that cannot be one (a name outside the tool-name pattern once
// prefixed, no description, a schema that is not a JSON Schema object) is
// rejected with the reason; the others are converted. The result is in
// name order.
func Convert(tools []*mcp.Tool, o Options) ([]Imported, []Rejected, error) {
	for _, p := range append(append([]string(nil), o.Include...), o.Exclude...) {
		if _, err := path.Match(p, ""); err != nil {
			return nil, nil, fmt.Errorf("bad pattern %q: %w", p, err)
		}
	}
	var out []Imported
	var rejected []Rejected
	seen := map[string]bool{}
	for _, t := range tools {
		if !selected(t.Name, o.Include, o.Exclude) {
			continue
		}
		spec, reason := specOf(t, o)
		switch {
		case reason != "":
			rejected = append(rejected, Rejected{Upstream: t.Name, Reason: reason})
		case seen[spec.Name]:
			rejected = append(rejected, Rejected{Upstream: t.Name, Reason: fmt.Sprintf("the server lists %s twice", t.Name)})
		default:
			seen[spec.Name] = true
			out = append(out, Imported{Upstream: t.Name, Spec: spec})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Spec.Name < out[j].Spec.Name })
	sort.Slice(rejected, func(i, j int) bool { return rejected[i].Upstream < rejected[j].Upstream })
	return out, rejected, nil
}

func selected(name string, include, exclude []string) bool {
	match := func(patterns []string) bool {
		for _, p := range patterns {
			if ok, _ := path.Match(p, name); ok {
				return true
			}
		}
		return false
	}
	return (len(include) == 0 || match(include)) && !match(exclude)
}

func specOf(t *mcp.Tool, o Options) (v1alpha1.ToolDefinitionSpec, string) {
	name := o.Prefix + t.Name
	switch {
	case !toolName.MatchString(name):
		return v1alpha1.ToolDefinitionSpec{}, fmt.Sprintf("name %q is not a valid tool name: letters, digits, _ and -, at most 64", name)
	case reservedNames[name]:
		return v1alpha1.ToolDefinitionSpec{}, fmt.Sprintf("name %q is reserved for progressive disclosure: set a prefix", name)
	}
	if reason := hiddenText(t); reason != "" {
		return v1alpha1.ToolDefinitionSpec{}, reason
	}
	desc := strings.TrimSpace(t.Description)
	if desc == "" {
		desc = strings.TrimSpace(t.Title)
	}
	if desc == "" {
		return v1alpha1.ToolDefinitionSpec{}, "it has no description: the model would have nothing to choose it by"
	}
	if len(desc) > maxDescription {
		return v1alpha1.ToolDefinitionSpec{}, fmt.Sprintf("its description is %d bytes, more than %d", len(desc), maxDescription)
	}
	spec := v1alpha1.ToolDefinitionSpec{Name: name, Description: desc,
		Source: &v1alpha1.ToolSourceReference{ToolSource: o.ToolSource, MCPURL: o.URL, Tool: t.Name}}
	var reason string
	if spec.Parameters, reason = importSchema(t.InputSchema, "input schema", toolschema.ValidateParameters); reason != "" {
		return v1alpha1.ToolDefinitionSpec{}, reason
	}
	if spec.OutputSchema, reason = importSchema(t.OutputSchema, "output schema", toolschema.ValidateOutputSchema); reason != "" {
		return v1alpha1.ToolDefinitionSpec{}, reason
	}
	spec.Icons = importIcons(t.Icons)
	if a := t.Annotations; a != nil || t.Title != "" {
		spec.Annotations = &v1alpha1.ToolAnnotations{Title: t.Title}
		if a != nil {
			if spec.Annotations.Title == "" {
				spec.Annotations.Title = a.Title
			}
			spec.Annotations.ReadOnlyHint = &a.ReadOnlyHint
			spec.Annotations.IdempotentHint = &a.IdempotentHint
			spec.Annotations.DestructiveHint = a.DestructiveHint
			spec.Annotations.OpenWorldHint = a.OpenWorldHint
		}
	}
	spec.Annotations = NormalAnnotations(spec.Annotations)
	return spec, ""
}

// NormalAnnotations is a tool's annotations without the hints that say
// what MCP assumes when a hint is absent (readOnlyHint and idempotentHint
// false, destructiveHint and openWorldHint true), nil when nothing is
// left: a server that starts writing the defaults out (as SDKs do from one
// version to the next) says nothing new, so no change is held for
// approval and no version made.
func NormalAnnotations(a *v1alpha1.ToolAnnotations) *v1alpha1.ToolAnnotations {
	if a == nil {
		return nil
	}
	out := &v1alpha1.ToolAnnotations{Title: a.Title}
	claim := func(hint *bool, absent bool) *bool {
		if hint == nil || *hint == absent {
			return nil
		}
		v := *hint
		return &v
	}
	out.ReadOnlyHint = claim(a.ReadOnlyHint, false)
	out.IdempotentHint = claim(a.IdempotentHint, false)
	out.DestructiveHint = claim(a.DestructiveHint, true)
	out.OpenWorldHint = claim(a.OpenWorldHint, true)
	if *out == (v1alpha1.ToolAnnotations{}) {
		return nil
	}
	return out
}

// importIcons keeps the icons of a tool that contract.CheckIcon accepts,
// at most contract.MaxIcons; the others are left out, not the tool.
func importIcons(icons []mcp.Icon) []v1alpha1.ToolIcon {
	var in []contract.Icon
	for _, i := range icons {
		in = append(in, contract.Icon{Src: i.Source, MIMEType: i.MIMEType, Sizes: i.Sizes, Theme: string(i.Theme)})
	}
	var out []v1alpha1.ToolIcon
	for _, i := range contract.SafeIcons(in) {
		out = append(out, v1alpha1.ToolIcon{Src: i.Src, MIMEType: i.MIMEType, Sizes: i.Sizes, Theme: i.Theme})
	}
	return out
}

// importSchema encodes and checks one of a tool's schemas, named what in
// the reason it is rejected for; nil when the tool declares none.
func importSchema(schema any, what string, validate func([]byte) error) (*apiextensionsv1.JSON, string) {
	if schema == nil {
		return nil, ""
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		return nil, fmt.Sprintf("its %s cannot be encoded: %v", what, err)
	}
	if err := validate(raw); err != nil {
		return nil, "its " + what + " is rejected: " + err.Error()
	}
	return &apiextensionsv1.JSON{Raw: raw}, ""
}

// Hidden reports the first character of s a person reviewing it would not
// see, or see other than a model reads it (toolschema.Invisible), with
// its byte offset; ok is false when there is none.
func Hidden(s string) (r rune, at int, ok bool) { return toolschema.FindInvisible(s) }

// Visible writes the characters Hidden finds as \u escapes, so what is
// printed is what is there.
func Visible(s string) string {
	if _, _, ok := Hidden(s); !ok {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if toolschema.Invisible(r) {
			fmt.Fprintf(&b, "\\u%04X", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// hiddenText says why a tool whose name, title, description or schema
// holds hidden characters is refused: they can carry instructions a model
// follows and a reviewer never sees.
func hiddenText(t *mcp.Tool) string {
	texts := []toolschema.Text{{Field: "name", Value: t.Name}, {Field: "title", Value: t.Title}, {Field: "description", Value: t.Description}}
	if t.Annotations != nil {
		texts = append(texts, toolschema.Text{Field: "annotations title", Value: t.Annotations.Title})
	}
	for _, s := range []struct {
		what   string
		schema any
	}{{"input schema", t.InputSchema}, {"output schema", t.OutputSchema}} {
		if s.schema != nil {
			raw, _ := json.Marshal(s.schema)
			texts = append(texts, toolschema.SchemaTexts(s.what, raw)...)
		}
	}
	if err := toolschema.CheckTexts(texts...); err != nil {
		var ie *toolschema.InvisibleError
		if errors.As(err, &ie) {
			return fmt.Sprintf("its %s holds the invisible or control character U+%04X (at byte %d), which can hide text from the people who review it", ie.Field, ie.Rune, ie.At)
		}
		return err.Error()
	}
	return ""
}

// headerTransport adds headers to every request for the configured host
// (and to no other) and remembers the last response status, so a refused
// login is told apart from an outage.
type headerTransport struct {
	base   http.RoundTripper
	host   string
	header http.Header
	status *lastStatus
	// limit and values bound each answer to a POST (the standalone GET
	// stream of notifications lives as long as the session).
	limit, values int64
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if strings.EqualFold(r.URL.Host, t.host) {
		for k, vs := range t.header {
			r.Header[k] = append([]string(nil), vs...)
		}
	}
	// The trace of the call this request belongs to goes on (traceparent).
	telemetry.InjectHeader(r.Context(), r.Header)
	resp, err := t.base.RoundTrip(r)
	if err == nil {
		t.status.set(resp.StatusCode)
		if r.Method == http.MethodPost {
			resp.Body = &limitedBody{ReadCloser: resp.Body, left: t.limit, values: t.values, status: t.status}
		}
	}
	return resp, err
}

// limitedBody fails with ErrResponseTooLarge once more than its limit of
// bytes or of JSON values is read; what it reads counts towards its
// session's totals.
type limitedBody struct {
	io.ReadCloser
	left   int64
	values int64
	count  valueCounter
	status *lastStatus
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 || b.count.n > b.values {
		return 0, ErrResponseTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	before := b.count.n
	b.count.scan(p[:n])
	b.status.read.Add(int64(n))
	b.status.values.Add(b.count.n - before)
	if b.left < 0 || b.count.n > b.values {
		b.status.oversized.Add(1)
		return 0, ErrResponseTooLarge
	}
	return n, err
}

// valueCounter counts the JSON values of a stream (of server-sent events
// too) from its structure outside strings: an object or array opening,
// and each comma. A JSON string holds no raw line break, so one ends any
// string a malformed line left open.
type valueCounter struct {
	inString, escaped bool
	n                 int64
}

func (c *valueCounter) scan(p []byte) {
	for _, b := range p {
		switch {
		case c.escaped:
			c.escaped = false
		case c.inString:
			switch b {
			case '\\':
				c.escaped = true
			case '"', '\n':
				c.inString = false
			}
		default:
			switch b {
			case '"':
				c.inString = true
			case '{', '[', ',':
				c.n++
			}
		}
	}
}

type lastStatus struct {
	mu   sync.Mutex
	code int
	// oversized counts the answers cut at the limit; read and values
	// count the bytes and JSON values of every answer.
	oversized, read, values atomic.Int64
}

func (s *lastStatus) set(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.code = code
}

func (s *lastStatus) get() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.code
}

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// ObjectName turns a tool name into a ToolDefinition's metadata.name
// (lower case, "_" as "-"), numbered when two tools map to the same one;
// used records the names given.
func ObjectName(tool string, used map[string]bool) string {
	base := strings.Trim(notDNS.ReplaceAllString(strings.ToLower(strings.ReplaceAll(tool, "_", "-")), "-"), "-")
	if base == "" {
		base = "tool"
	}
	name := base
	for i := 2; used[name]; i++ {
		name = fmt.Sprintf("%s-%d", base, i)
	}
	used[name] = true
	return name
}
