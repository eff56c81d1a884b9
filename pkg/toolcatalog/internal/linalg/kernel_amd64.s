//go:build amd64

#include "textflag.h"

// Matrix kernels over weights packed in panels (see Pack in linalg.go):
// out[r][0:width] += Σ_p x[r][p] · w[p][0:width] for a panel of width
// columns whose k rows lie one after another. A block kernel does four
// rows of x, keeping their accumulators in registers while each row of
// the panel is read once; a row kernel does one. Accumulators are the
// destination of VFMADD231PS, so no register is copied in the loop.
// Each ends with VZEROUPPER: legacy SSE code that runs next (math.Exp's,
// for one) pays no AVX-SSE transition.
//
// The Go code checks every bound before calling them (linalg.go).

// HALFARGS loads the arguments of a binary16 block kernel (block6x256h,
// block4x256h): k in CX, rows of x at SI, SI+R8, R11 and R11+R8 (R8 the
// row stride in bytes), the panel at DI, the sums at DX and AX (R10 their
// row stride in bytes). It stands before any TEXT, where vet's argument
// check reads it as no function's.
#define HALFARGS \
	MOVQ k+0(FP), CX; \
	MOVQ x+8(FP), SI; \
	MOVQ ldx+16(FP), R8; \
	MOVQ w+24(FP), DI; \
	MOVQ out+32(FP), DX; \
	MOVQ ldo+40(FP), R10; \
	SHLQ $2, R8; \
	SHLQ $2, R10; \
	LEAQ (SI)(R8*2), R11; \
	MOVQ DX, AX

// STORE4SUMS writes the totals of the eight-float sums in Y0–Y3, one
// row's each, to the four floats at DX: pairwise sums leave row r's total
// in lane r of each 128-bit half.
#define STORE4SUMS \
	VHADDPS Y1, Y0, Y0; \
	VHADDPS Y3, Y2, Y2; \
	VHADDPS Y2, Y0, Y0; \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS X1, X0, X0; \
	VMOVUPS X0, (DX)

// AVX-512: panels of 64 columns, four 16-float vectors per row.

// func block512(k int, x *float32, ldx int, w *float32, out *float32, ldo int)
TEXT ·block512(SB), NOSPLIT, $0-48
	MOVQ k+0(FP), CX
	MOVQ x+8(FP), SI
	MOVQ ldx+16(FP), R8
	MOVQ w+24(FP), DI
	MOVQ out+32(FP), DX
	MOVQ ldo+40(FP), R10
	SHLQ $2, R8
	SHLQ $2, R10
	LEAQ (SI)(R8*1), R11
	LEAQ (R11)(R8*1), R12
	LEAQ (R12)(R8*1), R13
	MOVQ DX, AX
	VMOVUPS 0(AX), Z0
	VMOVUPS 64(AX), Z1
	VMOVUPS 128(AX), Z2
	VMOVUPS 192(AX), Z3
	ADDQ R10, AX
	VMOVUPS 0(AX), Z4
	VMOVUPS 64(AX), Z5
	VMOVUPS 128(AX), Z6
	VMOVUPS 192(AX), Z7
	ADDQ R10, AX
	VMOVUPS 0(AX), Z8
	VMOVUPS 64(AX), Z9
	VMOVUPS 128(AX), Z10
	VMOVUPS 192(AX), Z11
	ADDQ R10, AX
	VMOVUPS 0(AX), Z12
	VMOVUPS 64(AX), Z13
	VMOVUPS 128(AX), Z14
	VMOVUPS 192(AX), Z15
block512_loop:
	VMOVUPS 0(DI), Z16
	VMOVUPS 64(DI), Z17
	VMOVUPS 128(DI), Z18
	VMOVUPS 192(DI), Z19
	VBROADCASTSS (SI), Z20
	VFMADD231PS Z20, Z16, Z0
	VFMADD231PS Z20, Z17, Z1
	VFMADD231PS Z20, Z18, Z2
	VFMADD231PS Z20, Z19, Z3
	VBROADCASTSS (R11), Z21
	VFMADD231PS Z21, Z16, Z4
	VFMADD231PS Z21, Z17, Z5
	VFMADD231PS Z21, Z18, Z6
	VFMADD231PS Z21, Z19, Z7
	VBROADCASTSS (R12), Z22
	VFMADD231PS Z22, Z16, Z8
	VFMADD231PS Z22, Z17, Z9
	VFMADD231PS Z22, Z18, Z10
	VFMADD231PS Z22, Z19, Z11
	VBROADCASTSS (R13), Z23
	VFMADD231PS Z23, Z16, Z12
	VFMADD231PS Z23, Z17, Z13
	VFMADD231PS Z23, Z18, Z14
	VFMADD231PS Z23, Z19, Z15
	ADDQ $4, SI
	ADDQ $4, R11
	ADDQ $4, R12
	ADDQ $4, R13
	ADDQ $256, DI
	DECQ CX
	JNZ block512_loop
	MOVQ DX, AX
	VMOVUPS Z0, 0(AX)
	VMOVUPS Z1, 64(AX)
	VMOVUPS Z2, 128(AX)
	VMOVUPS Z3, 192(AX)
	ADDQ R10, AX
	VMOVUPS Z4, 0(AX)
	VMOVUPS Z5, 64(AX)
	VMOVUPS Z6, 128(AX)
	VMOVUPS Z7, 192(AX)
	ADDQ R10, AX
	VMOVUPS Z8, 0(AX)
	VMOVUPS Z9, 64(AX)
	VMOVUPS Z10, 128(AX)
	VMOVUPS Z11, 192(AX)
	ADDQ R10, AX
	VMOVUPS Z12, 0(AX)
	VMOVUPS Z13, 64(AX)
	VMOVUPS Z14, 128(AX)
	VMOVUPS Z15, 192(AX)
	VZEROUPPER
	RET

// func row512(k int, x *float32, w *float32, out *float32)
TEXT ·row512(SB), NOSPLIT, $0-32
	MOVQ k+0(FP), CX
	MOVQ x+8(FP), SI
	MOVQ w+16(FP), DI
	MOVQ out+24(FP), DX
	VMOVUPS 0(DX), Z0
	VMOVUPS 64(DX), Z1
	VMOVUPS 128(DX), Z2
	VMOVUPS 192(DX), Z3
row512_loop:
	VBROADCASTSS (SI), Z8
	VFMADD231PS 0(DI), Z8, Z0
	VFMADD231PS 64(DI), Z8, Z1
	VFMADD231PS 128(DI), Z8, Z2
	VFMADD231PS 192(DI), Z8, Z3
	ADDQ $4, SI
	ADDQ $256, DI
	DECQ CX
	JNZ row512_loop
	VMOVUPS Z0, 0(DX)
	VMOVUPS Z1, 64(DX)
	VMOVUPS Z2, 128(DX)
	VMOVUPS Z3, 192(DX)
	VZEROUPPER
	RET

// func dots4x512(n int, q *float32, m *float32, ld int, out *float32)
// out[r] = Σ_i q[i]·m[r·ld+i] for four rows r, n a multiple of 16.
TEXT ·dots4x512(SB), NOSPLIT, $0-40
	MOVQ n+0(FP), CX
	MOVQ q+8(FP), SI
	MOVQ m+16(FP), DI
	MOVQ ld+24(FP), R8
	MOVQ out+32(FP), DX
	SHLQ $2, R8
	LEAQ (DI)(R8*1), R9
	LEAQ (R9)(R8*1), R10
	LEAQ (R10)(R8*1), R11
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	XORQ AX, AX
dots4x512_loop:
	VMOVUPS (SI)(AX*4), Z4
	VFMADD231PS (DI)(AX*4), Z4, Z0
	VFMADD231PS (R9)(AX*4), Z4, Z1
	VFMADD231PS (R10)(AX*4), Z4, Z2
	VFMADD231PS (R11)(AX*4), Z4, Z3
	ADDQ $16, AX
	CMPQ AX, CX
	JLT dots4x512_loop
	// Halve each 512-bit sum to 256 bits, then reduce as AVX2 does.
	VEXTRACTF64X4 $1, Z0, Y4
	VADDPS Y4, Y0, Y0
	VEXTRACTF64X4 $1, Z1, Y5
	VADDPS Y5, Y1, Y1
	VEXTRACTF64X4 $1, Z2, Y6
	VADDPS Y6, Y2, Y2
	VEXTRACTF64X4 $1, Z3, Y7
	VADDPS Y7, Y3, Y3
	STORE4SUMS
	VZEROUPPER
	RET

// AVX2 with FMA: panels of 16 columns, two 8-float vectors per row.

// func block256(k int, x *float32, ldx int, w *float32, out *float32, ldo int)
TEXT ·block256(SB), NOSPLIT, $0-48
	MOVQ k+0(FP), CX
	MOVQ x+8(FP), SI
	MOVQ ldx+16(FP), R8
	MOVQ w+24(FP), DI
	MOVQ out+32(FP), DX
	MOVQ ldo+40(FP), R10
	SHLQ $2, R8
	SHLQ $2, R10
	LEAQ (SI)(R8*1), R11
	LEAQ (R11)(R8*1), R12
	LEAQ (R12)(R8*1), R13
	MOVQ DX, AX
	VMOVUPS 0(AX), Y0
	VMOVUPS 32(AX), Y1
	ADDQ R10, AX
	VMOVUPS 0(AX), Y2
	VMOVUPS 32(AX), Y3
	ADDQ R10, AX
	VMOVUPS 0(AX), Y4
	VMOVUPS 32(AX), Y5
	ADDQ R10, AX
	VMOVUPS 0(AX), Y6
	VMOVUPS 32(AX), Y7
block256_loop:
	VMOVUPS 0(DI), Y8
	VMOVUPS 32(DI), Y9
	VBROADCASTSS (SI), Y10
	VFMADD231PS Y10, Y8, Y0
	VFMADD231PS Y10, Y9, Y1
	VBROADCASTSS (R11), Y10
	VFMADD231PS Y10, Y8, Y2
	VFMADD231PS Y10, Y9, Y3
	VBROADCASTSS (R12), Y10
	VFMADD231PS Y10, Y8, Y4
	VFMADD231PS Y10, Y9, Y5
	VBROADCASTSS (R13), Y10
	VFMADD231PS Y10, Y8, Y6
	VFMADD231PS Y10, Y9, Y7
	ADDQ $4, SI
	ADDQ $4, R11
	ADDQ $4, R12
	ADDQ $4, R13
	ADDQ $64, DI
	DECQ CX
	JNZ block256_loop
	MOVQ DX, AX
	VMOVUPS Y0, 0(AX)
	VMOVUPS Y1, 32(AX)
	ADDQ R10, AX
	VMOVUPS Y2, 0(AX)
	VMOVUPS Y3, 32(AX)
	ADDQ R10, AX
	VMOVUPS Y4, 0(AX)
	VMOVUPS Y5, 32(AX)
	ADDQ R10, AX
	VMOVUPS Y6, 0(AX)
	VMOVUPS Y7, 32(AX)
	VZEROUPPER
	RET

// func row256(k int, x *float32, w *float32, out *float32)
TEXT ·row256(SB), NOSPLIT, $0-32
	MOVQ k+0(FP), CX
	MOVQ x+8(FP), SI
	MOVQ w+16(FP), DI
	MOVQ out+24(FP), DX
	VMOVUPS 0(DX), Y0
	VMOVUPS 32(DX), Y1
row256_loop:
	VBROADCASTSS (SI), Y4
	VFMADD231PS 0(DI), Y4, Y0
	VFMADD231PS 32(DI), Y4, Y1
	ADDQ $4, SI
	ADDQ $64, DI
	DECQ CX
	JNZ row256_loop
	VMOVUPS Y0, 0(DX)
	VMOVUPS Y1, 32(DX)
	VZEROUPPER
	RET

// func dots4x256(n int, q *float32, m *float32, ld int, out *float32)
// out[r] = Σ_i q[i]·m[r·ld+i] for four rows r, n a multiple of 8.
TEXT ·dots4x256(SB), NOSPLIT, $0-40
	MOVQ n+0(FP), CX
	MOVQ q+8(FP), SI
	MOVQ m+16(FP), DI
	MOVQ ld+24(FP), R8
	MOVQ out+32(FP), DX
	SHLQ $2, R8
	LEAQ (DI)(R8*1), R9
	LEAQ (R9)(R8*1), R10
	LEAQ (R10)(R8*1), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ AX, AX
dots4x256_loop:
	VMOVUPS (SI)(AX*4), Y4
	VFMADD231PS (DI)(AX*4), Y4, Y0
	VFMADD231PS (R9)(AX*4), Y4, Y1
	VFMADD231PS (R10)(AX*4), Y4, Y2
	VFMADD231PS (R11)(AX*4), Y4, Y3
	ADDQ $8, AX
	CMPQ AX, CX
	JLT dots4x256_loop
	STORE4SUMS
	VZEROUPPER
	RET

// Row scores over int8 rows (see Quantized in quant.go) against a query
// rounded to int16, for AVX2: out[r] = Σ_i q[i] · m[r][i] for four rows ld
// bytes apart, sixteen values at a time, the products summed in int32 by
// VPMADDWD, exactly. A row value is widened once, to int16, and one
// instruction multiplies and adds two: half the instructions of widening
// each to float32 for an FMA. n is a multiple of 16. A CPU with AVX-512
// runs it too.
// The sums of two sets of accumulators are converted to float32 apart: a
// set's lanes stay under 2³¹ for n up to 16,384 with |q[i]| ≤ 8191.

// W16STEP adds sixteen values of four int8 rows (DI, R9, R10, R11), at
// byte AX+off, times sixteen int16 of q (SI) into accumulators a0–a3.
#define W16STEP(off, a0, a1, a2, a3) \
	VMOVDQU (off*2)(SI)(AX*2), Y4; \
	VPMOVSXBW off(DI)(AX*1), Y5; \
	VPMOVSXBW off(R9)(AX*1), Y6; \
	VPMOVSXBW off(R10)(AX*1), Y7; \
	VPMOVSXBW off(R11)(AX*1), Y8; \
	VPMADDWD Y4, Y5, Y5; \
	VPMADDWD Y4, Y6, Y6; \
	VPMADDWD Y4, Y7, Y7; \
	VPMADDWD Y4, Y8, Y8; \
	VPADDD Y5, a0, a0; \
	VPADDD Y6, a1, a1; \
	VPADDD Y7, a2, a2; \
	VPADDD Y8, a3, a3

// func dots4i8w(n int, q *int16, m *int8, ld int, out *float32)
TEXT ·dots4i8w(SB), NOSPLIT, $0-40
	MOVQ n+0(FP), CX
	MOVQ q+8(FP), SI
	MOVQ m+16(FP), DI
	MOVQ ld+24(FP), R8
	MOVQ out+32(FP), DX
	LEAQ (DI)(R8*1), R9
	LEAQ (R9)(R8*1), R10
	LEAQ (R10)(R8*1), R11
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y9, Y9, Y9
	VPXOR Y10, Y10, Y10
	VPXOR Y11, Y11, Y11
	VPXOR Y12, Y12, Y12
	XORQ AX, AX
	// Thirty-two values a turn, in two sets of accumulators, while n
	// allows; then the sixteen left, if any.
	MOVQ CX, BX
	ANDQ $-32, BX
	JZ dots4i8w_tail
dots4i8w_loop:
	W16STEP(0, Y0, Y1, Y2, Y3)
	W16STEP(16, Y9, Y10, Y11, Y12)
	ADDQ $32, AX
	CMPQ AX, BX
	JLT dots4i8w_loop
dots4i8w_tail:
	CMPQ AX, CX
	JGE dots4i8w_sum
	W16STEP(0, Y0, Y1, Y2, Y3)
dots4i8w_sum:
	VCVTDQ2PS Y0, Y0
	VCVTDQ2PS Y1, Y1
	VCVTDQ2PS Y2, Y2
	VCVTDQ2PS Y3, Y3
	VCVTDQ2PS Y9, Y9
	VCVTDQ2PS Y10, Y10
	VCVTDQ2PS Y11, Y11
	VCVTDQ2PS Y12, Y12
	VADDPS Y9, Y0, Y0
	VADDPS Y10, Y1, Y1
	VADDPS Y11, Y2, Y2
	VADDPS Y12, Y3, Y3
	STORE4SUMS
	VZEROUPPER
	RET

// A block kernel over binary16 panels (see PackHalf in linalg.go), for
// AVX2 with FMA and F16C: panels of 16 columns, each row of the panel
// widened by VCVTPH2PS as it is read, 32 bytes instead of 64. It does six
// rows of x, twelve accumulators, so that the multiply-adds of a row wait
// on each other less; block4x256h does four, for the rows left over. Each
// sum is taken in the order block256 takes it: the same bits as over the
// widened panel.

// LOAD2ROWS and STORE2ROWS load and store two rows of sums, a and b,
// each two 8-float vectors, at AX and AX+R10, and move AX two rows on.
#define LOAD2ROWS(a0, a1, b0, b1) \
	VMOVUPS 0(AX), a0; \
	VMOVUPS 32(AX), a1; \
	VMOVUPS 0(AX)(R10*1), b0; \
	VMOVUPS 32(AX)(R10*1), b1; \
	LEAQ (AX)(R10*2), AX
#define STORE2ROWS(a0, a1, b0, b1) \
	VMOVUPS a0, 0(AX); \
	VMOVUPS a1, 32(AX); \
	VMOVUPS b0, 0(AX)(R10*1); \
	VMOVUPS b1, 32(AX)(R10*1); \
	LEAQ (AX)(R10*2), AX

// HSTEP adds x at addr times the widened panel row in Y12–Y13 to a0–a1.
#define HSTEP(addr, a0, a1) \
	VBROADCASTSS addr, Y14; \
	VFMADD231PS Y14, Y12, a0; \
	VFMADD231PS Y14, Y13, a1

// HSTEP4 widens the panel's next row into Y12–Y13 and adds it, times x,
// to the sums of the first four rows, Y0–Y7.
#define HSTEP4 \
	VCVTPH2PS 0(DI), Y12; \
	VCVTPH2PS 16(DI), Y13; \
	HSTEP((SI), Y0, Y1); \
	HSTEP((SI)(R8*1), Y2, Y3); \
	HSTEP((R11), Y4, Y5); \
	HSTEP((R11)(R8*1), Y6, Y7)

// func block6x256h(k int, x *float32, ldx int, w *uint16, out *float32, ldo int)
TEXT ·block6x256h(SB), NOSPLIT, $0-48
	HALFARGS
	// Rows five and six at R12 and R12+R8.
	LEAQ (R11)(R8*2), R12
	LOAD2ROWS(Y0, Y1, Y2, Y3)
	LOAD2ROWS(Y4, Y5, Y6, Y7)
	LOAD2ROWS(Y8, Y9, Y10, Y11)
block6x256h_loop:
	HSTEP4
	HSTEP((R12), Y8, Y9)
	HSTEP((R12)(R8*1), Y10, Y11)
	ADDQ $4, SI
	ADDQ $4, R11
	ADDQ $4, R12
	ADDQ $32, DI
	DECQ CX
	JNZ block6x256h_loop
	MOVQ DX, AX
	STORE2ROWS(Y0, Y1, Y2, Y3)
	STORE2ROWS(Y4, Y5, Y6, Y7)
	STORE2ROWS(Y8, Y9, Y10, Y11)
	VZEROUPPER
	RET

// func block4x256h(k int, x *float32, ldx int, w *uint16, out *float32, ldo int)
TEXT ·block4x256h(SB), NOSPLIT, $0-48
	HALFARGS
	LOAD2ROWS(Y0, Y1, Y2, Y3)
	LOAD2ROWS(Y4, Y5, Y6, Y7)
block4x256h_loop:
	HSTEP4
	ADDQ $4, SI
	ADDQ $4, R11
	ADDQ $32, DI
	DECQ CX
	JNZ block4x256h_loop
	MOVQ DX, AX
	STORE2ROWS(Y0, Y1, Y2, Y3)
	STORE2ROWS(Y4, Y5, Y6, Y7)
	VZEROUPPER
	RET

// func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	MOVL sub+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET
