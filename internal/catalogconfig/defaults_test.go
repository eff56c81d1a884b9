package catalogconfig

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"testing"
	"time"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
)

// catalogSchema is the structural schema of the ToolCatalog CRD as
// generated from the kubebuilder markers.
func catalogSchema(t *testing.T) (*structuralschema.Structural, *apiextensionsv1.JSONSchemaProps) {
	t.Helper()
	raw, err := os.ReadFile("../../config/crd/bases/toolcatalog.dev_toolcatalogs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if unmarshalErr := yaml.Unmarshal(raw, crd); unmarshalErr != nil {
		t.Fatal(unmarshalErr)
	}
	v1 := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	internal := &apiextensionsinternal.JSONSchemaProps{}
	if convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaPropsErr := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v1, internal, nil); convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaPropsErr != nil {
		t.Fatal(convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaPropsErr)
	}
	s, err := structuralschema.NewStructural(internal)
	if err != nil {
		t.Fatal(err)
	}
	return s, v1
}

// The defaults the API server writes (kubebuilder markers) and those the
// resolver falls back to for a field left unset (a catalog stored before
// the default existed, or written by a client that skips defaulting) are
// the same: a catalog resolves to the same configuration either way.
func TestResolverDefaultsAreTheCRDDefaults(t *testing.T) {
	schema, _ := catalogSchema(t)
	for name, spec := range map[string]v1alpha1.ToolCatalogSpec{
		"empty":    {Redis: v1alpha1.RedisSpec{Addresses: []string{"127.0.0.1:6379"}}},
		"learning": {Redis: v1alpha1.RedisSpec{Addresses: []string{"127.0.0.1:6379"}}, Learning: v1alpha1.LearningSpec{Enabled: true}},
	} {
		t.Run(name, func(t *testing.T) {
			raw := &v1alpha1.ToolCatalog{}
			raw.Namespace, raw.Name = "ns", "c"
			raw.Spec = spec
			defaulted := raw.DeepCopy()
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(defaulted)
			if err != nil {
				t.Fatal(err)
			}
			defaulting.Default(u, schema)
			if fromUnstructuredErr := runtime.DefaultUnstructuredConverter.FromUnstructured(u, defaulted); fromUnstructuredErr != nil {
				t.Fatal(fromUnstructuredErr)
			}
			if reflect.DeepEqual(raw.Spec, defaulted.Spec) {
				t.Fatal("the CRD defaulted nothing: the schema was not read")
			}
			r := &Resolver{}
			want, err := r.Resolve(context.Background(), defaulted)
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.Resolve(context.Background(), raw)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("an unset spec resolves to\n%+v\nthe CRD's defaults to\n%+v", got, want)
			}
		})
	}
}

// The provider settings the resolver passes through unset are defaulted
// by the provider clients; their defaults are the CRD's.
func TestProviderDefaultsAreTheCRDDefaults(t *testing.T) {
	_, v1 := catalogSchema(t)
	spec := v1.Properties["spec"]
	def := func(path ...string) string {
		p := spec
		for _, name := range path {
			p = p.Properties[name]
		}
		if p.Default == nil {
			t.Fatalf("spec.%v has no default", path)
		}
		return string(p.Default.Raw)
	}
	timeout, _ := json.Marshal(embedding.DefaultTimeout.String())
	for field, pair := range map[string][2]string{
		"embedding.batchSize":         {def("embedding", "batchSize"), jsonOf(t, embedding.DefaultBatchSize)},
		"embedding.timeout":           {def("embedding", "timeout"), string(timeout)},
		"queryGeneration.maxRetries":  {def("queryGeneration", "maxRetries"), jsonOf(t, embedding.DefaultRetryPolicy().MaxRetries)},
		"queryGeneration.concurrency": {def("queryGeneration", "concurrency"), jsonOf(t, embedding.DefaultConcurrency)},
		"publish.resyncInterval":      {def("publish", "resyncInterval"), jsonOf(t, DefaultResync.String())},
		"learning.retention":          {def("learning", "retention"), jsonOf(t, DefaultLearningRetention.String())},
	} {
		crd, code := pair[0], pair[1]
		if crd != code && !sameDuration(crd, code) {
			t.Errorf("spec.%s: the CRD defaults to %s, the code to %s", field, crd, code)
		}
	}
}

func jsonOf(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sameDuration compares two JSON durations ("30s" and "30s0ms" alike).
func sameDuration(a, b string) bool {
	var sa, sb string
	if json.Unmarshal([]byte(a), &sa) != nil || json.Unmarshal([]byte(b), &sb) != nil {
		return false
	}
	da, errA := time.ParseDuration(sa)
	db, errB := time.ParseDuration(sb)
	return errA == nil && errB == nil && da == db
}
