package use

import "fmt"

// kernel is a set of vectorised matrix kernels over weights packed in
// panels of width columns (see pack): block does four rows of x, row
// one. The kernels are assembly (kernel_amd64.s) and do no bounds
// checks; packed.mul checks every bound before calling them.
type kernel struct {
	name  string
	width int
	block func(k int, x *float32, ldx int, w *float32, out *float32, ldo int)
	row   func(k int, x *float32, w *float32, out *float32)
}

// packed is a k×c weight matrix for x·w products: row-major for gonum's
// kernel, else panels of kern.width columns, each panel's k rows one
// after another, so a kernel reads its panel as one sequential stream.
type packed struct {
	k, c int
	kern *kernel // nil: row-major, multiplied by gonum's kernel
	data []float32
}

// pack lays out the row-major k×c matrix w for kern; a matrix whose
// columns do not fill whole panels stays row-major, for gonum's kernel.
func pack(w []float32, k, c int, kern *kernel) packed {
	return packInto(make([]float32, len(w)), w, k, c, kern)
}

// packInto is pack into dst, which holds k×c floats; it returns w itself
// when w stays row-major.
func packInto(dst, w []float32, k, c int, kern *kernel) packed {
	if kern == nil || c%kern.width != 0 {
		return packed{k: k, c: c, data: w}
	}
	width := kern.width
	data := dst[:0]
	for j := 0; j < c; j += width {
		for p := range k {
			data = append(data, w[p*c+j:p*c+j+width]...)
		}
	}
	return packed{k: k, c: c, kern: kern, data: data}
}

// mul adds x·w to out, x being n×k and out n×c, both row-major.
func (w packed) mul(out, x []float32, n int) {
	k, c := w.k, w.c
	if len(x) < n*k || len(out) < n*c || len(w.data) != k*c {
		panic(fmt.Sprintf("use: %d×%d by %d×%d into %d floats: sizes disagree", n, k, k, c, len(out)))
	}
	if w.kern == nil || n == 0 || k == 0 {
		matmulGeneric(out, x, w.data, n, k, c)
		return
	}
	width := w.kern.width
	for j := 0; j < c; j += width {
		panel := &w.data[j*k]
		r := 0
		for ; r+4 <= n; r += 4 {
			w.kern.block(k, &x[r*k], k, panel, &out[r*c+j], c)
		}
		for ; r < n; r++ {
			w.kern.row(k, &x[r*k], panel, &out[r*c+j])
		}
	}
}
