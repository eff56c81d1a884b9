package catalog

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
)

// ValidateSource refuses a ToolDefinition that names a ToolSource without
// being one of its own: a ToolSource's credentials reach its server only
// for the tools it imported. A hand-written ToolDefinition names a server
// with spec.source.mcpURL alone, and no credentials go with it.
func ValidateSource(td *v1alpha1.ToolDefinition) error {
	src := td.Spec.Source
	if src == nil || src.ToolSource == "" {
		return nil
	}
	owner := metav1.GetControllerOf(td)
	if owner == nil || owner.Kind != "ToolSource" || owner.Name != src.ToolSource || owner.APIVersion != v1alpha1.GroupVersion.String() {
		return fmt.Errorf("spec.source.toolSource names ToolSource %s, which did not create this ToolDefinition: only a ToolSource's own tools use its connection and credentials; remove spec.source.toolSource and set spec.source.mcpURL for a tool written by hand", src.ToolSource)
	}
	return nil
}
