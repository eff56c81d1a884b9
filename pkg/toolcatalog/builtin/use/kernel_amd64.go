//go:build amd64

package use

import "golang.org/x/sys/cpu"

//go:noescape
func block512(k int, x *float32, ldx int, w *float32, out *float32, ldo int)

//go:noescape
func row512(k int, x *float32, w *float32, out *float32)

//go:noescape
func block256(k int, x *float32, ldx int, w *float32, out *float32, ldo int)

//go:noescape
func row256(k int, x *float32, w *float32, out *float32)

var (
	avx512 = &kernel{name: "avx512", width: 64, block: block512, row: row512}
	avx2   = &kernel{name: "avx2", width: 16, block: block256, row: row256}
)

// kernels lists the kernels this CPU runs, fastest first.
func kernels() []*kernel {
	var ks []*kernel
	if cpu.X86.HasAVX512F {
		ks = append(ks, avx512)
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ks = append(ks, avx2)
	}
	return ks
}
