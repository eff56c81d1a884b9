// Package v1alpha1 contains the toolcatalog.dev/v1alpha1 API: ToolDefinition,
// one tool an LLM agent can call, and ToolCatalog, a versioned, searchable set
// of tools published to Redis.
// +kubebuilder:object:generate=true
// +groupName=toolcatalog.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "toolcatalog.dev", Version: "v1alpha1"}

	// SchemeBuilder adds the types of this group and version to a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this group and version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
