package catalog

import (
	"errors"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/toolschema"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// Invalid is why the operator refuses a ToolDefinition's spec: the
// reason and message of its Valid condition, and the field at fault.
type Invalid struct {
	Reason, Message string
	// Field is the field path the reason is about.
	Field string
}

func (e *Invalid) Error() string { return e.Message }

// ValidateSpec judges a ToolDefinition's spec as its Valid condition
// does, the first failing check deciding: its parameters and output
// schemas, icons, texts (the Unicode policy), and the ToolSource it names
// (source, the one of that name, nil when there is none). nil when valid.
// The ToolDefinition reconciler and the offline check share it, so a
// message is the same in both.
func ValidateSpec(td *v1alpha1.ToolDefinition, source *v1alpha1.ToolSource) *Invalid {
	if err := toolschema.ValidateParameters(Parameters(td)); err != nil {
		reason := v1alpha1.ReasonInvalidParametersSchema
		if pe := (*toolschema.Error)(nil); errors.As(err, &pe) && pe.NotObject {
			reason = v1alpha1.ReasonParametersNotObject
		}
		return &Invalid{Reason: reason, Message: err.Error(), Field: "spec.parameters"}
	}
	if err := toolschema.ValidateOutputSchema(OutputSchema(td)); err != nil {
		return &Invalid{Reason: v1alpha1.ReasonInvalidOutputSchema, Message: err.Error(), Field: "spec.outputSchema"}
	}
	if err := contract.CheckIcons(Icons(td)); err != nil {
		return &Invalid{Reason: v1alpha1.ReasonInvalidIcons, Message: err.Error(), Field: "spec.icons"}
	}
	if err := toolschema.CheckTexts(Texts(td)...); err != nil {
		invalid := &Invalid{Reason: v1alpha1.ReasonInvisibleCharacters, Message: err.Error(), Field: "spec"}
		if ie := (*toolschema.InvisibleError)(nil); errors.As(err, &ie) {
			invalid.Field = ie.Field
		}
		return invalid
	}
	if reason, err := SourceReason(td, source); err != nil {
		return &Invalid{Reason: reason, Message: err.Error(), Field: "spec.source.toolSource"}
	}
	return nil
}

// SourceReason is the reason ValidateSource refuses td for, with its
// error: SourceUnconfirmed for a tool the source has not recorded yet,
// ImportEdited for one it created that somebody else edited,
// SourceNotOwned for one it did not create; "" and nil when td is the
// source's own or names none.
func SourceReason(td *v1alpha1.ToolDefinition, ts *v1alpha1.ToolSource) (string, error) {
	switch err := ValidateSource(td, ts); {
	case err == nil:
		return "", nil
	case errors.Is(err, ErrSourceUnconfirmed):
		return v1alpha1.ReasonSourceUnconfirmed, err
	case errors.Is(err, ErrImportEdited):
		return v1alpha1.ReasonImportEdited, err
	default:
		return v1alpha1.ReasonSourceNotOwned, err
	}
}
