package tooldefinition

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/reconcile"
	"github.com/toolcatalog/tool-catalog-operator/internal/records"
	"github.com/toolcatalog/tool-catalog-operator/pkg/clip"
)

// A ToolDefinition's status has one writer, its reconciler, under the
// field manager FieldOwner: the spec hash and Valid,
// ChangePending, Stalled and Reconciling from the spec; status.catalogs,
// each selecting catalog's record of the tool, from the Ledger its passes
// and gradings fill; and Embedded, Ready and Confusable, derived here from
// the records. A change costs one write for the spec and one for the
// records it brings, or a single write when the records come first.

// FieldOwner is the field manager of ToolDefinition status.
const FieldOwner = "toolcatalog.dev/tooldefinition-controller"

// setRecords sets status.catalogs to the records of the catalogs that
// select the tool (in the order of their names), as recordFor gives them:
// a catalog it knows nothing of yet keeps the record the tool has, one
// that has no record of the tool has none, and the records of catalogs
// that no longer select it (or are gone) go.
func setRecords(td *v1alpha1.ToolDefinition, catalogs []string, recordFor func(string, *v1alpha1.ToolDefinition, *v1alpha1.CatalogEmbeddingStatus) (*v1alpha1.CatalogEmbeddingStatus, bool)) {
	var recs []v1alpha1.CatalogEmbeddingStatus
	for _, name := range slices.Sorted(slices.Values(catalogs)) {
		have := records.Of(td, name)
		rec, known := recordFor(name, td, have)
		if !known {
			rec = have
		}
		if rec != nil {
			recs = append(recs, *rec)
		}
	}
	td.Status.Catalogs = recs
}

// deriveEmbedded sets Embedded from the records of the catalogs that
// select the tool.
func deriveEmbedded(td *v1alpha1.ToolDefinition, catalogs []string) {
	catalogs = slices.Sorted(slices.Values(catalogs))
	var failed, pending, done []string
	for _, name := range catalogs {
		rec := records.Of(td, name)
		switch {
		case rec == nil:
			pending = append(pending, name+" has not processed it yet")
		case rec.Reason != "":
			failed = append(failed, fmt.Sprintf("%s: %s: %s", name, rec.Reason, rec.Message))
		case rec.SpecHash != td.Status.SpecHash:
			pending = append(pending, fmt.Sprintf("%s still serves an earlier spec (version %d)", name, rec.CatalogVersion))
		default:
			done = append(done, fmt.Sprintf("%s (version %d)", name, rec.CatalogVersion))
		}
	}
	status, reason := metav1.ConditionTrue, v1alpha1.ReasonEmbedded
	message := "embedded in " + strings.Join(done, ", ")
	switch {
	case len(catalogs) == 0:
		status, reason, message = metav1.ConditionFalse, v1alpha1.ReasonNotSelected, "no ToolCatalog in the namespace selects this tool"
	case len(failed) > 0:
		status, reason, message = metav1.ConditionFalse, v1alpha1.ReasonEmbeddingFailed, strings.Join(failed, "; ")
	case len(pending) > 0:
		status, reason, message = metav1.ConditionFalse, v1alpha1.ReasonEmbeddingPending, strings.Join(pending, "; ")
	}
	reconcile.SetCondition(td, v1alpha1.ConditionEmbedded, status, reason, clip.Truncate(message, 1024))
}

// deriveConfusable sets Confusable from the records that name a tool the
// catalog's grading found this one confusable with, and removes it when
// none does.
func deriveConfusable(td *v1alpha1.ToolDefinition) {
	var messages []string
	for _, rec := range td.Status.Catalogs {
		if rec.ConfusableWith != nil {
			messages = append(messages, confusableMessage(rec.Catalog, rec.ConfusableWith))
		}
	}
	if len(messages) == 0 {
		meta.RemoveStatusCondition(&td.Status.Conditions, v1alpha1.ConditionConfusable)
		return
	}
	reconcile.SetCondition(td, v1alpha1.ConditionConfusable, metav1.ConditionTrue, v1alpha1.ReasonConfusableWith, clip.Truncate(strings.Join(messages, "; "), 1024))
}

// confusableMessage is a Confusable condition's message.
func confusableMessage(catalogName string, c *v1alpha1.ConfusableTool) string {
	return fmt.Sprintf("catalog %s: the queries of this tool and of %s retrieve each other (similarity %s); reword one description so a model can tell them apart",
		catalogName, c.Name, c.Similarity)
}
