package use

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The kernel in use agrees with gonum's on every shape, whole panels and
// partial ones, blocks of four rows and the rows left over.
func TestMatmulAgreesWithGonum(t *testing.T) {
	t.Logf("kernel: %s", kernel())
	checkMatmul(t)
}

func checkMatmul(t *testing.T) {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 3, 4, 5, 10, 53} {
		for _, k := range []int{1, 7, 64, 256} {
			for _, c := range []int{1, 15, 16, 17, 33, 64, 70, 512} {
				x, w, bias := make([]float32, n*k), make([]float32, k*c), make([]float32, n*c)
				for i := range x {
					x[i] = r.Float32()*2 - 1
				}
				for i := range w {
					w[i] = r.Float32()*2 - 1
				}
				for i := range bias {
					bias[i] = r.Float32()
				}
				got, want := append([]float32(nil), bias...), append([]float32(nil), bias...)
				matmul(got, x, w, n, k, c)
				matmulGeneric(want, x, w, n, k, c)
				for i := range got {
					if d := math.Abs(float64(got[i] - want[i])); d > 1e-4*math.Max(1, math.Abs(float64(want[i]))) {
						t.Fatalf("n=%d k=%d c=%d: element %d is %g, gonum's %g", n, k, c, i, got[i], want[i])
					}
				}
			}
		}
	}
}
