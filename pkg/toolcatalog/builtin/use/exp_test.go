package use

import (
	"math"
	"testing"
)

// expf and tanhf agree with the math package over the ranges the forward
// pass feeds them: softmax's x ≤ 0, the head's pre-activations.
func TestExpfAndTanhfAgreeWithMath(t *testing.T) {
	var worstExp, worstTanh float64
	for x := -100.0; x <= 88.72; x += 0.0037 {
		want := math.Exp(x)
		got := float64(expf(float32(x)))
		if want < 1e-37 { // below float32's normal range: flushed to zero
			if got > 1e-37 {
				t.Fatalf("expf(%g) = %g, want about %g", x, got, want)
			}
			continue
		}
		// float32(x) itself moves e^x by up to x·2^-24 relatively.
		want = math.Exp(float64(float32(x)))
		worstExp = max(worstExp, math.Abs(got-want)/want)
	}
	for x := -12.0; x <= 12; x += 0.00071 {
		want := math.Tanh(float64(float32(x)))
		got := float64(tanhf(float32(x)))
		worstTanh = max(worstTanh, math.Abs(got-want)/max(math.Abs(want), 1e-30))
	}
	t.Logf("largest relative error: expf %.3g, tanhf %.3g", worstExp, worstTanh)
	// A float32 ulp is 6e-8 to 1.2e-7 of the value.
	if worstExp > 3e-7 || worstTanh > 5e-7 {
		t.Fatalf("relative error beyond 2 ulp (expf) or 4 ulp (tanhf)")
	}
	if !math.IsInf(float64(expf(100)), 1) || expf(-100) != 0 || !math.IsNaN(float64(expf(float32(math.NaN())))) {
		t.Fatal("expf mishandles overflow, underflow or NaN")
	}
	if tanhf(20) != 1 || tanhf(-20) != -1 || tanhf(0) != 0 {
		t.Fatal("tanhf mishandles its limits")
	}
}

var sinkf float32

// BenchmarkExp compares expf with math.Exp in this build: run with
// GOEXPERIMENT=simd, math.Exp pays AVX-SSE transition penalties.
func BenchmarkExp(b *testing.B) {
	b.Run("expf", func(b *testing.B) {
		for b.Loop() {
			for i := range 1000 {
				sinkf += expf(float32(i) * -0.001)
			}
		}
	})
	b.Run("math.Exp", func(b *testing.B) {
		for b.Loop() {
			for i := range 1000 {
				sinkf += float32(math.Exp(float64(i) * -0.001))
			}
		}
	})
}
