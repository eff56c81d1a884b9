package use

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// Every kernel this CPU runs agrees with gonum's on every shape: blocks
// of four rows and the rows left over, one panel and many, and widths
// that do not fill whole panels (left row-major, for gonum).
func TestKernelsAgreeWithGonum(t *testing.T) {
	ks := kernels()
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
					p := pack(w, k, c, kern)
					if (p.kern != nil) != (c%kern.width == 0) {
						t.Fatalf("%s: %d columns packed for %v", kern.name, c, p.kern)
					}
					p.mul(got, x, n)
					matmulGeneric(want, x, w, n, k, c)
					for i := range got {
						if d := math.Abs(float64(got[i] - want[i])); d > 1e-4*math.Max(1, math.Abs(float64(want[i]))) {
							t.Fatalf("%s n=%d k=%d c=%d: element %d is %g, gonum's %g", kern.name, n, k, c, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// A product whose sizes disagree panics before any kernel reads or
// writes past a slice: the assembly kernels check nothing themselves.
func TestKernelBoundsAreChecked(t *testing.T) {
	for _, kern := range append(kernels(), nil) {
		p := pack(make([]float32, 8*64), 8, 64, kern)
		for name, call := range map[string]func(){
			"short x":   func() { p.mul(make([]float32, 4*64), make([]float32, 4*8-1), 4) },
			"short out": func() { p.mul(make([]float32, 4*64-1), make([]float32, 4*8), 4) },
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%v: %s: no panic", kern, name)
					}
				}()
				call()
			}()
		}
	}
}

// The model uses the fastest kernel the CPU runs.
func TestLoadUsesTheFastestKernel(t *testing.T) {
	m, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	ks := kernels()
	if len(ks) > 0 && m.kern != ks[0] {
		t.Fatalf("kernel %v, want %s", m.kern, ks[0].name)
	}
	t.Logf("kernel: %v", kernelName(m.kern))
}

func kernelName(k *kernel) string {
	if k == nil {
		return "gonum"
	}
	return k.name
}

func random(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = r.Float32()*2 - 1
	}
	return s
}

// BenchmarkMatmul measures the dense layers' shapes for a 10- and a
// 53-token input, per kernel, in multiply-adds per second.
func BenchmarkMatmul(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, kern := range append(kernels(), nil) {
		for _, s := range [][3]int{{10, 512, 1536}, {10, 1536, 512}, {53, 512, 1536}} {
			n, k, c := s[0], s[1], s[2]
			x, out, p := random(r, n*k), make([]float32, n*c), pack(random(r, k*c), k, c, kern)
			b.Run(fmt.Sprintf("kernel=%s/%dx%dx%d", kernelName(kern), n, k, c), func(b *testing.B) {
				for b.Loop() {
					p.mul(out, x, n)
				}
				b.ReportMetric(float64(n*k*c)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
			})
		}
	}
}
