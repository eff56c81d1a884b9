package console

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/versiondiff"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
)

// toolPage is one tool of a catalog.
type toolPage struct {
	Namespace, Name, Tool, Error, Parameters string
	Entry                                    *contract.Tool
	Metadata                                 *contract.Metadata
	Definition                               string
	Records                                  []recordRow
	Conditions                               []conditionRow
	DefinitionError                          string
	// Learned are the learned requests with how many distinct
	// principals made each.
	Learned []learned
	// MetadataError says why the metadata or the learned requests'
	// principals could not be read.
	MetadataError string
}

type (
	recordRow    = v1alpha1.CatalogEmbeddingStatus
	conditionRow = metav1.Condition
)

// learned is a learned request and how many distinct principals made it
// (0 once it is no longer recorded).
type learned struct {
	Request    string
	Principals int
}

// tool shows one tool of a catalog: its published entry (description,
// parameters, annotations, source), the queries its vector was built from,
// learned requests among them, and its ToolDefinition's embedding records
// and conditions.
func (s *Server) tool(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	key := types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	name := r.PathValue("tool")
	data := toolPage{Namespace: key.Namespace, Name: key.Name, Tool: name}
	tc, pub, perr := s.open(ctx, key)
	switch {
	case tc == nil:
		w.WriteHeader(perr.status)
		data.Error = perr.msg
		render(w, data.node())
		return
	case perr != nil:
		data.Error = perr.msg
	default:
		t, ok := pub.Catalog.Tool(name)
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			data.Error = fmt.Sprintf("Version %d of %s/%s holds no tool %s.", pub.Catalog.Version(), key.Namespace, key.Name, name)
			break
		}
		data.Entry, data.Parameters = &t, versiondiff.Indent(t.Parameters)
		var taught map[string]int
		err := s.Redis(ctx, tc, func(c redis.UniversalClient, k contract.Keys) error {
			meta, err := toolcatalog.ReadMetadata(ctx, c, k, name)
			if err != nil {
				return err
			}
			data.Metadata = meta[name]
			if m := data.Metadata; m != nil && len(m.LearnedQueries) > 0 {
				taught, err = contract.Teachers(ctx, c, k, name, m.LearnedQueries)
			}
			return err
		})
		if err != nil {
			data.MetadataError = "Reading what the tool's vector was built from: " + err.Error()
		}
		if m := data.Metadata; m != nil {
			for _, q := range m.LearnedQueries {
				data.Learned = append(data.Learned, learned{q, taught[q]})
			}
		}
	}
	// The ToolDefinition of that name, with its records and conditions.
	var tds v1alpha1.ToolDefinitionList
	if err := s.Kube.List(ctx, &tds, key.Namespace, nil); err != nil {
		data.DefinitionError = apiMessage(err)
	}
	for _, td := range tds.Items {
		if td.Spec.Name == name {
			data.Definition, data.Records, data.Conditions = td.Name, td.Status.Catalogs, td.Status.Conditions
		}
	}
	render(w, data.node())
}
