package check

import (
	"context"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// Schemas validates objects as the API server does on create, from the
// CustomResourceDefinitions it serves: unknown fields (kubectl's default
// strict field validation refuses them), defaults, object metadata, the
// OpenAPI schema, list types and the CEL rules, with the apiextensions
// libraries the API server runs, so a message here is the API server's.
type Schemas struct {
	versions map[schema.GroupVersionKind]*versionSchema
	// served lists the versions served of each group and kind.
	served map[schema.GroupKind][]string
}

// versionSchema is what validates one served version of a kind.
type versionSchema struct {
	namespaced bool
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

// LoadSchemas reads every CustomResourceDefinition (*.yaml) of fsys.
func LoadSchemas(fsys fs.FS) (*Schemas, error) {
	files, err := fs.Glob(fsys, "*/*.yaml")
	if err != nil {
		return nil, err
	}
	s := &Schemas{versions: map[schema.GroupVersionKind]*versionSchema{}, served: map[schema.GroupKind][]string{}}
	for _, name := range files {
		raw, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		if err := s.add(crd); err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
	}
	return s, nil
}

func (s *Schemas) add(crd *apiextensionsv1.CustomResourceDefinition) error {
	gk := schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
	for _, v := range crd.Spec.Versions {
		if !v.Served || v.Schema == nil {
			continue
		}
		internal := &apiextensions.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, internal, nil); err != nil {
			return fmt.Errorf("converting the schema of %s: %w", v.Name, err)
		}
		structural, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
		if err != nil {
			return fmt.Errorf("the schema of %s is not structural: %w", v.Name, err)
		}
		validator, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
		if err != nil {
			return fmt.Errorf("the schema of %s: %w", v.Name, err)
		}
		s.versions[gk.WithVersion(v.Name)] = &versionSchema{
			namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
			structural: structural,
			validator:  validator,
			cel:        cel.NewValidator(structural, true, celconfig.PerCallLimit),
		}
		s.served[gk] = append(s.served[gk], v.Name)
	}
	return nil
}

// Knows reports whether the group is one of the definitions'.
func (s *Schemas) Knows(group string) bool {
	for gk := range s.served {
		if gk.Group == group {
			return true
		}
	}
	return false
}

// Violation is one reason the API server would refuse an object: the
// field (a field path, "" for the object) and the API server's words.
type Violation struct {
	Field, Message string
}

// Validate defaults obj in place and returns what the API server would
// refuse of it on create; an error when its kind or version is not served.
func (s *Schemas) Validate(ctx context.Context, obj map[string]any) ([]Violation, error) {
	u := &unstructured.Unstructured{Object: obj}
	gvk := u.GroupVersionKind()
	v := s.versions[gvk]
	if v == nil {
		served := s.served[gvk.GroupKind()]
		if len(served) == 0 {
			return nil, fmt.Errorf("no kind %q is served in group %q", gvk.Kind, gvk.Group)
		}
		sort.Strings(served)
		return nil, fmt.Errorf("%s is not served in version %q of group %q: use %s", gvk.Kind, gvk.Version, gvk.Group, strings.Join(prefixed(gvk.Group+"/", served), " or "))
	}
	var out []Violation
	for _, path := range pruning.PruneWithOptions(obj, v.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}) {
		out = append(out, Violation{Field: path, Message: fmt.Sprintf("strict decoding error: unknown field %q", path)})
	}
	if err := schemaobjectmeta.Coerce(nil, obj, v.structural, true, false); err != nil {
		return append(out, violations(field.ErrorList{err})...), nil
	}
	structuraldefaulting.Default(obj, v.structural)

	var errs field.ErrorList
	errs = append(errs, metavalidation.ValidateObjectMetaAccessor(u, v.namespaced, metavalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj, v.validator)...)
	errs = append(errs, schemaobjectmeta.Validate(ctx, nil, obj, v.structural, false)...)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, v.structural, obj)...)
	if blocked := blocking(errs); blocked != nil {
		errs = append(errs, blocked)
	} else {
		celErrs, _ := v.cel.Validate(ctx, nil, v.structural, obj, nil, celconfig.RuntimeCELCostBudget)
		errs = append(errs, celErrs...)
	}
	return append(out, violations(errs)...), nil
}

func violations(errs field.ErrorList) []Violation {
	out := make([]Violation, len(errs))
	for i, err := range errs {
		out[i] = Violation{Field: err.Field, Message: err.Error()}
	}
	return out
}

// blocking is the API server's note when the errors so far keep the CEL
// rules from being evaluated.
func blocking(errs field.ErrorList) *field.Error {
	for _, err := range errs {
		switch err.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation")
		}
	}
	return nil
}

func prefixed(prefix string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return out
}
