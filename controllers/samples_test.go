package controllers

import (
	"context"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/samples"
)

func keyOf(obj client.Object) client.ObjectKey { return client.ObjectKeyFromObject(obj) }

// loadSamples decodes every object of config/samples.
func loadSamples(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	objs, err := samples.Load(filepath.Join("..", "config", "samples"))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func TestSamplesApplyCleanly(t *testing.T) {
	g := gomegaFor(t)
	ctx := context.Background()
	ns := newNamespace(t)

	objs := loadSamples(t)
	var tools, catalogs, sources int
	for _, obj := range objs {
		obj.SetNamespace(ns)
		if err := k8sClient.Create(ctx, obj); err != nil {
			t.Fatalf("sample %s/%s rejected: %v", obj.GetKind(), obj.GetName(), err)
		}
		switch obj.GetKind() {
		case "ToolDefinition":
			tools++
		case "ToolCatalog":
			catalogs++
		case "ToolSource":
			sources++
		}
	}
	g.Expect(tools).To(BeNumerically(">=", 5), "want at least five sample tools")
	g.Expect(catalogs).To(BeNumerically(">=", 1), "want a sample catalog")
	g.Expect(sources).To(BeNumerically(">=", 1), "want a sample ToolSource")

	// Every sample tool is valid for the controller too, and the catalog
	// selects all of them.
	tc := &v1alpha1.ToolCatalog{}
	for _, obj := range objs {
		if obj.GetKind() == "ToolCatalog" {
			g.Expect(k8sClient.Get(ctx, keyOf(obj), tc)).To(Succeed())
		}
	}
	selector, err := metav1.LabelSelectorAsSelector(&tc.Spec.Selector)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		list := &v1alpha1.ToolDefinitionList{}
		g.Expect(k8sClient.List(ctx, list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: selector})).To(Succeed())
		g.Expect(list.Items).To(HaveLen(tools))
		for i := range list.Items {
			expectCondition(g, &list.Items[i], v1alpha1.ConditionValid, metav1.ConditionTrue, v1alpha1.ReasonSpecValid)
		}
	}).Should(Succeed())
}
