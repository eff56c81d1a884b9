//go:build !(goexperiment.simd && amd64)

package use

// matmulSIMD has no vectorised kernel in this build: Go's SIMD support
// needs GOEXPERIMENT=simd on amd64 (the Makefile and the images set it).
func matmulSIMD(out, x, w []float32, n, k, c int) bool { return false }

// kernel names the matmul kernel in use.
func kernel() string { return "gonum" }
