package use

import "math"

// expf is e^x in float32, within 2 ulp of math.Exp over the range the
// model uses. The forward pass calls it instead of math.Exp, whose amd64
// assembly mixes VEX and legacy SSE instructions: in a program whose
// vector code leaves the upper halves of the vector registers dirty
// (every build with GOEXPERIMENT=simd does), each call pays AVX-SSE
// transition penalties, about 100 times its cost (see BenchmarkExp).
func expf(x float32) float32 {
	const (
		ln2Hi = 0.693359375
		ln2Lo = -2.12194440e-4
		log2e = 1.44269504088896341
	)
	switch {
	case x > 88.72283:
		return float32(math.Inf(1))
	case x < -87.33654:
		return 0
	case x != x:
		return x
	}
	// x = k·ln2 + r with |r| ≤ ln2/2; e^x = 2^k · e^r, e^r by a minimax
	// polynomial (Cephes' expf).
	k := float32(math.Floor(float64(x*log2e + 0.5)))
	r := x - k*ln2Hi - k*ln2Lo
	p := float32(1.9875691500e-4)
	p = p*r + 1.3981999507e-3
	p = p*r + 8.3334519073e-3
	p = p*r + 4.1665795894e-2
	p = p*r + 1.6666665459e-1
	p = p*r + 5.0000001201e-1
	p = p*r*r + r + 1
	if k > 127 { // 2^128 is beyond float32: scale in two steps
		return p * 2 * math.Float32frombits(uint32(int32(k)+126)<<23)
	}
	return p * math.Float32frombits(uint32(int32(k)+127)<<23)
}

// tanhf is tanh(x) in float32, from expf, within 4 ulp of math.Tanh.
func tanhf(x float32) float32 {
	if x > 9 {
		return 1
	}
	if x < -9 {
		return -1
	}
	if x > -0.25 && x < 0.25 {
		// 1 - 2/(e^2x+1) loses precision near zero; the series does not.
		x2 := x * x
		return x * (1 + x2*(-1.0/3+x2*(2.0/15+x2*(-17.0/315))))
	}
	e := expf(2 * x)
	return (e - 1) / (e + 1)
}
