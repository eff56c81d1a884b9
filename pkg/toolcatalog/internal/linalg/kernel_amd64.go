//go:build amd64

package linalg

import "golang.org/x/sys/cpu"

//go:noescape
func block512(k int, x *float32, ldx int, w *float32, out *float32, ldo int)

//go:noescape
func row512(k int, x *float32, w *float32, out *float32)

//go:noescape
func dots4x512(n int, q *float32, m *float32, ld int, out *float32)

//go:noescape
func dots4i8w(n int, q *int16, m *int8, ld int, out *float32)

//go:noescape
func block256(k int, x *float32, ldx int, w *float32, out *float32, ldo int)

//go:noescape
func row256(k int, x *float32, w *float32, out *float32)

//go:noescape
func dots4x256(n int, q *float32, m *float32, ld int, out *float32)

//go:noescape
func block4x256h(k int, x *float32, ldx int, w *uint16, out *float32, ldo int)

//go:noescape
func block6x256h(k int, x *float32, ldx int, w *uint16, out *float32, ldo int)

func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)

// hasF16C reports whether the CPU widens binary16 (CPUID leaf 1, ECX bit
// 29), which golang.org/x/sys/cpu does not say.
func hasF16C() bool {
	_, _, ecx, _ := cpuid(1, 0)
	return ecx&(1<<29) != 0
}

var (
	avx512 = &Kernel{Name: "avx512", Width: 64, Lanes: 16, block: block512, row: row512, dots4: dots4x512, dots4i8w: dots4i8w}
	avx2   = &Kernel{Name: "avx2", Width: 16, Lanes: 8, block: block256, row: row256, dots4: dots4x256, dots4i8w: dots4i8w}
	// avx2Half is avx2 with binary16 panels, for a CPU with F16C.
	avx2Half = func() *Kernel { k := *avx2; k.blockHalf, k.blockHalf4 = block6x256h, block4x256h; return &k }()
)

// Kernels lists the kernels this CPU runs, fastest first.
func Kernels() []*Kernel {
	var ks []*Kernel
	if cpu.X86.HasAVX512F {
		ks = append(ks, avx512)
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		if hasF16C() {
			ks = append(ks, avx2Half)
		} else {
			ks = append(ks, avx2)
		}
	}
	return ks
}
