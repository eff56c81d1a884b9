package use

import (
	"math"
	"strings"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/internal/linalg"
)

// Every kernel the CPU runs, and gonum's, computes the reference vectors.
func TestEmbedMatchesReference(t *testing.T) {
	for _, kern := range append(linalg.Kernels(), nil) {
		t.Run(linalg.KernelName(kern), func(t *testing.T) {
			m, err := load(kern)
			if err != nil {
				t.Fatal(err)
			}
			checkReference(t, m)
		})
	}
}

// A kernel that reads the dense layers' weights as float16 gives the
// vectors of the same kernel over the weights widened to float32, to the
// bit.
func TestHalfPanelsEmbedAsWidenedOnes(t *testing.T) {
	halves, err := readWeights(weightsBin)
	if err != nil {
		t.Fatal(err)
	}
	for _, kern := range linalg.Kernels() {
		half, err := load(kern)
		if err != nil {
			t.Fatal(err)
		}
		widened, err := load(kern)
		if err != nil {
			t.Fatal(err)
		}
		for name, w := range halves {
			if strings.HasSuffix(name, ".kernel") {
				widened.layers[name] = linalg.Pack(linalg.Widen(w.data), w.rows, w.cols, kern)
			}
		}
		for _, r := range loadReference(t).Texts {
			a, _ := half.Embed(r.Text)
			b, _ := widened.Embed(r.Text)
			for i := range a {
				if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
					t.Fatalf("%s: Embed(%q)[%d] = %g over float16 panels, %g over float32 ones", kern.Name, r.Text, i, a[i], b[i])
				}
			}
		}
	}
}

func checkReference(t *testing.T, m *Model) {
	var worst float64
	var worstText string
	minCos := 1.0
	for _, r := range loadReference(t).Texts {
		got, err := m.Embed(r.Text)
		if err != nil {
			t.Fatalf("Embed(%q): %v", r.Text, err)
		}
		if len(got) != Dimensions {
			t.Fatalf("%d dimensions", len(got))
		}
		var dot float64
		for i, want := range r.Vector {
			dot += float64(got[i]) * want
			if d := math.Abs(float64(got[i]) - want); d > worst {
				worst, worstText = d, r.Text
			}
		}
		minCos = min(minCos, dot)
	}
	t.Logf("max abs difference from the reference over all texts: %.3g (%q); lowest cosine %.7f", worst, worstText, minCos)
	if minCos < 0.9999 {
		t.Errorf("lowest cosine with the reference %.7f, want ≥ 0.9999", minCos)
	}
	if worst > maxAbsDifference {
		t.Fatalf("max abs difference %.3g exceeds %.0e", worst, maxAbsDifference)
	}
}

// maxAbsDifference bounds the per-component difference from the float32
// reference that float16 weights allow.
const maxAbsDifference = 1e-3

func TestEmbedTruncatesAndRejectsEmpty(t *testing.T) {
	m, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Embed(""); err == nil {
		t.Fatal("empty text embedded")
	}
	long := ""
	for range 300 {
		long += "word "
	}
	if n := len(m.Tokens(long)); n != MaxTokens {
		t.Fatalf("%d tokens, want the first %d", n, MaxTokens)
	}
	// Only the first MaxTokens tokens count: text beyond them changes nothing.
	a, _ := m.Embed(long)
	b, _ := m.Embed(long + " completely different ending about weather")
	for i := range a {
		if a[i] != b[i] {
			t.Fatal("text past the token cap changed the embedding")
		}
	}
}
