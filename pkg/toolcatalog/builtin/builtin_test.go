package builtin

import (
	"context"
	"errors"
	"math"
	"testing"
)

func TestEmbedReturnsUnitVectorsThatRelateParaphrases(t *testing.T) {
	vecs, err := Embedder{}.Embed(context.Background(), []string{
		"is it going to rain tomorrow", "weather forecast", "delete a row from a database table",
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vecs {
		var n float64
		for _, x := range v {
			n += float64(x) * float64(x)
		}
		if len(v) != Dimensions || math.Abs(n-1) > 1e-4 {
			t.Fatalf("vector %d: %d dimensions, norm² %f", i, len(v), n)
		}
	}
	cos := func(a, b []float32) (s float32) {
		for i := range a {
			s += a[i] * b[i]
		}
		return s
	}
	if near, far := cos(vecs[0], vecs[1]), cos(vecs[0], vecs[2]); near <= far {
		t.Fatalf("rain~forecast %.3f should exceed rain~database %.3f", near, far)
	}
}

func TestEmbedRefusesBlankText(t *testing.T) {
	if _, err := (Embedder{}).Embed(context.Background(), []string{"ok", "  "}); !errors.Is(err, ErrEmptyText) {
		t.Fatalf("blank text: %v", err)
	}
}
