package console

import (
	"context"
	"crypto/subtle"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/mcpsource"
)

// approvalsPage lists the changes held for approval, each with a form
// that approves it.
type approvalsPage struct {
	Sources          []pendingSource
	Denied           []denial
	Checked          []string
	Token            string
	Approved, Failed string
}

// pendingSource is a ToolSource with the changes it holds for approval.
type pendingSource struct {
	Namespace, Name, Policy string
	Changes                 []pendingChange
}

type pendingChange struct {
	Tool, Change, SpecHash, Short, Since, Summary, Diff string
}

// approvals lists the changes the ToolSources of the namespaces hold for
// approval, each with its full description and parameter diff.
func (s *Server) approvals(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	data := approvalsPage{Checked: s.Namespaces, Token: s.token, Approved: r.URL.Query().Get("approved"), Failed: r.URL.Query().Get("failed")}
	for _, ns := range s.Namespaces {
		var list v1alpha1.ToolSourceList
		if err := s.Kube.List(ctx, &list, ns, nil); err != nil {
			data.Denied = append(data.Denied, denial{ns, apiMessage(err)})
			continue
		}
		for _, ts := range list.Items {
			if len(ts.Status.PendingChanges) == 0 {
				continue
			}
			src := pendingSource{Namespace: ts.Namespace, Name: ts.Name, Policy: string(ts.Spec.ChangePolicy)}
			for _, p := range ts.Status.PendingChanges {
				c := pendingChange{Tool: p.Tool, Change: strings.ToLower(string(p.Change)), SpecHash: p.SpecHash,
					Short: p.SpecHash[:min(len(p.SpecHash), mcpsource.ShortHash)], Summary: mcpsource.Visible(p.Summary), Diff: mcpsource.Visible(p.Diff)}
				if p.Since != nil {
					c.Since = p.Since.UTC().Format(time.RFC3339)
				}
				src.Changes = append(src.Changes, c)
			}
			data.Sources = append(data.Sources, src)
		}
	}
	render(w, data.node())
}

// approve approves one pending change by the spec hash the reviewer saw,
// as kubectl toolcatalog approve SOURCE TOOL --hash does, with the user's
// rights; the API server's refusal is shown as it said it.
func (s *Server) approve(w http.ResponseWriter, r *http.Request) {
	if !s.sameOrigin(r) || subtle.ConstantTimeCompare([]byte(r.PostFormValue("token")), []byte(s.token)) != 1 {
		http.Error(w, "this form did not come from the console: approve from its approvals page", http.StatusForbidden)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	key := types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	if !slices.Contains(s.Namespaces, key.Namespace) {
		http.Error(w, "the console does not show namespace "+key.Namespace, http.StatusNotFound)
		return
	}
	tool, hash := r.PostFormValue("tool"), r.PostFormValue("hash")
	back := func(param, value string) {
		http.Redirect(w, r, "/approvals?"+url.Values{param: {value}}.Encode(), http.StatusSeeOther)
	}
	ts := &v1alpha1.ToolSource{}
	if err := s.Kube.Get(ctx, key, ts); err != nil {
		back("failed", "Reading ToolSource "+key.String()+": "+apiMessage(err))
		return
	}
	chosen, err := mcpsource.ChoosePending(ts.Status.PendingChanges, []string{tool}, false, hash)
	if err == nil {
		_, err = mcpsource.Approve(ctx, s.Kube, ts, chosen)
	}
	if err != nil {
		back("failed", "Approving "+tool+" of "+key.String()+": "+apiMessage(err))
		return
	}
	back("approved", tool+" of "+key.String()+" at spec hash "+hash[:min(len(hash), mcpsource.ShortHash)])
}

// sameOrigin reports whether a form was posted from the console's own
// pages: a browser names the page's origin on every POST.
func (s *Server) sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	_, port, _ := net.SplitHostPort(s.Addr)
	return origin == "http://"+s.Addr || origin == "http://localhost:"+port
}
