package catalog

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/internal/toolschema"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// Tool is a selected, valid ToolDefinition as a pass sees it.
type Tool struct {
	// Object is the ToolDefinition's metadata.name.
	Object string
	// Entry is the tool as the catalog document publishes it, with its
	// spec hash.
	Entry contract.Tool
	// Principals are spec.permissions.allowedPrincipals: nil means
	// everyone, empty means nobody.
	Principals []string
	// Examples are the curated spec.exampleQueries.
	Examples []string
}

// Failure says why a ToolDefinition is not (fully) in the catalog.
type Failure struct {
	// Object is the ToolDefinition's name, Tool its spec.name.
	Object, Tool string
	// Reason is a condition reason; Message says what to fix.
	Reason, Message string
	// Kind classifies provider failures, to tell auth from transient.
	Kind embedding.ErrorKind
}

// Rejected reports whether the ToolDefinition itself is at fault (invalid
// or in conflict) rather than its refresh.
func (f Failure) Rejected() bool {
	return f.Reason == v1alpha1.ReasonInvalidSpec || f.Reason == v1alpha1.ReasonNameConflict
}

// Selection is what a catalog's selector picked: the valid tools, sorted
// by name with unique names, and the ToolDefinitions left out.
type Selection struct {
	// Tools point into the Selector's memory: read-only. They are in
	// order of name.
	Tools    []*Tool
	Rejected []Failure
}

// Parameters returns a ToolDefinition's parameters as JSON, nil when unset.
func Parameters(td *v1alpha1.ToolDefinition) []byte { return raw(td.Spec.Parameters) }

// OutputSchema returns a ToolDefinition's output schema as JSON, nil when
// unset.
func OutputSchema(td *v1alpha1.ToolDefinition) []byte { return raw(td.Spec.OutputSchema) }

func raw(j *apiextensionsv1.JSON) []byte {
	if j == nil {
		return nil
	}
	return j.Raw
}

// Icons returns a ToolDefinition's icons as the contract publishes them.
func Icons(td *v1alpha1.ToolDefinition) []contract.Icon {
	var icons []contract.Icon
	for _, i := range td.Spec.Icons {
		icons = append(icons, contract.Icon{Src: i.Src, MIMEType: i.MIMEType, Sizes: i.Sizes, Theme: i.Theme})
	}
	return icons
}

// validSpec checks a ToolDefinition's parameters, then its output schema,
// then its icons, then that no text a model reads hides characters.
func validSpec(td *v1alpha1.ToolDefinition) error {
	if err := toolschema.ValidateParameters(Parameters(td)); err != nil {
		return err
	}
	if err := toolschema.ValidateOutputSchema(OutputSchema(td)); err != nil {
		return err
	}
	if err := contract.CheckIcons(Icons(td)); err != nil {
		return err
	}
	return toolschema.CheckTexts(Texts(td)...)
}

// Texts are the texts of a ToolDefinition a model reads: its
// description, title and every string of its schemas.
func Texts(td *v1alpha1.ToolDefinition) []toolschema.Text {
	texts := []toolschema.Text{{Field: "spec.description", Value: td.Spec.Description}}
	if a := td.Spec.Annotations; a != nil {
		texts = append(texts, toolschema.Text{Field: "spec.annotations.title", Value: a.Title})
	}
	texts = append(texts, toolschema.SchemaTexts("spec.parameters", Parameters(td))...)
	return append(texts, toolschema.SchemaTexts("spec.outputSchema", OutputSchema(td))...)
}

// Select keeps the valid ToolDefinitions (a parameters schema that does
// not compile, or a ToolSource named by a ToolDefinition it did not
// create, is rejected) and rejects every ToolDefinition of a tool name
// that more than one of them uses. Those being deleted are left out.
// sources finds the ToolSources the ToolDefinitions name.
func Select(tds []v1alpha1.ToolDefinition, sources Sources) (Selection, error) {
	ptrs := make([]*v1alpha1.ToolDefinition, len(tds))
	for i := range tds {
		ptrs[i] = &tds[i]
	}
	return (&Selector{}).Select(ptrs, sources)
}

// Selector is Select with a memory: each ToolDefinition's validation and
// entry are kept by UID and generation, so a pass over a catalog where few
// tools changed does not validate, hash and normalise every tool again.
// It is safe for concurrent use.
type Selector struct {
	mu   sync.Mutex
	memo map[types.UID]*selected
	// pass counts the calls; an entry not seen by the latest is dropped.
	pass uint64
	// order is the names the latest call selected, in order.
	order []string
}

// selected is what one generation of a ToolDefinition selects to.
type selected struct {
	generation int64
	invalid    error
	tool       Tool
	// seen is the last pass that saw the ToolDefinition.
	seen uint64
}

// Select is the package's Select, remembering what it derived. Entries
// are kept by pointer, and the selection points to them: at 50,000
// tools, copying and swapping whole entries was most of a pass's
// selection, and a copy per pass and per plan 20 MB. A generation's
// entry is never changed once made, so a pass may keep the pointers.
func (s *Selector) Select(tds []*v1alpha1.ToolDefinition, sources Sources) (Selection, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.memo == nil {
		s.memo = make(map[types.UID]*selected, len(tds))
	}
	s.pass++
	type candidate struct {
		td  *v1alpha1.ToolDefinition
		got *selected
	}
	// What each ToolDefinition selected to before is looked up on every
	// core: at 50,000 tools each look-up misses the CPU's caches. A new
	// generation is validated in order below, one at a time, so a bulk
	// apply's garbage comes no faster than the collector was paced for.
	type found struct {
		got     *selected
		invalid error
		deleted bool
	}
	finds := make([]found, len(tds))
	parallel(len(tds), func(i int) {
		td := tds[i]
		if !td.DeletionTimestamp.IsZero() {
			finds[i].deleted = true
			return
		}
		got := s.memo[td.UID]
		if got == nil || td.UID == "" || got.generation != td.Generation || got.tool.Object != td.Name {
			return
		}
		finds[i] = found{got: got, invalid: got.invalidFor(td, sources)}
	})
	var sel Selection
	valid := make([]candidate, 0, len(tds))
	first := make(map[string]int, len(tds)) // tool name → its first candidate
	var conflicts map[string][]*v1alpha1.ToolDefinition
	seen := 0 // memo entries seen by this pass
	for i, td := range tds {
		f := finds[i]
		if f.deleted {
			continue
		}
		if f.got == nil {
			f.got = &selected{generation: td.Generation, invalid: validSpec(td)}
			if f.got.invalid == nil {
				t, err := toolOf(td)
				if err != nil {
					return Selection{}, err
				}
				f.got.tool = t
			}
			f.got.tool.Object = td.Name
			s.memo[td.UID] = f.got
			f.invalid = f.got.invalidFor(td, sources)
		}
		got := f.got
		if got.seen != s.pass && td.UID != "" {
			seen++
		}
		got.seen = s.pass
		if f.invalid != nil {
			sel.Rejected = append(sel.Rejected, Failure{Object: td.Name, Tool: td.Spec.Name, Reason: v1alpha1.ReasonInvalidSpec, Message: f.invalid.Error()})
			continue
		}
		name := td.Spec.Name
		if j, dup := first[name]; dup {
			if conflicts == nil {
				conflicts = map[string][]*v1alpha1.ToolDefinition{}
			}
			if conflicts[name] == nil {
				conflicts[name] = []*v1alpha1.ToolDefinition{valid[j].td}
			}
			conflicts[name] = append(conflicts[name], td)
			continue
		}
		first[name] = len(valid)
		valid = append(valid, candidate{td, got})
	}
	// Every entry was seen when as many UIDs were seen as entries are
	// kept: the sweep, a walk of the whole memo, is then skipped.
	if seen < len(s.memo) {
		for uid, got := range s.memo {
			if got.seen != s.pass {
				delete(s.memo, uid)
			}
		}
	}
	for name, group := range conflicts {
		names := make([]string, len(group))
		for i, td := range group {
			names[i] = td.Name
		}
		sort.Strings(names)
		for _, td := range group {
			sel.Rejected = append(sel.Rejected, Failure{Object: td.Name, Tool: name, Reason: v1alpha1.ReasonNameConflict,
				Message: fmt.Sprintf("tool name %q is used by ToolDefinitions %s: rename or unselect all but one", name, strings.Join(names, ", "))})
		}
	}
	// The same names as the last call's, as after an edit, are taken in
	// its order: sorting 50,000 candidates is most of a selection.
	sorted := len(valid) == len(s.order)
	if sorted {
		byName := make([]candidate, len(valid))
		for i, name := range s.order {
			j, ok := first[name]
			if !ok {
				sorted = false
				break
			}
			byName[i] = valid[j]
		}
		if sorted {
			valid = byName
		}
	}
	if !sorted {
		slices.SortFunc(valid, func(a, b candidate) int { return strings.Compare(a.td.Spec.Name, b.td.Spec.Name) })
	}
	s.order = s.order[:0]
	for _, c := range valid {
		s.order = append(s.order, c.td.Spec.Name)
	}
	sel.Tools = make([]*Tool, 0, len(valid))
	for _, c := range valid {
		if conflicts[c.td.Spec.Name] == nil {
			sel.Tools = append(sel.Tools, &c.got.tool)
		}
	}
	sort.Slice(sel.Rejected, func(i, j int) bool { return sel.Rejected[i].Object < sel.Rejected[j].Object })
	return sel, nil
}

// invalidFor says why td, of this generation, is rejected, nil when it is
// not. Owners are metadata, and a source's record its status, which move
// no generation: they are checked on every pass.
func (got *selected) invalidFor(td *v1alpha1.ToolDefinition, sources Sources) error {
	if got.invalid != nil {
		return got.invalid
	}
	if src := td.Spec.Source; src != nil && src.ToolSource != "" {
		var source *v1alpha1.ToolSource
		if sources != nil {
			source = sources(src.ToolSource)
		}
		return ValidateSource(td, source)
	}
	return nil
}

func toolOf(td *v1alpha1.ToolDefinition) (Tool, error) {
	params := Parameters(td)
	hash, err := SpecHash(td.Spec.Name, td.Spec.Description, params)
	if err != nil {
		return Tool{}, fmt.Errorf("hashing ToolDefinition %s: %w", td.Name, err)
	}
	entry, err := contract.NormalizeTool(contract.Tool{
		Name: td.Spec.Name, Description: td.Spec.Description, Parameters: params, Toolset: td.Spec.Toolset,
		AlwaysInclude: td.Spec.AlwaysInclude, AllowRepeat: td.Spec.AllowRepeat, NoBackground: td.Spec.NoBackground, SpecHash: hash,
		OutputSchema: OutputSchema(td), Icons: Icons(td),
	})
	if err != nil {
		return Tool{}, fmt.Errorf("ToolDefinition %s: %w", td.Name, err)
	}
	if a := td.Spec.Annotations; a != nil {
		entry.Annotations = &contract.Annotations{Title: a.Title, ReadOnlyHint: a.ReadOnlyHint, DestructiveHint: a.DestructiveHint, IdempotentHint: a.IdempotentHint, OpenWorldHint: a.OpenWorldHint}
	}
	if src := td.Spec.Source; src != nil {
		entry.Source = &contract.Source{ToolSource: src.ToolSource, MCPURL: src.MCPURL, Tool: src.Tool}
	}
	t := Tool{Object: td.Name, Entry: entry, Examples: td.Spec.ExampleQueries}
	if p := td.Spec.Permissions; p != nil {
		t.Principals = p.AllowedPrincipals
	}
	return t, nil
}
