package use

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// matmulGeneric is matmul by gonum's portable Sgemm.
func matmulGeneric(out, x, w []float32, n, k, c int) {
	blas32.Gemm(blas.NoTrans, blas.NoTrans, 1,
		blas32.General{Rows: n, Cols: k, Stride: k, Data: x},
		blas32.General{Rows: k, Cols: c, Stride: c, Data: w},
		1, blas32.General{Rows: n, Cols: c, Stride: c, Data: out})
}
