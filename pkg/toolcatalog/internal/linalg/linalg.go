// Package linalg holds the float32 products the consumer library and the
// builtin model spend their time in: x·W against a constant weight
// matrix, and the scores of one vector against every row of a matrix.
// On amd64 they run on assembly kernels for AVX-512 or AVX2 with FMA,
// chosen from what the CPU has; elsewhere, or for shapes the kernels do
// not take, on gonum's portable ones. The kernels check no bounds: the
// Go functions here check every bound before calling them.
package linalg

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// Kernel is a set of vectorised kernels: products over weights packed in
// panels of Width columns (see Pack), and row scores over rows whose
// length is a multiple of Lanes.
type Kernel struct {
	Name  string
	Width int
	Lanes int
	// block does four rows of x against one panel, row one row.
	block func(k int, x *float32, ldx int, w *float32, out *float32, ldo int)
	row   func(k int, x *float32, w *float32, out *float32)
	// dots4 scores four rows of m, ld floats apart, against q.
	dots4 func(n int, q *float32, m *float32, ld int, out *float32)
	// dots4i8w scores four int8 rows of m, ld bytes apart, against a
	// query rounded to int16 (see wideQuery); n is a multiple of 16.
	dots4i8w func(n int, q *int16, m *int8, ld int, out *float32)
	// blockHalf does halfRows rows of x against one panel of binary16
	// weights, widening each weight as it reads it, and blockHalf4 four
	// rows; nil if the kernel has none.
	blockHalf, blockHalf4 func(k int, x *float32, ldx int, w *uint16, out *float32, ldo int)
}

// halfRows is how many rows of x a binary16 block kernel does at once.
const halfRows = 6

// Best is the fastest kernel this CPU runs, nil if none: every product
// is then gonum's.
var Best = func() *Kernel {
	if ks := Kernels(); len(ks) > 0 {
		return ks[0]
	}
	return nil
}()

// KernelName names k, "gonum" for nil.
func KernelName(k *Kernel) string {
	if k == nil {
		return "gonum"
	}
	return k.Name
}

// Packed is a k×c matrix for x·W products: row-major for gonum's kernel,
// else panels of Kernel.Width columns, each panel's k rows one after
// another, so a kernel reads its panel as one sequential stream.
type Packed struct {
	K, C int
	kern *Kernel // nil: row-major, multiplied by gonum's kernel
	data []float32
	// half holds the panels as binary16 instead of data, for a kernel
	// with blockHalf (see PackHalf).
	half []uint16
}

// Pack lays out the row-major k×c matrix w for kern; a matrix whose
// columns do not fill whole panels stays row-major, for gonum's kernel.
func Pack(w []float32, k, c int, kern *Kernel) Packed {
	return PackInto(make([]float32, len(w)), w, k, c, kern)
}

// PackInto is Pack into dst, which holds k×c floats; it returns w itself
// when w stays row-major.
func PackInto(dst, w []float32, k, c int, kern *Kernel) Packed {
	if len(w) != k*c {
		panic(fmt.Sprintf("linalg: a %d×%d matrix of %d floats", k, c, len(w)))
	}
	if kern == nil || c%kern.Width != 0 {
		return Packed{K: k, C: c, data: w}
	}
	return Packed{K: k, C: c, kern: kern, data: panels(dst[:0], w, k, c, kern.Width)}
}

// PackHalf is Pack of the row-major k×c matrix of IEEE 754 binary16
// values w, widened to float32. A kernel that reads binary16 panels (AVX2
// with F16C) keeps them so and widens each weight as it reads it: half
// the bytes to stream from memory for the same products, to the bit.
// Other kernels get the widened matrix, packed.
func PackHalf(w []uint16, k, c int, kern *Kernel) Packed {
	if len(w) != k*c {
		panic(fmt.Sprintf("linalg: a %d×%d matrix of %d values", k, c, len(w)))
	}
	if kern == nil || kern.blockHalf == nil || c%kern.Width != 0 {
		return Pack(Widen(w), k, c, kern)
	}
	return Packed{K: k, C: c, kern: kern, half: panels(make([]uint16, 0, len(w)), w, k, c, kern.Width)}
}

// panels appends the row-major k×c matrix w to dst as panels of width
// columns, each panel's k rows one after another.
func panels[T any](dst, w []T, k, c, width int) []T {
	for j := 0; j < c; j += width {
		for p := range k {
			dst = append(dst, w[p*c+j:p*c+j+width]...)
		}
	}
	return dst
}

// Widen returns the IEEE 754 binary16 values h as float32, exactly.
func Widen(h []uint16) []float32 {
	out := make([]float32, len(h))
	for i, v := range h {
		out[i] = widen(v)
	}
	return out
}

// widen returns the binary16 value h as float32.
func widen(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal
		for mant&0x400 == 0 {
			mant <<= 1
			exp--
		}
		exp++
		mant &= 0x3ff
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// Kernel is the kernel w is packed for, nil for gonum's.
func (w Packed) Kernel() *Kernel { return w.kern }

// MulAdd adds x·w to out, x being n×k and out n×c, both row-major.
func (w Packed) MulAdd(out, x []float32, n int) {
	k, c := w.K, w.C
	if len(x) < n*k || len(out) < n*c || len(w.data)+len(w.half) != k*c {
		panic(fmt.Sprintf("linalg: %d×%d by %d×%d into %d floats: sizes disagree", n, k, k, c, len(out)))
	}
	if n == 0 || k == 0 {
		return
	}
	if w.half != nil {
		w.mulAddHalf(out, x, n)
		return
	}
	if w.kern == nil {
		MulAdd(out, x, w.data, n, k, c)
		return
	}
	width := w.kern.Width
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

// mulAddHalf is MulAdd over binary16 panels. The rows left over by the
// blocks of six are done as one more block, of four rows when that takes
// them, copied into a workspace whose other rows are zero: a block of
// four costs about what one row would, a row's sums waiting on each
// other.
func (w Packed) mulAddHalf(out, x []float32, n int) {
	k, c, width := w.K, w.C, w.kern.Width
	full := n / halfRows * halfRows
	last := w.kern.blockHalf
	if n-full <= 4 {
		last = w.kern.blockHalf4
	}
	var tail []float32 // halfRows rows of x, then halfRows of out
	if full < n {
		buf := tails.Get().(*[]float32)
		defer tails.Put(buf)
		if size := halfRows * (k + width); cap(*buf) < size {
			*buf = make([]float32, size)
		}
		tail = (*buf)[:halfRows*(k+width)]
		clear(tail[copy(tail, x[full*k:n*k]) : halfRows*k])
	}
	for j := 0; j < c; j += width {
		panel := &w.half[j*k]
		for r := 0; r < full; r += halfRows {
			w.kern.blockHalf(k, &x[r*k], k, panel, &out[r*c+j], c)
		}
		if tail != nil {
			sums := tail[halfRows*k:]
			for r := full; r < n; r++ {
				copy(sums[(r-full)*width:], out[r*c+j:r*c+j+width])
			}
			last(k, &tail[0], k, panel, &sums[0], width)
			for r := full; r < n; r++ {
				copy(out[r*c+j:r*c+j+width], sums[(r-full)*width:])
			}
		}
	}
}

// tails holds mulAddHalf's workspaces.
var tails = sync.Pool{New: func() any { return new([]float32) }}

// MulAdd adds x·w to out by gonum's kernel: x is n×k, w is k×c and out
// n×c, all row-major.
func MulAdd(out, x, w []float32, n, k, c int) {
	blas32.Gemm(blas.NoTrans, blas.NoTrans, 1,
		blas32.General{Rows: n, Cols: k, Stride: k, Data: x},
		blas32.General{Rows: k, Cols: c, Stride: c, Data: w},
		1, blas32.General{Rows: n, Cols: c, Stride: c, Data: out})
}

// Dots sets scores[r] to the dot product of q and row r of m, a row-major
// matrix of len(scores) rows of len(q) floats, with kern (nil: gonum's).
// A row scores the same bits whichever rows it is scored with, here or by
// DotsRows: the kernel sums each row on its own, the rows left over by
// its blocks of four included.
func Dots(scores, m, q []float32, kern *Kernel) {
	rows, dims := len(scores), len(q)
	if len(m) != rows*dims {
		panic(fmt.Sprintf("linalg: %d rows of %d floats in %d", rows, dims, len(m)))
	}
	if rows == 0 {
		return
	}
	if !kern.takes(dims) {
		gemv(scores, m, q)
		return
	}
	r := 0
	for ; r+4 <= rows; r += 4 {
		kern.dots4(dims, &q[0], &m[r*dims], dims, &scores[r])
	}
	if r < rows {
		var block [4]int
		for i := range block {
			block[i] = min(r+i, rows-1)
		}
		var out [4]float32
		kern.dots4gather(out[:], make([]float32, 4*dims), m, block, q)
		copy(scores[r:], out[:rows-r])
	}
}

// DotsRows sets scores[i] to the dot product of q and row rows[i] of m, a
// row-major matrix of rows of len(q) floats: the bits Dots gives the row.
func DotsRows(scores, m []float32, rows []int, q []float32, kern *Kernel) {
	dims := len(q)
	if len(scores) != len(rows) || dims == 0 || len(m)%dims != 0 {
		panic(fmt.Sprintf("linalg: %d scores of %d rows of %d floats in %d", len(scores), len(rows), dims, len(m)))
	}
	n := len(m) / dims
	for _, r := range rows {
		if r < 0 || r >= n {
			panic(fmt.Sprintf("linalg: row %d of %d", r, n))
		}
	}
	if !kern.takes(dims) {
		for i, r := range rows {
			gemv(scores[i:i+1], m[r*dims:(r+1)*dims], q)
		}
		return
	}
	buf := make([]float32, 4*dims)
	for i := 0; i < len(rows); i += 4 {
		var block [4]int
		for j := range block {
			block[j] = rows[min(i+j, len(rows)-1)]
		}
		var out [4]float32
		kern.dots4gather(out[:], buf, m, block, q)
		copy(scores[i:], out[:min(4, len(rows)-i)])
	}
}

// takes reports whether kern scores rows of dims floats.
func (kern *Kernel) takes(dims int) bool { return kern != nil && dims > 0 && dims%kern.Lanes == 0 }

// dots4gather scores rows block of m against q into out, copying them
// together into buf, of 4·len(q) floats, for the kernel.
func (kern *Kernel) dots4gather(out, buf, m []float32, block [4]int, q []float32) {
	dims := len(q)
	for i, r := range block {
		copy(buf[i*dims:(i+1)*dims], m[r*dims:(r+1)*dims])
	}
	kern.dots4(dims, &q[0], &buf[0], dims, &out[0])
}

// gemv is Dots by gonum's kernel.
func gemv(scores, m, q []float32) {
	blas32.Gemv(blas.NoTrans, 1, blas32.General{Rows: len(scores), Cols: len(q), Stride: len(q), Data: m},
		blas32.Vector{N: len(q), Inc: 1, Data: q}, 0, blas32.Vector{N: len(scores), Inc: 1, Data: scores})
}

// parallelBytes is the size of matrix from which DotsParallel splits the
// scan: about 4,000 rows of 256 floats.
const parallelBytes = 4 << 20

// DotsParallel is Dots split by blocks of rows over up to GOMAXPROCS
// goroutines, for a matrix of parallelBytes or more: one scan of a large
// catalog is bound by memory bandwidth, which one core does not use up.
// A smaller matrix is scanned by the calling goroutine alone.
func DotsParallel(scores, m, q []float32, kern *Kernel) {
	if len(q) == 0 || len(m) != len(scores)*len(q) {
		Dots(scores, m, q, kern) // bounds are checked there
		return
	}
	dims := len(q)
	inParallel(len(scores), 4*len(m), func(lo, hi int) { Dots(scores[lo:hi], m[lo*dims:hi*dims], q, kern) })
}

// inParallel calls scan on blocks of rows that split rows between up to
// GOMAXPROCS goroutines, when the rows hold parallelBytes or more, and
// waits for them; else it calls scan(0, rows) itself.
func inParallel(rows, bytes int, scan func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), bytes/parallelBytes)
	if workers < 2 {
		scan(0, rows)
		return
	}
	per := (rows + workers - 1) / workers
	per = (per + 3) &^ 3 // whole blocks of four rows for the kernels
	var wg sync.WaitGroup
	for lo := 0; lo < rows; lo += per {
		hi := min(lo+per, rows)
		wg.Go(func() { scan(lo, hi) })
	}
	wg.Wait()
}

// blockBytes is how much of the matrix DotsBatch scores every query
// against before it goes on: a block that stays in a core's L2 cache, so
// the matrix is read from memory once for the whole batch.
const blockBytes = 256 << 10

// DotsBatch scores several queries against every row of m: scores is
// row-major, a row of len(m)/dims scores per query, and qs holds the
// queries, dims floats each, one after another. It is Dots per query,
// reading the matrix from memory once instead of once per query.
func DotsBatch(scores, m, qs []float32, dims int, kern *Kernel) {
	if dims <= 0 || len(m)%dims != 0 || len(qs)%dims != 0 {
		panic(fmt.Sprintf("linalg: %d and %d floats are not rows of %d", len(m), len(qs), dims))
	}
	rows, n := len(m)/dims, len(qs)/dims
	if len(scores) != n*rows {
		panic(fmt.Sprintf("linalg: %d queries against %d rows into %d scores", n, rows, len(scores)))
	}
	block := max(4, blockBytes/4/dims/4*4)
	for r := 0; r < rows; r += block {
		end := min(r+block, rows)
		for j := range n {
			Dots(scores[j*rows+r:j*rows+end], m[r*dims:end*dims], qs[j*dims:(j+1)*dims], kern)
		}
	}
}
