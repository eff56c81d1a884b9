package console

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"time"

	udiff "github.com/aymanbagabas/go-udiff"
	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// versionsPage compares two retained versions.
type versionsPage struct {
	Namespace, Name, Error string
	Versions               []versionDoc
	From, To               int64
	Added, Removed         []string
	Changed                []toolChange
	Same                   int
}

type versionDoc = *contract.Document

// toolChange is a tool that two versions hold differently.
type toolChange struct {
	Name                    string
	FromDescription, ToDesc string
	// ParametersDiff is a unified diff of the indented parameter schemas,
	// empty when they are the same; Other names the other fields that
	// changed.
	ParametersDiff string
	Other          []string
}

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
		// Newest first: compare the one before the current with it.
		data.To, data.From = docs[0].Version, docs[min(1, len(docs)-1)].Version
		if v, err := strconv.ParseInt(r.URL.Query().Get("to"), 10, 64); err == nil && byVersion[v] != nil {
			data.To = v
		}
		if v, err := strconv.ParseInt(r.URL.Query().Get("from"), 10, 64); err == nil && byVersion[v] != nil {
			data.From = v
		}
		data.Added, data.Removed, data.Changed, data.Same = compare(byVersion[data.From], byVersion[data.To])
	}
	render(w, data.node())
}

// compare lists what changed from one version's tools to another's.
func compare(from, to *contract.Document) (added, removed []string, changed []toolChange, same int) {
	old := map[string]contract.Tool{}
	for _, t := range from.Tools {
		old[t.Name] = t
	}
	seen := map[string]bool{}
	for _, t := range to.Tools {
		seen[t.Name] = true
		o, ok := old[t.Name]
		switch {
		case !ok:
			added = append(added, t.Name)
		case reflect.DeepEqual(o, t):
			same++
		default:
			changed = append(changed, changeOf(o, t))
		}
	}
	for _, t := range from.Tools {
		if !seen[t.Name] {
			removed = append(removed, t.Name)
		}
	}
	return added, removed, changed, same
}

func changeOf(a, b contract.Tool) toolChange {
	c := toolChange{Name: b.Name}
	if a.Description != b.Description {
		c.FromDescription, c.ToDesc = a.Description, b.Description
	}
	if !bytes.Equal(a.Parameters, b.Parameters) {
		c.ParametersDiff = udiff.Unified("parameters", "parameters", indent(a.Parameters), indent(b.Parameters))
	}
	for name, differs := range map[string]bool{
		"toolset":        a.Toolset != b.Toolset,
		"always include": a.AlwaysInclude != b.AlwaysInclude,
		"annotations":    !reflect.DeepEqual(a.Annotations, b.Annotations),
		"output schema":  !bytes.Equal(a.OutputSchema, b.OutputSchema),
		"icons":          !reflect.DeepEqual(a.Icons, b.Icons),
		"source":         !reflect.DeepEqual(a.Source, b.Source),
	} {
		if differs {
			c.Other = append(c.Other, name)
		}
	}
	slices.Sort(c.Other)
	return c
}

func indent(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw) + "\n"
	}
	return b.String() + "\n"
}
