package catalog

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

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
	return (&Selector{}).Select(ptrs, sources, Made{At: time.Now()})
}

// Selector is Select with a memory, kept for one catalog across passes.
// Each ToolDefinition's validation and entry are kept by object, with the
// UID and generation they were derived from, so a pass over a catalog
// where few tools changed does not validate, hash and normalise every
// tool again. The selection itself is kept too: a pass that knows which
// ToolDefinitions changed since the last (Update) looks at those alone,
// not at every ToolDefinition of the namespace. It is safe for concurrent
// use.
type Selector struct {
	mu sync.Mutex
	// made is when and for what Select last made the selection.
	made Made
	// entries are the ToolDefinitions the selection saw, by object name,
	// those being deleted left out.
	entries map[string]*selected
	// tools are the selected tools, in order of name; a selection given
	// out is a copy.
	tools []*Tool
	// conflicts are the tool names two or more valid ToolDefinitions
	// use, with those objects; invalid the objects rejected as invalid.
	conflicts map[string][]string
	invalid   map[string]bool
}

// Made says when a selection was made whole, and for what: Key names
// what decides which ToolDefinitions it looks at (the catalog's label
// selector).
type Made struct {
	At  time.Time
	Key string
}

// selected is what one generation of a ToolDefinition selects to.
type selected struct {
	uid        types.UID
	generation int64
	// name is the ToolDefinition's spec.name.
	name string
	// spec says why the generation's spec is invalid; invalid why the
	// ToolDefinition is rejected, for its spec or its source, when last
	// selected.
	spec, invalid error
	tool          Tool
}

// Select is the package's Select, remembering what it derived. Entries
// are kept by pointer, and the selection points to them: at 50,000
// tools, copying and swapping whole entries was most of a pass's
// selection, and a copy per pass and per plan 20 MB. A generation's
// entry is never changed once made, so a pass may keep the pointers. made
// says when and for what the selection is made (Made).
func (s *Selector) Select(tds []*v1alpha1.ToolDefinition, sources Sources, made Made) (Selection, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.made = Made{}
	// What each ToolDefinition selected to before is looked up on every
	// core: at 50,000 tools each look-up misses the CPU's caches. A new
	// generation is validated in order below, one at a time, so a bulk
	// apply's garbage comes no faster than the collector was paced for.
	type found struct {
		got     *selected
		deleted bool
	}
	finds := make([]found, len(tds))
	parallel(len(tds), func(i int) {
		td := tds[i]
		if !td.DeletionTimestamp.IsZero() {
			finds[i].deleted = true
			return
		}
		if got := s.entries[td.Name]; got.derives(td) {
			got.invalid = got.invalidFor(td, sources)
			finds[i].got = got
		}
	})
	entries := make(map[string]*selected, len(tds))
	for i, td := range tds {
		f := finds[i]
		if f.deleted {
			continue
		}
		if f.got == nil {
			got, err := derive(td, sources)
			if err != nil {
				return Selection{}, err
			}
			f.got = got
		}
		entries[td.Name] = f.got
	}
	s.entries, s.conflicts, s.invalid = entries, map[string][]string{}, map[string]bool{}
	// Each tool name's first valid object, and the names in conflict.
	first := make(map[string]string, len(entries))
	for _, td := range tds {
		got := entries[td.Name]
		switch {
		case got == nil:
		case got.invalid != nil:
			s.invalid[td.Name] = true
		case s.conflicts[got.name] != nil:
			s.conflicts[got.name] = append(s.conflicts[got.name], td.Name)
		case first[got.name] != "":
			s.conflicts[got.name] = []string{first[got.name], td.Name}
		default:
			first[got.name] = td.Name
		}
	}
	// The same names as the last selection's, as after an edit, are
	// taken in its order: sorting 50,000 tools is most of a selection.
	tools := make([]*Tool, 0, len(first))
	sorted := len(s.tools) == len(first)-len(s.conflicts)
	for _, last := range s.tools {
		obj, ok := first[last.Entry.Name]
		if !ok || s.conflicts[last.Entry.Name] != nil {
			sorted = false
			break
		}
		tools = append(tools, &entries[obj].tool)
	}
	if !sorted {
		tools = tools[:0]
		for name, obj := range first {
			if s.conflicts[name] == nil {
				tools = append(tools, &entries[obj].tool)
			}
		}
		slices.SortFunc(tools, func(a, b *Tool) int { return strings.Compare(a.Entry.Name, b.Entry.Name) })
	}
	s.tools, s.made = tools, made
	return s.selection(), nil
}

// Made says when and for what the kept selection was made whole
// (Select); its time is zero when there is none, and Update cannot be
// used.
func (s *Selector) Made() Made {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.made
}

// Update changes the kept selection for the ToolDefinitions named, which
// may have changed since it was made, and returns it. get returns each
// as the catalog sees it now: nil when it is gone or its labels no
// longer match. The others are taken as they were: it is for a pass told
// of every change since the last (a ToolSource's record, which decides
// its tools' validity, calls for Select). It reports false, and changes
// nothing, when there is no selection to update.
func (s *Selector) Update(objects []string, get func(object string) *v1alpha1.ToolDefinition, sources Sources) (Selection, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.made.At.IsZero() {
		return Selection{}, false, nil
	}
	for _, obj := range objects {
		old := s.entries[obj]
		if old != nil {
			s.leave(obj, old)
			delete(s.entries, obj)
		}
		td := get(obj)
		if td == nil || !td.DeletionTimestamp.IsZero() {
			continue
		}
		got := old
		if got.derives(td) {
			got.invalid = got.invalidFor(td, sources)
		} else {
			var err error
			if got, err = derive(td, sources); err != nil {
				s.made = Made{} // the next pass selects whole
				return Selection{}, false, err
			}
		}
		s.entries[obj] = got
		s.join(obj, got)
	}
	return s.selection(), true, nil
}

// derives says whether got is what td's generation selects to, but for
// its source's record, which is checked again.
func (got *selected) derives(td *v1alpha1.ToolDefinition) bool {
	return got != nil && td.UID != "" && got.uid == td.UID && got.generation == td.Generation
}

// derive validates td and derives its entry.
func derive(td *v1alpha1.ToolDefinition, sources Sources) (*selected, error) {
	got := &selected{uid: td.UID, generation: td.Generation, name: td.Spec.Name, spec: validSpec(td)}
	if got.spec == nil {
		t, err := toolOf(td)
		if err != nil {
			return nil, err
		}
		got.tool = t
	}
	got.tool.Object = td.Name
	got.invalid = got.invalidFor(td, sources)
	return got, nil
}

// leave takes obj, as got, out of the kept selection.
func (s *Selector) leave(obj string, got *selected) {
	if got.invalid != nil {
		delete(s.invalid, obj)
		return
	}
	if group := s.conflicts[got.name]; group != nil {
		group = slices.DeleteFunc(slices.Clone(group), func(o string) bool { return o == obj })
		s.conflicts[got.name] = group
		if len(group) == 1 {
			delete(s.conflicts, got.name)
			s.insert(&s.entries[group[0]].tool)
		}
		return
	}
	if i, ok := s.find(got.name); ok && s.tools[i].Object == obj {
		s.tools = slices.Delete(s.tools, i, i+1)
	}
}

// join puts obj, as got, in the kept selection.
func (s *Selector) join(obj string, got *selected) {
	switch i, taken := s.find(got.name); {
	case got.invalid != nil:
		s.invalid[obj] = true
	case s.conflicts[got.name] != nil:
		s.conflicts[got.name] = append(s.conflicts[got.name], obj)
	case taken:
		s.conflicts[got.name] = []string{s.tools[i].Object, obj}
		s.tools = slices.Delete(s.tools, i, i+1)
	default:
		s.insert(&got.tool)
	}
}

// find finds a selected tool by name.
func (s *Selector) find(name string) (int, bool) {
	return slices.BinarySearchFunc(s.tools, name, func(t *Tool, name string) int { return strings.Compare(t.Entry.Name, name) })
}

// insert adds a tool to the selected ones, in order.
func (s *Selector) insert(t *Tool) {
	i, _ := s.find(t.Entry.Name)
	s.tools = slices.Insert(s.tools, i, t)
}

// selection is the kept selection, as a pass gets it.
func (s *Selector) selection() Selection {
	sel := Selection{Tools: slices.Clone(s.tools)}
	for obj := range s.invalid {
		got := s.entries[obj]
		sel.Rejected = append(sel.Rejected, Failure{Object: obj, Tool: got.name, Reason: v1alpha1.ReasonInvalidSpec, Message: got.invalid.Error()})
	}
	for name, group := range s.conflicts {
		names := slices.Sorted(slices.Values(group))
		for _, obj := range group {
			sel.Rejected = append(sel.Rejected, Failure{Object: obj, Tool: name, Reason: v1alpha1.ReasonNameConflict,
				Message: fmt.Sprintf("tool name %q is used by ToolDefinitions %s: rename or unselect all but one", name, strings.Join(names, ", "))})
		}
	}
	slices.SortFunc(sel.Rejected, func(a, b Failure) int { return strings.Compare(a.Object, b.Object) })
	return sel
}

// invalidFor says why td, of this generation, is rejected, nil when it is
// not. Owners are metadata, and a source's record its status, which move
// no generation: they are checked each time td is looked at, and a
// change of a source makes the next pass look at every ToolDefinition.
func (got *selected) invalidFor(td *v1alpha1.ToolDefinition, sources Sources) error {
	if got.spec != nil {
		return got.spec
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
