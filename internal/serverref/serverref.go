// Package serverref reads the MCP servers other projects run on the
// cluster, as a ToolSource may name them: a kubernetes-sigs
// mcp-lifecycle-operator MCPServer, a ToolHive MCPServer, MCPRemoteProxy
// or VirtualMCPServer, or a kagent RemoteMCPServer. It reads them as
// unstructured objects, never through those projects' Go modules, and
// every field it reads of each kind is named in one place, Kinds: where
// the kind keeps the server's address and which condition says the server
// is ready. TargetOf follows the URL such an object reports to the
// Service it names, refusing a URL that points anywhere the object does
// not answer for. (A core Service is addressed by its name, not read
// here.)
package serverref

import (
	"fmt"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Kind is one kind of server object: where it keeps the server's address
// and what says the server is ready.
type Kind struct {
	schema.GroupKind
	// Versions are the versions the kind is served at, each read alike
	// but for the condition that says it is ready (Ready).
	Versions []string
	// Project is the project that defines the kind, for messages.
	Project string
	// URL is the field path of the server's whole URL.
	URL []string
	// Ready is the condition type that is True when the server is
	// ready, by version (the version's own when it has one, else "").
	Ready map[string]string
}

// Kinds are the server kinds a ToolSource may name, by group and kind.
var Kinds = []Kind{
	{
		GroupKind: schema.GroupKind{Group: "mcp.x-k8s.io", Kind: "MCPServer"}, Project: "mcp-lifecycle-operator",
		Versions: []string{"v1alpha1", "v1beta1"}, URL: []string{"status", "address", "url"},
		// v1beta1 waits for the MCP handshake (Verified) before it
		// writes the address; v1alpha1 says Ready.
		Ready: map[string]string{"v1alpha1": "Ready", "v1beta1": "Verified"},
	},
	{
		GroupKind: schema.GroupKind{Group: "toolhive.stacklok.dev", Kind: "MCPServer"}, Project: "ToolHive",
		Versions: []string{"v1alpha1", "v1beta1"}, URL: []string{"status", "url"}, Ready: map[string]string{"": "Ready"},
	},
	{
		GroupKind: schema.GroupKind{Group: "toolhive.stacklok.dev", Kind: "MCPRemoteProxy"}, Project: "ToolHive",
		Versions: []string{"v1alpha1", "v1beta1"}, URL: []string{"status", "url"}, Ready: map[string]string{"": "Ready"},
	},
	{
		GroupKind: schema.GroupKind{Group: "toolhive.stacklok.dev", Kind: "VirtualMCPServer"}, Project: "ToolHive",
		Versions: []string{"v1alpha1", "v1beta1"}, URL: []string{"status", "url"}, Ready: map[string]string{"": "Ready"},
	},
	{
		// The user gives the URL; the controller sets Accepted once it
		// connected and listed the tools.
		GroupKind: schema.GroupKind{Group: "kagent.dev", Kind: "RemoteMCPServer"}, Project: "kagent",
		Versions: []string{"v1alpha2", "v1alpha3"}, URL: []string{"spec", "url"}, Ready: map[string]string{"": "Accepted"},
	},
}

// Lookup is the Kind of a group and kind, false when a ToolSource may not
// name it.
func Lookup(gk schema.GroupKind) (Kind, bool) {
	for _, k := range Kinds {
		if k.GroupKind == gk {
			return k, true
		}
	}
	return Kind{}, false
}

// Served reports whether the kind is served at version.
func (k Kind) Served(version string) bool {
	for _, v := range k.Versions {
		if v == version {
			return true
		}
	}
	return false
}

// ReadyCondition is the condition type that says a server of the kind,
// read at version, is ready.
func (k Kind) ReadyCondition(version string) string {
	if c, ok := k.Ready[version]; ok {
		return c
	}
	return k.Ready[""]
}

// Server is what a server object says of its server.
type Server struct {
	// URL is the server's address, "" while it has none.
	URL string
	// Ready says the ready condition is True.
	Ready bool
	// Condition is the ready condition's type, and Status, Reason and
	// Message what the object says of it ("" when it has none); Message
	// is cut to MaxMessage and stripped of control characters.
	Condition, Status, Reason, Message string
}

// MaxMessage bounds the condition message a Server carries: it is the
// other project's text, repeated in the ToolSource's status.
const MaxMessage = 256

// Read reads a server object of a known kind. It fails on an object of
// another kind or version, or whose fields are not of the types the kind
// defines.
func Read(u *unstructured.Unstructured) (Server, error) {
	gvk := u.GroupVersionKind()
	k, ok := Lookup(gvk.GroupKind())
	if !ok {
		return Server{}, fmt.Errorf("%s is not a kind of MCP server a ToolSource may name", gvk.GroupKind())
	}
	if !k.Served(gvk.Version) {
		return Server{}, fmt.Errorf("%s %s is not a version this operator reads (it reads %s)", gvk.GroupKind(), gvk.Version, strings.Join(k.Versions, ", "))
	}
	url, _, err := unstructured.NestedString(u.Object, k.URL...)
	if err != nil {
		return Server{}, fmt.Errorf("%s %s/%s: .%s: %w", k.Kind, u.GetNamespace(), u.GetName(), strings.Join(k.URL, "."), err)
	}
	s := Server{URL: strings.TrimSpace(url), Condition: k.ReadyCondition(gvk.Version)}
	conditions, _, err := unstructured.NestedSlice(u.Object, "status", "conditions")
	if err != nil {
		return Server{}, fmt.Errorf("%s %s/%s: .status.conditions: %w", k.Kind, u.GetNamespace(), u.GetName(), err)
	}
	for _, c := range conditions {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != s.Condition {
			continue
		}
		s.Status, _ = m["status"].(string)
		s.Reason, _ = m["reason"].(string)
		msg, _ := m["message"].(string)
		s.Message = clean(msg)
		// A condition of an older generation says nothing of the spec
		// as it is now.
		gen, found, _ := unstructured.NestedInt64(m, "observedGeneration")
		s.Ready = s.Status == "True" && (!found || gen == u.GetGeneration())
	}
	return s, nil
}

// clean is text cut to MaxMessage runes, each control character a space.
func clean(text string) string {
	var b strings.Builder
	n := 0
	for _, r := range text {
		if n == MaxMessage {
			b.WriteString("…")
			break
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			r = ' '
		}
		b.WriteRune(r)
		n++
	}
	return strings.TrimSpace(b.String())
}

// Waiting says why a server that is not ready is waited for, in the words
// of its own condition.
func (s Server) Waiting(k Kind, namespace, name string) string {
	what := fmt.Sprintf("%s %s %s/%s", k.Project, k.Kind, namespace, name)
	switch {
	case s.Status == "":
		return fmt.Sprintf("%s has no %s condition yet", what, s.Condition)
	case s.Status != "True":
		msg := fmt.Sprintf("%s is not ready: its %s condition is %s", what, s.Condition, s.Status)
		if s.Reason != "" {
			msg += " (" + s.Reason + ")"
		}
		if s.Message != "" {
			msg += ": " + s.Message
		}
		return msg
	case !s.Ready:
		return fmt.Sprintf("%s: its %s condition is of an earlier generation of its spec", what, s.Condition)
	default:
		return fmt.Sprintf("%s is ready but has no address in .%s", what, strings.Join(k.URL, "."))
	}
}
