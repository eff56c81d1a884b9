package linalg

import (
	"fmt"
	"math"
	"slices"
)

// Quantized is a matrix of rows of dims floats held as int8, a quarter of
// their bytes, with one scale per row: row r is about Scale(r)·data[r].
// Scoring a query against every row of a large matrix is bound by memory
// bandwidth, so a scan of the int8 rows takes about a quarter of the
// time. Its scores are approximate; Err bounds how far each is from the
// exact one, so a caller can find every row that may rank among the best
// and score only those exactly.
type Quantized struct {
	dims  int
	data  []int8
	scale []float32
	err   []float32
}

// Quantize returns the rows of m, a row-major matrix of rows of dims
// floats, as int8.
func Quantize(m []float32, dims int) *Quantized {
	if dims <= 0 || len(m)%dims != 0 {
		panic(fmt.Sprintf("linalg: %d floats are not rows of %d", len(m), dims))
	}
	qm := NewQuantized(dims, len(m)/dims)
	for r := 0; r < len(m); r += dims {
		qm.Append(m[r : r+dims])
	}
	return qm
}

// NewQuantized returns an empty Quantized of rows of dims floats, with
// room for rows rows.
func NewQuantized(dims, rows int) *Quantized {
	return &Quantized{dims: dims, data: make([]int8, 0, rows*dims), scale: make([]float32, 0, rows), err: make([]float32, 0, rows)}
}

// Rows is how many rows qm holds.
func (qm *Quantized) Rows() int { return len(qm.scale) }

// Bytes is the heap the rows take, with the room made for more.
func (qm *Quantized) Bytes() int64 {
	return int64(cap(qm.data)) + 4*int64(cap(qm.scale)+cap(qm.err))
}

// Append adds row, of dims floats, as the last row.
func (qm *Quantized) Append(row []float32) {
	qm.data = slices.Grow(qm.data, qm.dims)[:len(qm.data)+qm.dims]
	qm.scale, qm.err = append(qm.scale, 0), append(qm.err, 0)
	qm.Set(qm.Rows()-1, row)
}

// AppendFrom adds row r of src, of rows as long, as the last row.
func (qm *Quantized) AppendFrom(src *Quantized, r int) {
	if src.dims != qm.dims {
		panic(fmt.Sprintf("linalg: a row of %d values in rows of %d", src.dims, qm.dims))
	}
	qm.data = append(qm.data, src.data[r*qm.dims:(r+1)*qm.dims]...)
	qm.scale, qm.err = append(qm.scale, src.scale[r]), append(qm.err, src.err[r])
}

// Set quantizes row r from the dims floats of row: each value to the
// nearest of 255 levels spread evenly over ±max|row|.
func (qm *Quantized) Set(r int, row []float32) {
	if len(row) != qm.dims {
		panic(fmt.Sprintf("linalg: a row of %d floats in rows of %d", len(row), qm.dims))
	}
	var top float32
	for _, x := range row {
		// Not the builtin max, whose care for NaNs and signed zeros
		// takes most of the time of a row's quantization.
		if a := abs(x); a > top {
			top = a
		}
	}
	q := qm.data[r*qm.dims : (r+1)*qm.dims]
	scale := top / 127
	var residual, norm float64
	if scale > 0 {
		inv := 1 / scale
		for i, x := range row {
			v := x * inv                      // within ±127 and a rounding
			q[i] = int8(v + withSign(0.5, v)) // to the nearest, half away from 0
			d := float64(x) - float64(q[i])*float64(scale)
			residual += d * d
			norm += float64(x) * float64(x)
		}
	} else {
		clear(q)
	}
	qm.scale[r] = scale
	// A query q is scored as its rounding q' (see wideQuery), within
	// ε·‖q‖ of it, so by Cauchy–Schwarz row r scores within
	// ‖q'‖·‖row − scale·q[r]‖ + ε·‖q‖·‖row‖ of its exact score; the rest
	// covers the rounding of the float32 sums, of this scan and of an
	// exact one, each under dims·2⁻²³ of sums of magnitude about
	// ‖q‖·max(1, ‖row‖).
	eps, rowNorm := queryRounding(qm.dims), math.Sqrt(norm)
	qm.err[r] = float32((math.Sqrt(residual)*(1+eps)+rowNorm*eps)*(1+1e-6) + float64(qm.dims)*4e-7*max(1, rowNorm))
}

// Move copies row src over row dst.
func (qm *Quantized) Move(dst, src int) {
	copy(qm.data[dst*qm.dims:(dst+1)*qm.dims], qm.data[src*qm.dims:(src+1)*qm.dims])
	qm.scale[dst], qm.err[dst] = qm.scale[src], qm.err[src]
}

// Truncate keeps the first rows rows.
func (qm *Quantized) Truncate(rows int) {
	qm.data, qm.scale, qm.err = qm.data[:rows*qm.dims], qm.scale[:rows], qm.err[:rows]
}

// Err bounds how far row r's score from Dots is from the exact float32
// product with a query of norm 1; scale it by the norm for other queries.
func (qm *Quantized) Err(r int) float32 { return qm.err[r] }

// Dots sets scores[r] to the approximate dot product of q and row r, for
// every row, with kern (nil: portable Go), split over goroutines as
// DotsParallel is for a large matrix.
func (qm *Quantized) Dots(scores, q []float32, kern *Kernel) {
	if len(q) != qm.dims || len(scores) != qm.Rows() {
		panic(fmt.Sprintf("linalg: %d scores of rows of %d floats against %d rows of %d", len(scores), len(q), qm.Rows(), qm.dims))
	}
	wide, step := wideQuery(q)
	// An int8 scan is split as a float scan of the same rows would be: a
	// value costs it about what a float costs the float kernel.
	inParallel(len(scores), 4*len(qm.data), func(lo, hi int) { qm.dots(scores[lo:hi], wide, step, lo, kern) })
}

// DotsRows sets scores[i] to the approximate dot product of q and row
// rows[i], with kern: the very value Dots gives the row.
func (qm *Quantized) DotsRows(scores []float32, rows []int, q []float32, kern *Kernel) {
	if len(q) != qm.dims || len(scores) != len(rows) {
		panic(fmt.Sprintf("linalg: %d scores of %d rows of %d floats against rows of %d", len(scores), len(rows), len(q), qm.dims))
	}
	wide, step := wideQuery(q)
	for i, r := range rows {
		qm.dots(scores[i:i+1], wide, step, r, kern)
	}
}

// Row sets dst to row r as its int8 values stand for, scale·data[r],
// and returns it.
func (qm *Quantized) Row(dst []float32, r int) []float32 {
	dst = slices.Grow(dst[:0], qm.dims)[:qm.dims]
	for i, v := range qm.data[r*qm.dims : (r+1)*qm.dims] {
		dst[i] = float32(v) * qm.scale[r]
	}
	return dst
}

// wideMax is the largest magnitude of a query value rounded to int16: the
// int32 sums of dots4i8w stay under 2³¹ for rows of up to wideDims values.
const (
	wideMax  = 8191
	wideDims = 16384
)

// wideQuery rounds q to int16 values wide[i] ≈ q[i]/step, the largest
// magnitude wideMax. Each is within step/2 (and a float32 rounding) of
// q[i]/step, so the rounded query is within queryRounding(len(q))·‖q‖ of q.
func wideQuery(q []float32) (wide []int16, step float32) {
	var top float32
	for _, x := range q {
		top = max(top, abs(x))
	}
	wide = make([]int16, len(q))
	if top == 0 {
		return wide, 0
	}
	step = top / wideMax
	inv := 1 / step
	for i, x := range q {
		v := min(max(x*inv, -wideMax), wideMax)
		wide[i] = int16(v + withSign(0.5, v))
	}
	return wide, step
}

// queryRounding bounds ‖q − step·wide‖/‖q‖ for a query of dims values
// rounded by wideQuery: √dims half-steps, a step at most ‖q‖/wideMax,
// with room for the float32 rounding of q[i]/step.
func queryRounding(dims int) float64 { return 0.501 * math.Sqrt(float64(dims)) / wideMax }

// dots scores rows from first on, as many as scores holds, against the
// query wide·step.
func (qm *Quantized) dots(scores []float32, wide []int16, step float32, first int, kern *Kernel) {
	dims := qm.dims
	if kern != nil && kern.dots4i8w != nil && dims%16 == 0 && dims <= wideDims {
		r := 0
		for ; r+4 <= len(scores); r += 4 {
			kern.dots4i8w(dims, &wide[0], &qm.data[(first+r)*dims], dims, &scores[r])
		}
		if r < len(scores) {
			// The last rows, in a block of four with the rows after
			// them, or padded: the kernel sums every row, whatever block
			// it falls in, to the same float (its sums are in float32,
			// in its own order).
			var block [4]float32
			rows := qm.data[(first+r)*dims:]
			if len(rows) < 4*dims {
				rows = make([]int8, 4*dims)
				copy(rows, qm.data[(first+r)*dims:(first+len(scores))*dims])
			}
			kern.dots4i8w(dims, &wide[0], &rows[0], dims, &block[0])
			copy(scores[r:], block[:])
		}
	} else {
		for r := range scores {
			var s int64
			for i, v := range qm.data[(first+r)*dims : (first+r+1)*dims] {
				s += int64(wide[i]) * int64(v)
			}
			scores[r] = float32(s)
		}
	}
	for r := range scores {
		scores[r] *= step * qm.scale[first+r]
	}
}

// abs and withSign are math.Abs and math.Copysign for float32, without a
// branch a random sign would mispredict.
func abs(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }

func withSign(x, sign float32) float32 {
	return math.Float32frombits(math.Float32bits(x)&^(1<<31) | math.Float32bits(sign)&(1<<31))
}
