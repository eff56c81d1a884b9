package evaluation

import (
	"context"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
)

// The candidate measured on a set holds terms fitted without it: none of
// its words' counts come from the set's own tools.
func TestHeldOutTermsLeaveTheSetOut(t *testing.T) {
	ctx := context.Background()
	emb, err := HeldOutEmbedder(ctx, heldOut, "toolalpaca", TermWeight)
	if err != nil {
		t.Fatalf("%v: check out the shared benchmark sets beside the repository, as ../shared/bench", err)
	}
	if _, ok := emb.Terms.Data["toolalpaca/tools.json"]; ok || len(emb.Terms.Data) != 3 {
		t.Fatalf("held-out terms fitted on %v", emb.Terms.Data)
	}
	all, err := Datasets(heldOut)
	if err != nil {
		t.Fatal(err)
	}
	every, err := FitTerms(ctx, all, TermWeight)
	if err != nil {
		t.Fatal(err)
	}
	if every.Docs <= emb.Terms.Docs || len(every.Data) != 4 {
		t.Fatalf("fitted on every set: %d tools of %v; without toolalpaca: %d", every.Docs, every.Data, emb.Terms.Docs)
	}
	if emb.Model() == embedding.BuiltinModel || emb.Model() == (embedding.TermsEmbedder{Base: embedding.SentenceEmbedder{}, Terms: every}).Model() {
		t.Fatalf("held-out terms name the model %s", emb.Model())
	}
	if _, err := HeldOutEmbedder(ctx, heldOut, "no-such-set", TermWeight); err == nil {
		t.Fatal("leaving out a set that is not there fitted terms on every set")
	}
}
