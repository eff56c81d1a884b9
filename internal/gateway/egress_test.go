package gateway

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/mcptest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/openaitest"
)

// A catalog's embedding endpoint is a namespace user's choice: the
// gateway embeds a client's query there only when the egress policy
// allows it. First an allowed endpoint receives the queries (so the
// gateway does send them to the spec's endpoint); pointed at a denied
// address (127.0.0.2, standing for a metadata service), the gateway
// answers searches by BM25 and the address receives nothing.
func TestSearchQueriesStayInsideTheEgressPolicy(t *testing.T) {
	ns := newNamespace(t)
	p := openaitest.New(t)
	tc := testCatalog(ns, "models", v1alpha1.DisclosureSpec{Mode: v1alpha1.DisclosureOn})
	tc.Spec.Embedding = v1alpha1.EmbeddingSpec{Provider: v1alpha1.ProviderOpenAI, Model: "text-embedding-3-small", BaseURL: p.BaseURL()}
	create(t, tc)
	create(t, standardTools(ns, "models")...)
	published(t, ns, "models", 5)
	asked := func(query string) bool {
		for _, r := range p.EmbeddingRequests() {
			if slices.Contains(r.Input, query) {
				return true
			}
		}
		return false
	}
	n := 0
	searchOnce := func() string {
		n++
		query := fmt.Sprintf("what is the weather in city number %d", n)
		search(t, connect(t, ns, "models", aliceToken, "", nil), query)
		return query
	}
	waitFor(t, "the allowed endpoint to embed a client's query", func() bool { return asked(searchOnce()) })

	internal := mcptest.NewTrap(t, "127.0.0.2", openaitest.Leak)
	edited := &v1alpha1.ToolCatalog{}
	if err := kube.Get(context.Background(), client.ObjectKeyFromObject(tc), edited); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(edited.DeepCopy())
	edited.Spec.Embedding.BaseURL = internal.URL + "/latest/meta-data?x="
	if err := kube.Patch(context.Background(), edited, patch); err != nil {
		t.Fatal(err)
	}
	// Once the gateway follows the new spec, a search no longer reaches
	// the old endpoint: it was answered without an embedder.
	waitFor(t, "searches answered under the new endpoint", func() bool { return !asked(searchOnce()) })
	if got := internal.Requests(); got != 0 {
		t.Fatalf("%d requests reached the denied address", got)
	}
}
