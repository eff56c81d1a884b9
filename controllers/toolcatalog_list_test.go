package controllers

import (
	"context"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/kube/cached"
)

// cached.Objects lists the cache's own objects that the selector matches,
// without a copy: two listings hand out the same objects. Without the
// cache's index it lists through the client, to the same tools.
func TestToolDefinitionsAreTheCachesOwn(t *testing.T) {
	g := gomegaFor(t)
	ctx := context.Background()
	ns := newNamespace(t)
	for name, lbls := range map[string]map[string]string{"a": {"team": "x"}, "b": {"team": "x"}, "c": {"team": "y"}} {
		td := &v1alpha1.ToolDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
			Spec: v1alpha1.ToolDefinitionSpec{Name: name, Description: "does " + name}}
		g.Expect(k8sClient.Create(ctx, td)).To(Succeed())
	}
	sel := labels.SelectorFromSet(labels.Set{"team": "x"})
	r := &cached.Objects{Reader: suiteManager.GetClient(), Informers: suiteManager.GetCache()}
	names := func(tds []*v1alpha1.ToolDefinition) []string {
		var out []string
		for _, td := range tds {
			out = append(out, td.Name)
		}
		slices.Sort(out)
		return out
	}
	var first []*v1alpha1.ToolDefinition
	g.Eventually(func(g Gomega) {
		var err error
		first, err = r.ToolDefinitions(ctx, ns, sel)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(names(first)).To(Equal([]string{"a", "b"}))
	}).Should(Succeed())
	again, err := r.ToolDefinitions(ctx, ns, sel)
	g.Expect(err).NotTo(HaveOccurred())
	byName := map[string]*v1alpha1.ToolDefinition{}
	for _, td := range first {
		byName[td.Name] = td
	}
	for _, td := range again {
		g.Expect(td).To(BeIdenticalTo(byName[td.Name]), "a second listing copied %s", td.Name)
	}

	listed, err := (&cached.Objects{Reader: suiteManager.GetClient()}).ToolDefinitions(ctx, ns, sel)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(listed)).To(Equal([]string{"a", "b"}))
	g.Expect(listed[0]).NotTo(BeIdenticalTo(byName[listed[0].Name]), "the client's list is a copy")
}
