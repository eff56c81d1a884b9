//go:build goexperiment.simd && amd64

package use

import "testing"

// A SIMD build on a CPU with AVX2 and FMA uses its vector kernels.
func TestSIMDBuildUsesVectorKernels(t *testing.T) {
	if hasAVX2 && kernel() == "gonum" {
		t.Fatal("the CPU has AVX2 and FMA, but the model multiplies with gonum's kernels")
	}
	t.Logf("kernel: %s", kernel())
}

// The AVX2 kernel, which CPUs without AVX-512 use, agrees with gonum's too.
func TestAVX2KernelAgreesWithGonum(t *testing.T) {
	if !hasAVX2 {
		t.Fatal("this CPU has no AVX2 and FMA: the AVX2 kernel cannot run here")
	}
	defer func(v bool) { hasAVX512 = v }(hasAVX512)
	hasAVX512 = false
	if kernel() != "avx2" {
		t.Fatalf("kernel %s", kernel())
	}
	checkMatmul(t)
}
