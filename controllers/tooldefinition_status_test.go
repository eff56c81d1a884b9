package controllers

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
)

// Embedded and Ready follow from the records the selecting catalogs
// wrote. A plain table test: no API server.
func TestDeriveEmbedded(t *testing.T) {
	record := func(catalog, hash string, version int64, reason string) v1alpha1.CatalogEmbeddingStatus {
		return v1alpha1.CatalogEmbeddingStatus{Catalog: catalog, SpecHash: hash, CatalogVersion: version, Reason: reason, Message: "the provider refused"}
	}
	tests := []struct {
		name       string
		valid      bool
		records    []v1alpha1.CatalogEmbeddingStatus
		catalogs   []string
		embedded   metav1.ConditionStatus
		reason     string
		message    string
		ready      metav1.ConditionStatus
		readyCause string
	}{
		{"not selected", true, nil, nil, metav1.ConditionFalse, v1alpha1.ReasonNotSelected, "no ToolCatalog in the namespace selects this tool",
			metav1.ConditionTrue, v1alpha1.ReasonSpecValid},
		{"embedded in both", true, []v1alpha1.CatalogEmbeddingStatus{record("b", "h1", 3, ""), record("a", "h1", 7, "")}, []string{"b", "a"},
			metav1.ConditionTrue, v1alpha1.ReasonEmbedded, "embedded in a (version 7), b (version 3)", metav1.ConditionTrue, v1alpha1.ReasonEmbedded},
		{"one not yet", true, []v1alpha1.CatalogEmbeddingStatus{record("a", "h1", 7, "")}, []string{"a", "b"},
			metav1.ConditionFalse, v1alpha1.ReasonEmbeddingPending, "b has not processed it yet", metav1.ConditionFalse, v1alpha1.ReasonEmbeddingPending},
		{"an earlier spec", true, []v1alpha1.CatalogEmbeddingStatus{record("a", "h0", 6, "")}, []string{"a"},
			metav1.ConditionFalse, v1alpha1.ReasonEmbeddingPending, "a still serves an earlier spec (version 6)", metav1.ConditionFalse, v1alpha1.ReasonEmbeddingPending},
		{"failure wins over pending", true, []v1alpha1.CatalogEmbeddingStatus{record("a", "h1", 7, "ProviderAuthFailed")}, []string{"a", "b"},
			metav1.ConditionFalse, v1alpha1.ReasonEmbeddingFailed, "a: ProviderAuthFailed: the provider refused", metav1.ConditionFalse, v1alpha1.ReasonEmbeddingFailed},
		{"an invalid spec keeps its Ready", false, []v1alpha1.CatalogEmbeddingStatus{record("a", "h1", 7, "")}, []string{"a"},
			metav1.ConditionTrue, v1alpha1.ReasonEmbedded, "embedded in a (version 7)", metav1.ConditionFalse, v1alpha1.ReasonInvalidParametersSchema},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			td := &v1alpha1.ToolDefinition{Status: v1alpha1.ToolDefinitionStatus{SpecHash: "h1", Catalogs: tt.records}}
			if tt.valid {
				setCondition(td, v1alpha1.ConditionValid, metav1.ConditionTrue, v1alpha1.ReasonSpecValid, "tool spec is valid")
			} else {
				setCondition(td, v1alpha1.ConditionValid, metav1.ConditionFalse, v1alpha1.ReasonInvalidParametersSchema, "bad")
				setCondition(td, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonInvalidParametersSchema, "bad")
			}
			deriveEmbedded(td, tt.catalogs)
			e := meta.FindStatusCondition(td.Status.Conditions, v1alpha1.ConditionEmbedded)
			r := meta.FindStatusCondition(td.Status.Conditions, v1alpha1.ConditionReady)
			if e == nil || e.Status != tt.embedded || e.Reason != tt.reason || e.Message != tt.message {
				t.Errorf("Embedded %+v, want %s %s %q", e, tt.embedded, tt.reason, tt.message)
			}
			if r == nil || r.Status != tt.ready || r.Reason != tt.readyCause {
				t.Errorf("Ready %+v, want %s %s", r, tt.ready, tt.readyCause)
			}
		})
	}
}
