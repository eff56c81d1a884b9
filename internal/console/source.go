package console

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	g "maragu.dev/gomponents"
	h "maragu.dev/gomponents/html"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/mcpsource"
)

// sourcePage is a ToolSource's server, as the operator recorded it: what
// the server said of itself (its own words, hidden characters escaped),
// where the source reaches it, its tools and its last sync.
type sourcePage struct {
	Namespace, Name string
	Error           string
	Rows            [][2]string
}

// source shows a ToolSource's server.
func (s *Server) source(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	key := types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	data := sourcePage{Namespace: key.Namespace, Name: key.Name}
	ts := &v1alpha1.ToolSource{}
	if err := s.Kube.Get(ctx, key, ts); err != nil {
		w.WriteHeader(statusOf(err))
		data.Error = apiMessage(err)
		render(w, data.node())
		return
	}
	data.Rows = sourceRows(ts)
	render(w, data.node())
}

// sourceRows are the facts a source page lists, in order.
func sourceRows(ts *v1alpha1.ToolSource) [][2]string {
	var rows [][2]string
	add := func(k, v string) { rows = append(rows, [2]string{k, v}) }
	if ref := ts.Spec.MCP.ServerRef; ref != nil {
		add("Reference", fmt.Sprintf("%s %s (%s)", ref.Kind, ref.Name, ref.APIVersion))
		if ep := ts.Status.Endpoint; ep != nil {
			add("Endpoint", fmt.Sprintf("%s (ready: %t)", ep.URL, ep.Ready))
		}
	} else {
		add("URL", ts.Spec.MCP.URL)
	}
	if sv := ts.Status.Server; sv != nil {
		add("Server", fmt.Sprintf("%s %s (protocol %s)", mcpsource.Visible(sv.Name), mcpsource.Visible(sv.Version), mcpsource.Visible(sv.ProtocolVersion)))
		if sv.Instructions != "" {
			add("Instructions", mcpsource.Visible(sv.Instructions))
		}
	} else {
		add("Server", "not reached yet")
	}
	add("Tools", strconv.Itoa(int(ts.Status.ToolCount)))
	if t := ts.Status.LastSyncTime; t != nil {
		add("Last sync", t.UTC().Format(time.RFC3339))
	}
	if c := meta.FindStatusCondition(ts.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		add("Ready", fmt.Sprintf("%s (%s): %s", c.Status, c.Reason, mcpsource.Visible(c.Message)))
	}
	if n := len(ts.Status.PendingChanges); n > 0 {
		add("Pending changes", strconv.Itoa(n))
	}
	return rows
}

func (p sourcePage) node() g.Node {
	title := "ToolSource " + p.Namespace + "/" + p.Name
	if p.Error != "" {
		return layout(title, h.H1(g.Text(title)), alert(p.Error))
	}
	return layout(title, h.H1(g.Text(title)),
		h.Dl(g.Map(p.Rows, func(r [2]string) g.Node { return g.Group([]g.Node{h.Dt(g.Text(r[0])), h.Dd(g.Text(r[1]))}) })),
		h.P(h.A(h.Href(path("approvals")), g.Text("Changes awaiting approval"))),
	)
}
