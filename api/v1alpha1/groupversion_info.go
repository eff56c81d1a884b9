// Package v1alpha1 contains the toolcatalog.dev/v1alpha1 API: ToolDefinition,
// one tool an LLM agent can call, and ToolCatalog, a versioned, searchable set
// of tools published to Redis.
// +kubebuilder:object:generate=true
// +groupName=toolcatalog.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "toolcatalog.dev", Version: "v1alpha1"}

	// SchemeBuilder adds the types of this group and version to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this group and version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &ToolDefinition{}, &ToolDefinitionList{}, &ToolCatalog{}, &ToolCatalogList{}, &ToolSource{}, &ToolSourceList{},
		&ToolSourceApproval{}, &ToolSourceApprovalList{}, &ToolSourceTemplate{}, &ToolSourceTemplateList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
