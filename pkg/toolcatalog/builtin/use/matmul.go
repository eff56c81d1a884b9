package use

// matmul adds x·w to out: x is n×k, w is k×c and out n×c, all row-major.
// It uses the vectorised kernel the build and the CPU allow (see
// matmul_simd_amd64.go), else gonum's.
func matmul(out, x, w []float32, n, k, c int) {
	if !matmulSIMD(out, x, w, n, k, c) {
		matmulGeneric(out, x, w, n, k, c)
	}
}
