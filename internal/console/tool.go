package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
)

// tool shows one tool of a catalog: its published entry (description,
// parameters, annotations, source), the queries its vector was built from,
// learned requests among them, and its ToolDefinition's embedding records
// and conditions.
func (s *Server) tool(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	key := client.ObjectKey{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	name := r.PathValue("tool")
	data := struct {
		Namespace, Name, Tool, Error, Parameters string
		Entry                                    *contract.Tool
		Metadata                                 *contract.Metadata
		Definition                               string
		Records                                  []v1alpha1.CatalogEmbeddingStatus
		Conditions                               []metav1.Condition
		DefinitionError                          string
	}{Namespace: key.Namespace, Name: key.Name, Tool: name}
	tc := &v1alpha1.ToolCatalog{}
	if err := s.Kube.Get(ctx, key, tc); err != nil {
		w.WriteHeader(statusOf(err))
		data.Error = apiMessage(err)
		render(w, "tool.html", data)
		return
	}
	pub, err := s.Load(ctx, tc)
	switch {
	case errors.Is(err, toolcatalog.ErrNotPublished):
		data.Error = fmt.Sprintf("%s/%s has not published a version yet: see its Ready condition.", key.Namespace, key.Name)
	case err != nil:
		data.Error = "Reading the published catalog: " + err.Error()
	default:
		t, ok := pub.Catalog.Tool(name)
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			data.Error = fmt.Sprintf("Version %d of %s/%s holds no tool %s.", pub.Catalog.Version(), key.Namespace, key.Name, name)
			break
		}
		data.Entry, data.Metadata, data.Parameters = &t, pub.Catalog.Metadata[name], indent(t.Parameters)
	}
	// The ToolDefinition of that name, with its records and conditions.
	var tds v1alpha1.ToolDefinitionList
	if err := s.Kube.List(ctx, &tds, client.InNamespace(key.Namespace)); err != nil {
		data.DefinitionError = apiMessage(err)
	}
	for _, td := range tds.Items {
		if td.Spec.Name == name {
			data.Definition, data.Records, data.Conditions = td.Name, td.Status.Catalogs, td.Status.Conditions
		}
	}
	render(w, "tool.html", data)
}
