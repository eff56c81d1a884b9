package linalg

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// Every kernel this CPU runs agrees with gonum's on every shape: blocks
// of four rows and the rows left over, one panel and many, and widths
// that do not fill whole panels (left row-major, for gonum).
func TestMulAddAgreesWithGonum(t *testing.T) {
	ks := Kernels()
	if len(ks) == 0 {
		t.Log("no vector kernel on this CPU: every product is gonum's")
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, kern := range ks {
		for _, n := range []int{1, 3, 4, 5, 10, 53} {
			for _, k := range []int{1, 7, 64, 256} {
				for _, c := range []int{16, 17, 64, 70, 128, 512} {
					x, w, bias := random(r, n*k), random(r, k*c), random(r, n*c)
					got, want := append([]float32(nil), bias...), append([]float32(nil), bias...)
					p := Pack(w, k, c, kern)
					if (p.Kernel() != nil) != (c%kern.Width == 0) {
						t.Fatalf("%s: %d columns packed for %s", kern.Name, c, KernelName(p.Kernel()))
					}
					p.MulAdd(got, x, n)
					MulAdd(want, x, w, n, k, c)
					agree(t, fmt.Sprintf("%s n=%d k=%d c=%d", kern.Name, n, k, c), got, want)
				}
			}
		}
	}
}

// Binary16 panels give the products of the widened matrix packed as
// float32, to the bit, for every kernel and gonum's: whole blocks of rows
// and the rows left over, and columns that fill no whole panel.
func TestPackHalfIsPackOfTheWidenedMatrix(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	halves := 0
	for _, kern := range append(Kernels(), nil) {
		for _, n := range []int{1, 2, 5, 6, 7, 10, 12, 53} {
			for _, k := range []int{1, 7, 256} {
				for _, c := range []int{16, 17, 64, 512} {
					w := make([]uint16, k*c)
					for i := range w {
						// Normal values of weights' size and some subnormal ones.
						w[i] = uint16(r.IntN(0x7800)) | uint16(r.IntN(2))<<15
					}
					x, bias := random(r, n*k), random(r, n*c)
					got, want := append([]float32(nil), bias...), append([]float32(nil), bias...)
					p := PackHalf(w, k, c, kern)
					if p.half != nil {
						halves++
					}
					p.MulAdd(got, x, n)
					Pack(Widen(w), k, c, kern).MulAdd(want, x, n)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s n=%d k=%d c=%d: [%d] = %g, widened %g", KernelName(kern), n, k, c, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
	if hasHalf := slices.ContainsFunc(Kernels(), func(k *Kernel) bool { return k.blockHalf != nil }); hasHalf != (halves > 0) {
		t.Fatalf("%d products over binary16 panels; a kernel with them: %t", halves, hasHalf)
	}
}

// Every binary16 value, zeros, subnormals, infinities and NaNs included,
// widens to the float32 the CPU's conversion gives.
func TestWidenEveryHalf(t *testing.T) {
	w := make([]uint16, 1<<16)
	for i := range w {
		w[i] = uint16(i)
	}
	wide := Widen(w)
	for _, kern := range Kernels() {
		if kern.blockHalf == nil {
			continue
		}
		// x = 1 with sums of zero: each sum is one product, the weight.
		out := make([]float32, halfRows*len(w))
		x := []float32{1, 1, 1, 1, 1, 1}
		PackHalf(w, 1, len(w), kern).MulAdd(out, x, halfRows)
		for i, h := range w {
			got, want := out[i], wide[i]
			if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) && !(got == 0 && want == 0) {
				t.Fatalf("%s: binary16 %#04x widened to %g (%#08x), the CPU's %g (%#08x)", kern.Name, h, want, math.Float32bits(want), got, math.Float32bits(got))
			}
		}
	}
	for h, want := range map[uint16]float32{0x3c00: 1, 0xc000: -2, 0x7bff: 65504, 0x0001: 0x1p-24, 0x0400: 0x1p-14, 0x3555: 0.33325195} {
		if got := wide[h]; got != want {
			t.Errorf("binary16 %#04x widened to %g, want %g", h, got, want)
		}
	}
}

// Row scores agree with gonum's for every kernel, whole blocks of four
// rows and the rows left over, and lengths the kernel does not take.
func TestDotsAgreeWithGonum(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, kern := range Kernels() {
		for _, rows := range []int{1, 4, 7, 64, 1001} {
			for _, dims := range []int{8, 12, 16, 256, 300, 512} {
				m, q := random(r, rows*dims), random(r, dims)
				got, want := make([]float32, rows), make([]float32, rows)
				Dots(got, m, q, kern)
				Dots(want, m, q, nil)
				agree(t, fmt.Sprintf("%s rows=%d dims=%d", kern.Name, rows, dims), got, want)
			}
		}
	}
}

// Int8 scores are each within the row's Err of the exact float32 score,
// for every kernel and the portable loop, in blocks of four rows and the
// rows left over, split over goroutines or not, for unit rows as a
// catalog holds and for a row of zeros; and the bound is not so loose
// that it says nothing.
func TestQuantizedScoresAreWithinTheirBound(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, kern := range append(Kernels(), nil) {
		for _, rows := range []int{1, 5, 64, 20001} {
			for _, dims := range []int{8, 12, 16, 24, 48, 256} {
				m := random(r, rows*dims)
				for row := range rows {
					unit(m[row*dims : (row+1)*dims])
				}
				clear(m[:dims]) // a row of zeros scores 0, exactly
				qm := Quantize(m, dims)
				for range 3 {
					q := unit(random(r, dims))
					got, want := make([]float32, rows), make([]float32, rows)
					qm.Dots(got, q, kern)
					Dots(want, m, q, nil)
					var worst float64
					for row := range rows {
						off := math.Abs(float64(got[row] - want[row]))
						if off > float64(qm.Err(row)) {
							t.Fatalf("%s rows=%d dims=%d: row %d scores %g, exactly %g: off by more than its bound %g",
								KernelName(kern), rows, dims, row, got[row], want[row], qm.Err(row))
						}
						worst = max(worst, float64(qm.Err(row)))
					}
					if got[0] != 0 {
						t.Fatalf("%s: a row of zeros scores %g", KernelName(kern), got[0])
					}
					if dims == 256 && worst > 0.02 {
						t.Fatalf("%s dims=%d: bound %g, looser than int8 rounding allows", KernelName(kern), dims, worst)
					}
				}
			}
		}
	}
}

// The int32 sums of the int16 query scan do not overflow at the largest
// vectors a catalog takes, for the query and row that make them largest:
// every value at its largest magnitude, the signs alike.
func TestQuantizedScanOfTheLargestSumsDoesNotOverflow(t *testing.T) {
	for _, kern := range append(Kernels(), nil) {
		for _, dims := range []int{wideDims, wideDims + 16} {
			row, q := make([]float32, dims), make([]float32, dims)
			for i := range row {
				row[i], q[i] = 1/float32(math.Sqrt(float64(dims))), -1/float32(math.Sqrt(float64(dims)))
			}
			qm := Quantize(slices.Concat(row, row, row, row), dims)
			got := make([]float32, 4)
			qm.Dots(got, q, kern)
			for r, s := range got {
				if math.Abs(float64(s)+1) > float64(qm.Err(r)) {
					t.Fatalf("%s dims=%d: row %d scores %g, exactly -1 (bound %g)", KernelName(kern), dims, r, s, qm.Err(r))
				}
			}
		}
	}
}

// Moving and dropping rows keeps each row's values, scale and bound.
func TestQuantizedMoveAndTruncate(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	m := random(r, 5*16)
	qm, want := Quantize(m, 16), Quantize(append(append([]float32(nil), m[:16]...), m[48:64]...), 16)
	qm.Move(1, 3)
	qm.Truncate(2)
	q := random(r, 16)
	got, exp := make([]float32, 2), make([]float32, 2)
	qm.Dots(got, q, nil)
	want.Dots(exp, q, nil)
	if got[0] != exp[0] || got[1] != exp[1] || qm.Err(1) != want.Err(1) || qm.Rows() != 2 {
		t.Fatalf("rows 0 and 3 kept score %v with bound %g, want %v with %g", got, qm.Err(1), exp, want.Err(1))
	}
}

func unit(v []float32) []float32 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	for i := range v {
		v[i] = float32(float64(v[i]) / math.Sqrt(n))
	}
	return v
}

// A row scores the same bits whichever rows it is scored with: in Dots's
// blocks of four, among the rows they leave over, or picked out by
// DotsRows, repeated and in any order.
func TestDotsRowsScoreEachRowAsDots(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, kern := range append(Kernels(), nil) {
		for _, rows := range []int{1, 3, 6, 9, 1001} {
			for _, dims := range []int{8, 12, 256} {
				m, q := random(r, rows*dims), random(r, dims)
				want := make([]float32, rows)
				Dots(want, m, q, kern)
				picked := r.Perm(rows)
				picked = append(picked, picked[0])
				got := make([]float32, len(picked))
				DotsRows(got, m, picked, q, kern)
				for i, row := range picked {
					if got[i] != want[row] {
						t.Fatalf("%s rows=%d dims=%d: row %d scores %g picked, %g by Dots", KernelName(kern), rows, dims, row, got[i], want[row])
					}
				}
				if rows > 4 {
					tail := make([]float32, rows-4)
					Dots(tail, m[4*dims:], q, kern)
					for i := range tail {
						if tail[i] != want[4+i] {
							t.Fatalf("%s rows=%d dims=%d: row %d scores %g from row 4 on, %g from row 0", KernelName(kern), rows, dims, 4+i, tail[i], want[4+i])
						}
					}
				}
			}
		}
	}
}

// An int8 row scores the same bits whichever rows it is scored with: in
// a scan's blocks of four, among the rows a scan or its goroutines leave
// over, or picked out by DotsRows, repeated and in any order; and Row is
// the values the scores are of.
func TestQuantizedDotsRowsScoreEachRowAsDots(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	r := rand.New(rand.NewPCG(13, 14))
	for _, kern := range append(Kernels(), nil) {
		for _, rows := range []int{1, 3, 6, 9, 1001, 3*parallelBytes/4/256 + 7} {
			for _, dims := range []int{16, 48, 256} {
				m, q := random(r, rows*dims), random(r, dims)
				for row := 0; row < rows; row += 2 {
					// Rows near the query: their sums pass 2²⁴, where
					// float32 sums round.
					for i := range dims {
						m[row*dims+i] = q[i] + m[row*dims+i]/8
					}
				}
				qm := Quantize(m, dims)
				want := make([]float32, rows)
				qm.Dots(want, q, kern)
				picked := r.Perm(rows)
				picked = append(picked, picked[0])
				got := make([]float32, len(picked))
				qm.DotsRows(got, picked, q, kern)
				for i, row := range picked {
					if got[i] != want[row] {
						t.Fatalf("%s rows=%d dims=%d: row %d scores %g picked, %g by Dots", KernelName(kern), rows, dims, row, got[i], want[row])
					}
				}
				if rows > 5 {
					tail := make([]float32, rows-5)
					Quantize(m[5*dims:], dims).Dots(tail, q, kern)
					for i := range tail {
						if tail[i] != want[5+i] {
							t.Fatalf("%s rows=%d dims=%d: row %d scores %g from row 5 on, %g from row 0", KernelName(kern), rows, dims, 5+i, tail[i], want[5+i])
						}
					}
				}
				row := qm.Row(nil, rows-1)
				var dot float64
				for i := range row {
					dot += float64(row[i]) * float64(q[i])
				}
				if math.Abs(dot-float64(want[rows-1])) > float64(qm.Err(rows-1))*math.Sqrt(float64(dims)) {
					t.Fatalf("%s rows=%d dims=%d: Row's values score %g, Dots %g", KernelName(kern), rows, dims, dot, want[rows-1])
				}
			}
		}
	}
}

// Batched scores are each query's Dots, whatever the rows left over by
// the blocks.
func TestDotsBatchIsDotsPerQuery(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, kern := range append(Kernels(), nil) {
		for _, rows := range []int{1, 5, 300, 1031} {
			for _, n := range []int{1, 3, 32} {
				dims := 256
				m, qs := random(r, rows*dims), random(r, n*dims)
				got := make([]float32, n*rows)
				DotsBatch(got, m, qs, dims, kern)
				for j := range n {
					want := make([]float32, rows)
					Dots(want, m, qs[j*dims:(j+1)*dims], kern)
					agree(t, fmt.Sprintf("%s rows=%d query %d of %d", KernelName(kern), rows, j, n), got[j*rows:(j+1)*rows], want)
				}
			}
		}
	}
}

// A scan split over goroutines gives every row the score one goroutine
// gives it: the rows of each block, the remainder and the last block's
// ragged end included.
func TestDotsParallelIsDots(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	r := rand.New(rand.NewPCG(7, 8))
	dims := 256
	for _, kern := range append(Kernels(), nil) {
		for _, rows := range []int{3, 4096, parallelBytes/4/dims + 1, 3*parallelBytes/4/dims + 7} {
			m, q := random(r, rows*dims), random(r, dims)
			got, want := make([]float32, rows), make([]float32, rows)
			for i := range got {
				got[i] = float32(math.NaN()) // a row no goroutine scored stays NaN
			}
			DotsParallel(got, m, q, kern)
			Dots(want, m, q, kern)
			agree(t, fmt.Sprintf("%s rows=%d", KernelName(kern), rows), got, want)
		}
	}
}

func agree(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range got {
		if d := math.Abs(float64(got[i] - want[i])); !(d <= 1e-4*math.Max(1, math.Abs(float64(want[i])))) { // NaN fails too
			t.Fatalf("%s: element %d is %g, gonum's %g", what, i, got[i], want[i])
		}
	}
}

// A product whose sizes disagree panics before any kernel reads or
// writes past a slice: the assembly kernels check nothing themselves.
func TestBoundsAreChecked(t *testing.T) {
	for _, kern := range append(Kernels(), nil) {
		p := Pack(make([]float32, 8*64), 8, 64, kern)
		for name, call := range map[string]func(){
			"short x":       func() { p.MulAdd(make([]float32, 4*64), make([]float32, 4*8-1), 4) },
			"short out":     func() { p.MulAdd(make([]float32, 4*64-1), make([]float32, 4*8), 4) },
			"short matrix":  func() { Dots(make([]float32, 4), make([]float32, 4*16-1), make([]float32, 16), kern) },
			"short weights": func() { Pack(make([]float32, 8*64-1), 8, 64, kern) },
			"short halves":  func() { PackHalf(make([]uint16, 8*64-1), 8, 64, kern) },
			"short x, halves": func() {
				PackHalf(make([]uint16, 8*64), 8, 64, kern).MulAdd(make([]float32, 7*64), make([]float32, 7*8-1), 7)
			},
			"short scores": func() { DotsBatch(make([]float32, 2*4-1), make([]float32, 4*16), make([]float32, 2*16), 16, kern) },
			"ragged batch": func() { DotsBatch(make([]float32, 2*4), make([]float32, 4*16), make([]float32, 2*16-1), 16, kern) },
			"short parallel": func() {
				DotsParallel(make([]float32, parallelBytes/64), make([]float32, parallelBytes/4-1), make([]float32, 16), kern)
			},
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s: %s: no panic", KernelName(kern), name)
					}
				}()
				call()
			}()
		}
	}
}

// The fastest kernel the CPU runs is the one used by default.
func TestBestIsTheFastestKernel(t *testing.T) {
	if ks := Kernels(); len(ks) > 0 && Best != ks[0] {
		t.Fatalf("best kernel %s, want %s", KernelName(Best), ks[0].Name)
	}
	t.Logf("kernel: %s", KernelName(Best))
}

func random(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = r.Float32()*2 - 1
	}
	return s
}

// BenchmarkMulAdd measures the builtin model's dense layers for a 10- and
// a 53-token input, per kernel, over float32 and binary16 panels, in
// multiply-adds per second.
func BenchmarkMulAdd(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, kern := range append(Kernels(), nil) {
		for _, s := range [][3]int{{10, 512, 1536}, {10, 1536, 512}, {53, 512, 1536}} {
			n, k, c := s[0], s[1], s[2]
			x, out, w := random(r, n*k), make([]float32, n*c), random(r, k*c)
			half := make([]uint16, len(w))
			for i := range half {
				half[i] = uint16(r.IntN(0x7800)) | uint16(r.IntN(2))<<15
			}
			for name, p := range map[string]Packed{"float32": Pack(w, k, c, kern), "binary16": PackHalf(half, k, c, kern)} {
				b.Run(fmt.Sprintf("kernel=%s/%s/%dx%dx%d", KernelName(kern), name, n, k, c), func(b *testing.B) {
					for b.Loop() {
						p.MulAdd(out, x, n)
					}
					b.ReportMetric(float64(n*k*c)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
				})
			}
		}
	}
}

// BenchmarkDots measures scoring a query against every tool of a 50,000-
// tool catalog, per kernel, in bytes of vectors read per second, and a
// grading's batch of 32 queries, one at a time and together.
func BenchmarkDots(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, kern := range append(Kernels(), nil) {
		for _, dims := range []int{256, 512} {
			rows := 50000
			m, q, scores := random(r, rows*dims), random(r, dims), make([]float32, rows)
			b.Run(fmt.Sprintf("kernel=%s/rows=%d/dims=%d", KernelName(kern), rows, dims), func(b *testing.B) {
				for b.Loop() {
					Dots(scores, m, q, kern)
				}
				b.ReportMetric(float64(len(m)*4)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
			qm := Quantize(m, dims)
			b.Run(fmt.Sprintf("kernel=%s/rows=%d/dims=%d/int8", KernelName(kern), rows, dims), func(b *testing.B) {
				for b.Loop() {
					qm.Dots(scores, q, kern)
				}
				b.ReportMetric(float64(len(m))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
			b.Run(fmt.Sprintf("kernel=%s/rows=%d/dims=%d/parallel", KernelName(kern), rows, dims), func(b *testing.B) {
				for b.Loop() {
					DotsParallel(scores, m, q, kern)
				}
				b.ReportMetric(float64(len(m)*4)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
			qs, batch := random(r, 32*dims), make([]float32, 32*rows)
			b.Run(fmt.Sprintf("kernel=%s/rows=%d/dims=%d/batch=32/one-by-one", KernelName(kern), rows, dims), func(b *testing.B) {
				for b.Loop() {
					for j := range 32 {
						Dots(batch[j*rows:(j+1)*rows], m, qs[j*dims:(j+1)*dims], kern)
					}
				}
			})
			b.Run(fmt.Sprintf("kernel=%s/rows=%d/dims=%d/batch=32/blocked", KernelName(kern), rows, dims), func(b *testing.B) {
				for b.Loop() {
					DotsBatch(batch, m, qs, dims, kern)
				}
			})
		}
	}
}
