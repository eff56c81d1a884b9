//go:build goexperiment.simd && amd64

package use

import "simd/archsimd"

// The kernels work on blocks of 4 rows of x and one panel of w's columns
// (16 with AVX2, 32 with AVX-512): 8 vector accumulators stay in
// registers (the compiler allocates 16 vector registers) while the panel
// is read once per block, a row of w at a time.
var (
	hasAVX512 = archsimd.X86.AVX512()
	hasAVX2   = archsimd.X86.AVX2() && archsimd.X86.FMA()
)

// kernel names the matmul kernel in use.
func kernel() string {
	switch {
	case hasAVX512:
		return "avx512"
	case hasAVX2:
		return "avx2"
	}
	return "gonum"
}

// matmulSIMD is matmul with Go's SIMD support, when the CPU has AVX2 and
// FMA; it reports false, doing nothing, otherwise.
func matmulSIMD(out, x, w []float32, n, k, c int) bool {
	var done int
	switch {
	case hasAVX512:
		done = c / 32 * 32
		for j := 0; j < done; j += 32 {
			panel512(out, x, w, n, k, c, j)
		}
	case hasAVX2:
		done = c / 16 * 16
		for j := 0; j < done; j += 16 {
			panel256(out, x, w, n, k, c, j)
		}
	default:
		return false
	}
	// Columns past the last whole panel, one at a time.
	for j := done; j < c; j++ {
		for r := range n {
			s := out[r*c+j]
			for p := range k {
				s += x[r*k+p] * w[p*c+j]
			}
			out[r*c+j] = s
		}
	}
	return true
}

// panel256 computes columns j to j+16 of out with 8-wide vectors.
func panel256(out, x, w []float32, n, k, c, j int) {
	r := 0
	for ; r+4 <= n; r += 4 {
		o0, o1, o2, o3 := out[r*c+j:r*c+j+16], out[(r+1)*c+j:(r+1)*c+j+16], out[(r+2)*c+j:(r+2)*c+j+16], out[(r+3)*c+j:(r+3)*c+j+16]
		a00, a01 := load8(o0)
		a10, a11 := load8(o1)
		a20, a21 := load8(o2)
		a30, a31 := load8(o3)
		x0, x1, x2, x3 := x[r*k:r*k+k], x[(r+1)*k:(r+1)*k+k], x[(r+2)*k:(r+2)*k+k], x[(r+3)*k:(r+3)*k+k]
		for p := range k {
			w0, w1 := load8(w[p*c+j : p*c+j+16])
			b := archsimd.BroadcastFloat32x8(x0[p])
			a00, a01 = w0.MulAdd(b, a00), w1.MulAdd(b, a01)
			b = archsimd.BroadcastFloat32x8(x1[p])
			a10, a11 = w0.MulAdd(b, a10), w1.MulAdd(b, a11)
			b = archsimd.BroadcastFloat32x8(x2[p])
			a20, a21 = w0.MulAdd(b, a20), w1.MulAdd(b, a21)
			b = archsimd.BroadcastFloat32x8(x3[p])
			a30, a31 = w0.MulAdd(b, a30), w1.MulAdd(b, a31)
		}
		store8(o0, a00, a01)
		store8(o1, a10, a11)
		store8(o2, a20, a21)
		store8(o3, a30, a31)
	}
	for ; r < n; r++ {
		o := out[r*c+j : r*c+j+16]
		a0, a1 := load8(o)
		xr := x[r*k : r*k+k]
		for p := range k {
			w0, w1 := load8(w[p*c+j : p*c+j+16])
			b := archsimd.BroadcastFloat32x8(xr[p])
			a0, a1 = w0.MulAdd(b, a0), w1.MulAdd(b, a1)
		}
		store8(o, a0, a1)
	}
}

func load8(s []float32) (a, b archsimd.Float32x8) {
	return archsimd.LoadFloat32x8Slice(s[0:8]), archsimd.LoadFloat32x8Slice(s[8:16])
}

func store8(s []float32, a, b archsimd.Float32x8) {
	a.StoreSlice(s[0:8])
	b.StoreSlice(s[8:16])
}

// panel512 computes columns j to j+32 of out with 16-wide vectors.
func panel512(out, x, w []float32, n, k, c, j int) {
	r := 0
	for ; r+4 <= n; r += 4 {
		o0, o1, o2, o3 := out[r*c+j:r*c+j+32], out[(r+1)*c+j:(r+1)*c+j+32], out[(r+2)*c+j:(r+2)*c+j+32], out[(r+3)*c+j:(r+3)*c+j+32]
		a00, a01 := load16(o0)
		a10, a11 := load16(o1)
		a20, a21 := load16(o2)
		a30, a31 := load16(o3)
		x0, x1, x2, x3 := x[r*k:r*k+k], x[(r+1)*k:(r+1)*k+k], x[(r+2)*k:(r+2)*k+k], x[(r+3)*k:(r+3)*k+k]
		for p := range k {
			w0, w1 := load16(w[p*c+j : p*c+j+32])
			b := archsimd.BroadcastFloat32x16(x0[p])
			a00, a01 = w0.MulAdd(b, a00), w1.MulAdd(b, a01)
			b = archsimd.BroadcastFloat32x16(x1[p])
			a10, a11 = w0.MulAdd(b, a10), w1.MulAdd(b, a11)
			b = archsimd.BroadcastFloat32x16(x2[p])
			a20, a21 = w0.MulAdd(b, a20), w1.MulAdd(b, a21)
			b = archsimd.BroadcastFloat32x16(x3[p])
			a30, a31 = w0.MulAdd(b, a30), w1.MulAdd(b, a31)
		}
		store16(o0, a00, a01)
		store16(o1, a10, a11)
		store16(o2, a20, a21)
		store16(o3, a30, a31)
	}
	for ; r < n; r++ {
		o := out[r*c+j : r*c+j+32]
		a0, a1 := load16(o)
		xr := x[r*k : r*k+k]
		for p := range k {
			w0, w1 := load16(w[p*c+j : p*c+j+32])
			b := archsimd.BroadcastFloat32x16(xr[p])
			a0, a1 = w0.MulAdd(b, a0), w1.MulAdd(b, a1)
		}
		store16(o, a0, a1)
	}
}

func load16(s []float32) (a, b archsimd.Float32x16) {
	return archsimd.LoadFloat32x16Slice(s[0:16]), archsimd.LoadFloat32x16Slice(s[16:32])
}

func store16(s []float32, a, b archsimd.Float32x16) {
	a.StoreSlice(s[0:16])
	b.StoreSlice(s[16:32])
}
