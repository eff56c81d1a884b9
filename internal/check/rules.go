package check

import (
	"fmt"
	"strings"
)

// Severity is how much a finding matters: a check fails on findings at
// or above its --fail-on.
type Severity int

// Severities, least first.
const (
	Info Severity = iota + 1
	Warning
	Error
)

func (s Severity) String() string {
	switch s {
	case Info:
		return "info"
	case Warning:
		return "warning"
	case Error:
		return "error"
	}
	return "off"
}

// ParseSeverity reads error, warning, info or off (0).
func ParseSeverity(s string) (Severity, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "error":
		return Error, nil
	case "warning":
		return Warning, nil
	case "info":
		return Info, nil
	case "off", "none":
		return 0, nil
	}
	return 0, fmt.Errorf("%q is not a severity: use error, warning, info or off", s)
}

// Rule is one thing the check looks for.
type Rule struct {
	// ID is stable: configuration and annotations name rules by it.
	ID string
	// Name says it in words.
	Name     string
	Severity Severity
	// Cluster says the cluster refuses what the rule finds, whatever
	// the check's configuration: such a rule cannot be turned down or
	// silenced.
	Cluster bool
	// Why and Fix are the rule's documentation.
	Why, Fix string
}

// Rule IDs.
const (
	RuleUnreadable     = "TC001"
	RuleUnknownVersion = "TC002"
	RuleSchema         = "TC003"
	RuleInvalidSpec    = "TC004"
	RuleNameConflict   = "TC005"
	RuleUnicode        = "TC006"
	RuleBadIgnore      = "TC007"

	RuleDescriptionMissing = "TC101"
	RuleDescriptionShort   = "TC102"
	RuleDescriptionLong    = "TC103"
	RuleParamUndescribed   = "TC104"
	RuleRequiredUndescr    = "TC105"
	RuleEnumUnexplained    = "TC106"
	RuleSteersTools        = "TC107"
	RuleNamesAlike         = "TC108"
	RuleAlwaysOverBudget   = "TC109"

	RuleConfusable  = "TC201"
	RuleUnfindable  = "TC202"
	RuleSelfRecall  = "TC203"
	RuleChangeCost  = "TC301"
	RuleOtherKinds  = "TC901"
	RuleNoCatalogOf = "TC902"
)

// Rules lists every rule, in ID order.
var Rules = []Rule{
	{ID: RuleUnreadable, Name: "unreadable", Severity: Error, Cluster: true,
		Why: "A file or document that cannot be parsed (invalid YAML, binary data, over the size bound, a symbolic link loop) is not applied, or fails the whole apply.",
		Fix: "Fix the YAML at the line given, or keep the file out of the paths checked."},
	{ID: RuleUnknownVersion, Name: "unknown-version", Severity: Error, Cluster: true,
		Why: "The API server does not serve this kind or version of the toolcatalog.dev group: the apply fails.",
		Fix: "Use an apiVersion the installed CRDs serve (toolcatalog.dev/v1alpha1)."},
	{ID: RuleSchema, Name: "schema", Severity: Error, Cluster: true,
		Why: "The API server refuses the object: its OpenAPI schema, a CEL rule, an unknown field (kubectl's strict field validation) or its metadata. The message is the API server's.",
		Fix: "Change the field named, as the message says."},
	{ID: RuleInvalidSpec, Name: "invalid-spec", Severity: Error, Cluster: true,
		Why: "The operator refuses the spec after it is stored: a ToolDefinition turns Valid=False and no catalog serves it; a ToolCatalog or ToolSource is Stalled. The message is the condition's.",
		Fix: "Change the spec as the message says."},
	{ID: RuleNameConflict, Name: "name-conflict", Severity: Error, Cluster: true,
		Why: "Two ToolDefinitions that one catalog selects share a tool name: the catalog leaves both out.",
		Fix: "Rename one, or change the catalog's selector or the labels so only one is selected."},
	{ID: RuleUnicode, Name: "unicode", Severity: Error, Cluster: true,
		Why: "Invisible or bidirectional control characters in a tool's texts can hide instructions from reviewers that a model still reads; the operator refuses them (Valid=False, InvisibleCharacters).",
		Fix: "Remove the characters named (the message gives where)."},
	{ID: RuleBadIgnore, Name: "bad-ignore", Severity: Warning,
		Why: "A check-ignore annotation must name a rule and give a reason, and cannot silence what the cluster refuses.",
		Fix: "Write toolcatalog.dev/check-ignore: \"TC102: why this is fine\", one rule per line."},

	{ID: RuleDescriptionMissing, Name: "description-missing", Severity: Error,
		Why: "A model chooses tools by their descriptions; a blank description gives it nothing, and search nothing to match.",
		Fix: "Say what the tool does, on what, and when to use it."},
	{ID: RuleDescriptionShort, Name: "description-short", Severity: Warning,
		Why: "A description shorter than descriptionMinLength characters rarely tells a model when to use the tool rather than another.",
		Fix: "Add what the tool acts on, what it returns and when to use it."},
	{ID: RuleDescriptionLong, Name: "description-long", Severity: Warning,
		Why: "A description over descriptionMaxTokens tokens costs every request that sends it, and tool_search cuts it at the catalog's disclosure.descriptionLength.",
		Fix: "Keep the description to what the tool does and when; move reference material to parameter descriptions or docs."},
	{ID: RuleParamUndescribed, Name: "parameter-undescribed", Severity: Info,
		Why: "A parameter without a description leaves the model to guess its meaning and format from its name.",
		Fix: "Give the parameter a description: its meaning, format and an example."},
	{ID: RuleRequiredUndescr, Name: "required-parameter-undescribed", Severity: Warning,
		Why: "A model must fill a required parameter on every call; without a description it guesses.",
		Fix: "Give the required parameter a description: its meaning, format and an example."},
	{ID: RuleEnumUnexplained, Name: "enum-unexplained", Severity: Info,
		Why: "Enum values the parameter's description does not mention leave the model to guess which to choose.",
		Fix: "Say in the parameter's description what each value means."},
	{ID: RuleSteersTools, Name: "steers-tool-choice", Severity: Error,
		Why: "A description that tells the model to call, ignore or prefer other tools, or to disregard its instructions, is tool poisoning: the text reaches every agent that loads the catalog.",
		Fix: "Describe what this tool does; never instruct the model about other tools or its instructions."},
	{ID: RuleNamesAlike, Name: "names-alike", Severity: Warning,
		Why: "Tool names that differ only by case or separators (get_user, getUser, get-user) are confused by models and people, and some clients fold them together.",
		Fix: "Rename one so the names differ in words."},
	{ID: RuleAlwaysOverBudget, Name: "always-include-over-budget", Severity: Warning,
		Why: "alwaysInclude tools are sent on every request and never deferred; when their schemas alone take more than the catalog's disclosure threshold of its context window, disclosure cannot bring a request under budget.",
		Fix: "Mark fewer tools alwaysInclude, shorten their schemas, or raise the catalog's disclosure.threshold or contextWindow."},

	{ID: RuleConfusable, Name: "confusable", Severity: Warning,
		Why: "Two tools whose own queries retrieve each other first, both ways: a search (and a model) cannot tell them apart. The operator's grading reports the same pair in status.quality.",
		Fix: "Make the descriptions say how the tools differ, or merge them."},
	{ID: RuleUnfindable, Name: "unfindable", Severity: Warning,
		Why: "Some of a tool's own example queries do not find it in the top five: agents asking that way will not be offered the tool.",
		Fix: "Use in the description the words the examples use, or make the examples ask for what the tool does."},
	{ID: RuleSelfRecall, Name: "self-recall", Severity: Info,
		Why: "How many of a catalog's tools' own queries find their tool in the top five, with the builtin model: the figure the operator reports as status.quality.selfRecallAt5.",
		Fix: "Nothing to fix; a figure to follow from change to change."},
	{ID: RuleChangeCost, Name: "change-cost", Severity: Info,
		Why: "What a change costs the cluster: the tools whose spec hash changes are re-embedded, and their queries generated again.",
		Fix: "Nothing to fix; a figure to review."},
	{ID: RuleOtherKinds, Name: "other-kinds", Severity: Info,
		Why: "Objects of other kinds in the input are not checked.",
		Fix: "Nothing to fix."},
	{ID: RuleNoCatalogOf, Name: "not-selected", Severity: Info,
		Why: "A ToolDefinition no ToolCatalog of the input selects is checked alone: name conflicts and the grading need its catalog.",
		Fix: "Nothing to fix, unless a catalog should select it."},
}

// RuleByID finds a rule.
func RuleByID(id string) (Rule, bool) {
	for _, r := range Rules {
		if r.ID == id {
			return r, true
		}
	}
	return Rule{}, false
}

// Finding is one thing the check found.
type Finding struct {
	Rule     string   `json:"rule"`
	Severity Severity `json:"-"`
	Message  string   `json:"message"`
	// File, Line and Column say where (1-based; Line 0 when the finding
	// is of a whole file).
	File   string `json:"file,omitempty"`
	Line   int    `json:"line,omitempty"`
	Column int    `json:"column,omitempty"`
	// Object is Kind namespace/name, and Tool the tool's name, when the
	// finding is of one.
	Object string `json:"object,omitempty"`
	Tool   string `json:"tool,omitempty"`
	// Catalog names the ToolCatalog, namespace/name, of a finding of a
	// catalog's tools.
	Catalog string `json:"catalog,omitempty"`
	// Suppressed gives the reason an annotation silenced the finding.
	Suppressed string `json:"suppressed,omitempty"`
}
