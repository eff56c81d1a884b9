package tooldefinition

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/reconcile"
)

// Embedded follows from the records the selecting catalogs wrote, and
// Ready from Valid and Embedded. A plain table test: no API server.
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
		{"an invalid spec is not Ready, whatever is embedded", false, []v1alpha1.CatalogEmbeddingStatus{record("a", "h1", 7, "")}, []string{"a"},
			metav1.ConditionTrue, v1alpha1.ReasonEmbedded, "embedded in a (version 7)", metav1.ConditionFalse, v1alpha1.ReasonInvalidParametersSchema},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			td := &v1alpha1.ToolDefinition{Status: v1alpha1.ToolDefinitionStatus{SpecHash: "h1", Catalogs: tt.records}}
			if tt.valid {
				reconcile.SetCondition(td, v1alpha1.ConditionValid, metav1.ConditionTrue, v1alpha1.ReasonSpecValid, "tool spec is valid")
			} else {
				reconcile.SetCondition(td, v1alpha1.ConditionValid, metav1.ConditionFalse, v1alpha1.ReasonInvalidParametersSchema, "bad")
			}
			deriveEmbedded(td, tt.catalogs)
			summarizeTool(td, nil)
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

// Confusable follows the records that name a confusable tool, from every
// catalog, and goes when none does.
func TestDeriveConfusable(t *testing.T) {
	td := &v1alpha1.ToolDefinition{}
	td.Status.Catalogs = []v1alpha1.CatalogEmbeddingStatus{
		{Catalog: "a", ConfusableWith: &v1alpha1.ConfusableTool{Name: "send_message", Similarity: "0.91"}},
		{Catalog: "b", ConfusableWith: &v1alpha1.ConfusableTool{Name: "send_mail", Similarity: "0.93"}},
		{Catalog: "c"},
	}
	deriveConfusable(td)
	c := meta.FindStatusCondition(td.Status.Conditions, v1alpha1.ConditionConfusable)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonConfusableWith {
		t.Fatalf("Confusable: %+v", c)
	}
	want := confusableMessage("a", td.Status.Catalogs[0].ConfusableWith) + "; " + confusableMessage("b", td.Status.Catalogs[1].ConfusableWith)
	if c.Message != want {
		t.Fatalf("message %q, want %q", c.Message, want)
	}
	td.Status.Catalogs = td.Status.Catalogs[2:]
	deriveConfusable(td)
	if c := meta.FindStatusCondition(td.Status.Conditions, v1alpha1.ConditionConfusable); c != nil {
		t.Fatalf("Confusable without a record naming a tool: %+v", c)
	}
}

// status.catalogs holds the records of the selecting catalogs, in the
// order of their names: the ledger's where it knows the catalog, the
// tool's own where it does not yet (a catalog with no pass since the
// manager started), none for a catalog whose pass has none, and nothing of
// a catalog that no longer selects the tool.
func TestSetRecords(t *testing.T) {
	td := &v1alpha1.ToolDefinition{}
	td.Status.Catalogs = []v1alpha1.CatalogEmbeddingStatus{
		{Catalog: "gone", SpecHash: "h0"},
		{Catalog: "unknown", SpecHash: "h0"},
		{Catalog: "dropped", SpecHash: "h0"},
		{Catalog: "known", SpecHash: "h0"},
	}
	ledger := map[string]*v1alpha1.CatalogEmbeddingStatus{
		"known": {Catalog: "known", SpecHash: "h1", CatalogVersion: 4},
		"new":   {Catalog: "new", SpecHash: "h1", CatalogVersion: 1},
		// "dropped" is known, without a record of the tool.
		"dropped": nil,
	}
	recordFor := func(name string, _ *v1alpha1.ToolDefinition, _ *v1alpha1.CatalogEmbeddingStatus) (*v1alpha1.CatalogEmbeddingStatus, bool) {
		rec, known := ledger[name]
		return rec, known
	}
	setRecords(td, []string{"unknown", "new", "known", "dropped"}, recordFor)
	want := []v1alpha1.CatalogEmbeddingStatus{
		{Catalog: "known", SpecHash: "h1", CatalogVersion: 4},
		{Catalog: "new", SpecHash: "h1", CatalogVersion: 1},
		{Catalog: "unknown", SpecHash: "h0"},
	}
	if !equality.Semantic.DeepEqual(td.Status.Catalogs, want) {
		t.Fatalf("records %+v, want %+v", td.Status.Catalogs, want)
	}
}
