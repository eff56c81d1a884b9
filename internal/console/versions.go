package console

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/versiondiff"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// versionsPage compares two retained versions.
type versionsPage struct {
	Namespace, Name, Error string
	Versions               []versionDoc
	From, To               int64
	Added, Removed         []string
	Changed                []versiondiff.Change
	Same                   int
}

type versionDoc = *contract.Document

// versions compares two retained versions of a catalog: the tools one
// added, removed or changed, with a description and schema diff.
func (s *Server) versions(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	key := types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	data := versionsPage{Namespace: key.Namespace, Name: key.Name}
	tc := &v1alpha1.ToolCatalog{}
	if err := s.Kube.Get(ctx, key, tc); err != nil {
		w.WriteHeader(statusOf(err))
		data.Error = apiMessage(err)
		render(w, data.node())
		return
	}
	var docs []*contract.Document
	err := s.Redis(ctx, tc, func(c redis.UniversalClient, k contract.Keys) (err error) {
		docs, err = contract.ReadHistory(ctx, c, k)
		return err
	})
	switch {
	case err != nil:
		data.Error = "Reading the retained versions: " + err.Error()
	case len(docs) == 0:
		data.Error = key.Namespace + "/" + key.Name + " has not published a version yet: see its Ready condition."
	default:
		data.Versions = docs
		byVersion := map[int64]*contract.Document{}
		for _, d := range docs {
			byVersion[d.Version] = d
		}
		// Newest first: compare the one before the current with it, or
		// the pinned version, which consumers are served.
		data.To, data.From = docs[0].Version, docs[min(1, len(docs)-1)].Version
		if p := tc.Status.Pin; p != nil && byVersion[p.Version] != nil && p.Version != data.To {
			data.From = p.Version
		}
		if v, err := strconv.ParseInt(r.URL.Query().Get("to"), 10, 64); err == nil && byVersion[v] != nil {
			data.To = v
		}
		if v, err := strconv.ParseInt(r.URL.Query().Get("from"), 10, 64); err == nil && byVersion[v] != nil {
			data.From = v
		}
		d := versiondiff.Compare(byVersion[data.From], byVersion[data.To])
		data.Added, data.Removed, data.Changed, data.Same = d.Added, d.Removed, d.Changed, d.Same
	}
	render(w, data.node())
}
