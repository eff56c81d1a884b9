package controllers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/mcptest"
)

// kstatusOf is what kstatus (Flux's health checks, kubectl and the other
// users of cli-utils) says of an object, computed with
// sigs.k8s.io/cli-utils as they compute it. The Argo CD health script of
// docs/gitops.md must say the same.
func kstatusOf(g Gomega, obj client.Object) *status.Result {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	g.Expect(err).NotTo(HaveOccurred())
	res, err := status.Compute(&unstructured.Unstructured{Object: m})
	g.Expect(err).NotTo(HaveOccurred())
	health, message := argoHealth(g, obj)
	g.Expect(health).To(Equal(argoStatus[res.Status]), "Argo CD health of %s: %s (kstatus: %s, %s)", obj.GetName(), message, res.Status, res.Message)
	return res
}

// An object that waits for its user to change something is Failed to
// kstatus, with the message that says what to change; fixed, it is
// Current. Each kind: a catalog and a source whose Secret did not opt in,
// a tool whose spec is invalid.
func TestKstatusTellsStalledFromCurrent(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	_, tc := keyedCatalog(t, ns)
	srv := mcptest.New(t, mcptest.Options{})
	srv.Tool("lookup", "Look up an order.", nil, nil)
	ts := toolSource(ns, "collector", srv.URL)
	ts.Spec.MCP.BearerTokenSecretRef = &v1alpha1.SecretKeySelector{Name: "token", Key: "token"}
	bad := testTool(ns, "bad", "bad_tool", "A tool whose parameters are not an object.", "tools")
	bad.Spec.Parameters = rawJSON(`{"type":"string"}`)
	createAll(g, unlabelled(secret(ns, "openai", map[string]string{"apiKey": "sk-good"})), unlabelled(secret(ns, "token", map[string]string{"token": "t"})),
		tc, ts, bad, testTool(ns, "weather", "get_weather", "Get the weather.", "tools"))

	g.Eventually(func(g Gomega) {
		for _, obj := range []client.Object{getTC(g, ns, "tools"), getTS(g, ns, "collector")} {
			res := kstatusOf(g, obj)
			g.Expect(res.Status).To(Equal(status.FailedStatus), "%s: %s", obj.GetName(), res.Message)
			g.Expect(res.Message).To(ContainSubstring(notOptedIn))
		}
		res := kstatusOf(g, getTD(g, ns, "bad"))
		g.Expect(res.Status).To(Equal(status.FailedStatus), res.Message)
		g.Expect(res.Message).To(ContainSubstring("object"))
	}).Should(Succeed())

	optIn(g, ns, "openai")
	optIn(g, ns, "token")
	editTD(g, ns, "bad", func(td *v1alpha1.ToolDefinition) { td.Spec.Parameters = rawJSON(`{"type":"object"}`) })
	g.Eventually(func(g Gomega) {
		for _, obj := range []client.Object{getTC(g, ns, "tools"), getTS(g, ns, "collector"), getTD(g, ns, "bad"), getTD(g, ns, "weather")} {
			res := kstatusOf(g, obj)
			g.Expect(res.Status).To(Equal(status.CurrentStatus), "%s: %s", obj.GetName(), res.Message)
		}
	}).Should(Succeed())
}

// argoHealth runs the Argo CD health script of docs/gitops.md on obj, as
// Argo CD runs it (gopher-lua, obj a global), and returns its status.
func argoHealth(g Gomega, obj client.Object) (status, message string) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "gitops.md"))
	g.Expect(err).NotTo(HaveOccurred())
	_, script, ok := strings.Cut(string(doc), "-- toolcatalog health: begin\n")
	g.Expect(ok).To(BeTrue(), "docs/gitops.md holds no health script")
	script, _, ok = strings.Cut(script, "-- toolcatalog health: end")
	g.Expect(ok).To(BeTrue())
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	g.Expect(err).NotTo(HaveOccurred())
	L := lua.NewState()
	defer L.Close()
	L.SetGlobal("obj", toLua(L, m))
	g.Expect(L.DoString(script)).To(Succeed())
	hs, ok := L.Get(-1).(*lua.LTable)
	g.Expect(ok).To(BeTrue(), "the script returned no table")
	return hs.RawGetString("status").String(), hs.RawGetString("message").String()
}

// toLua is a JSON-like value as a Lua value.
func toLua(L *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := L.NewTable()
		for k, x := range v {
			t.RawSetString(k, toLua(L, x))
		}
		return t
	case []any:
		t := L.NewTable()
		for _, x := range v {
			t.Append(toLua(L, x))
		}
		return t
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	}
	return lua.LNil
}

// argoStatus is the Argo CD health status that stands for a kstatus one.
var argoStatus = map[status.Status]string{status.CurrentStatus: "Healthy", status.InProgressStatus: "Progressing", status.FailedStatus: "Degraded"}
