package gemm

import "math"

// The runtime's element-wise kernels that Go compiles to scalar code
// live here beside the GEMM epilogues, because this package owns the
// CPU dispatch (kernelSet) and the assembly.

// Erf is GELU's inner function in transformers (bert_base has 12 on
// 64×3072 activations), where math.Erf's float64 evaluation with several
// branches made it a fifth of the model's time. Erf evaluates
// erf(x) = x·g(x²) with one degree-16 polynomial for g in u = x²/8 − 1 on
// |x| < 4 and ±1 beyond: no branch besides the clamp, no division, and an
// absolute error under 1.3e-8 before rounding to float32 (the runtime's
// TestErfAccuracy), against 6e-8 for an ulp of float32 near 1.
// scripts/erf_coefficients.py fits the coefficients (highest degree
// first) and checks that bound.
const (
	erfC16   = 0.0005964250738988118
	erfC15   = -0.0013728150914496529
	erfC14   = 0.0006166107151718897
	erfC13   = -0.0010769420992115496
	erfC12   = 0.005577363679684546
	erfC11   = -0.01008590698127859
	erfC10   = 0.013908146213698243
	erfC9    = -0.021662532256282854
	erfC8    = 0.033217001098314526
	erfC7    = -0.046014321365131186
	erfC6    = 0.059855993580258324
	erfC5    = -0.07468753070220882
	erfC4    = 0.09021204267236879
	erfC3    = -0.10771336119336662
	erfC2    = 0.1316750014568692
	erfC1    = -0.1765761718769576
	erfC0    = 0.35353099636156904
	erfLimit = 4 // erf(4) = 1 − 1.5e-8, which rounds to 1 in float32
)

// erfCoefficients are the polynomial's, highest degree first, then 2/16
// (u's scale), 1, the limit, |x|'s mask and the sign bit, as the AVX-512
// routine loads them.
type erfCoefficients [22]uint64

// erfTable is read only. (A table built per call and passed through the
// kernelSet's function value escaped to the heap: 18,000 allocations a
// bert_base run.)
var erfTable = newErfCoefficients()

func newErfCoefficients() erfCoefficients {
	var c erfCoefficients
	for i, v := range []float64{erfC16, erfC15, erfC14, erfC13, erfC12, erfC11, erfC10, erfC9, erfC8,
		erfC7, erfC6, erfC5, erfC4, erfC3, erfC2, erfC1, erfC0, 2.0 / (erfLimit * erfLimit), 1, erfLimit} {
		c[i] = math.Float64bits(v)
	}
	c[20], c[21] = 1<<63-1, 1<<63
	return c
}

// Erf sets dst[i] = erf(src[i]); dst and src may be the same slice. The
// AVX-512 routine evaluates the same float64 operations in the same order
// eight lanes at a time, so both paths give the same bits
// (TestErfSameBits).
func Erf(dst, src []float32) {
	src = src[:len(dst)]
	if f := defaultKernels.erf; f != nil && len(dst) >= 8 {
		n := len(dst) &^ 7
		f(&dst[0], &src[0], n, &erfTable)
		dst, src = dst[n:], src[n:]
	}
	erfScalar(dst, src)
}

func erfScalar(dst, src []float32) {
	for i, x := range src {
		v := float64(x)
		if math.Abs(v) >= erfLimit {
			dst[i] = float32(math.Copysign(1, v))
			continue
		}
		u := v*v*(2.0/(erfLimit*erfLimit)) - 1
		// Two interleaved Horner chains in u² (even and odd powers)
		// halve the dependency chain's length.
		u2 := u * u
		e, o := erfC16, erfC15
		e, o = math.FMA(e, u2, erfC14), math.FMA(o, u2, erfC13)
		e, o = math.FMA(e, u2, erfC12), math.FMA(o, u2, erfC11)
		e, o = math.FMA(e, u2, erfC10), math.FMA(o, u2, erfC9)
		e, o = math.FMA(e, u2, erfC8), math.FMA(o, u2, erfC7)
		e, o = math.FMA(e, u2, erfC6), math.FMA(o, u2, erfC5)
		e, o = math.FMA(e, u2, erfC4), math.FMA(o, u2, erfC3)
		e, o = math.FMA(e, u2, erfC2), math.FMA(o, u2, erfC1)
		e = math.FMA(e, u2, erfC0)
		p := math.FMA(o, u, e)
		dst[i] = float32(v * p)
	}
}

// ExpShift sets dst[i] = exp(src[i] − shift) and returns their sum: the
// exponentials of a softmax (shift is the row's maximum). Go's math.Exp
// runs in float64 one element at a time, which made bert_base's twelve
// softmaxes 4% of its time; the AVX-512 routine works in float32 on 16
// lanes, summing in float32 lanes: x = n·ln 2 + r with |r| ≤ ln 2 / 2 (ln 2 split in two so that
// n·ln2Hi is exact), e^r by its Taylor polynomial to r⁷/7! (truncation
// under 5e-9 relative), scaled by 2ⁿ (VSCALEFPS). Inputs are clamped to
// [−104, 89], past which the result rounds to 0 or overflows to +Inf
// anyway; NaN stays NaN. Relative error is within 2 ulp of float32
// (TestExpShiftAccuracy).
func ExpShift(dst, src []float32, shift float32) float64 {
	src = src[:len(dst)]
	if f := defaultKernels.expShift; f != nil && len(dst) > 0 {
		return float64(f(&dst[0], &src[0], len(dst), shift, &expTable))
	}
	sum := 0.0
	for i, x := range src {
		v := math.Exp(float64(x - shift))
		dst[i] = float32(v)
		sum += v
	}
	return sum
}

// expConstants are what the AVX-512 exp loads: log₂e, ln 2 in two parts,
// the clamp, and the Taylor coefficients 1/7! … 1/2!, 1.
type expConstants [12]float32

// expTable is read only.
var expTable = newExpConstants()

func newExpConstants() expConstants {
	const ln2Hi = 1420.0 / 2048 // 11 significant bits: n·ln2Hi is exact for |n| < 2¹³
	return expConstants{math.Log2E, ln2Hi, math.Ln2 - ln2Hi, -104, 89,
		1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1}
}

// Stride2Slack is how many elements PoolStride2 may read past the last
// window: its vector routine loads 32 floats per 16 outputs and tap.
const Stride2Slack = 32

// PoolStride2 sets dst[o] to the maximum (isMax; NaN where any is NaN)
// or the sum of src[2o], src[2o+1], …, src[2o+taps−1]: the row pass of a
// pool with stride 2. src must hold 2·(len(dst)−1) + taps + Stride2Slack
// elements; the extra ones are read, never used.
func PoolStride2(dst, src []float32, taps int, isMax bool) {
	n := len(dst)
	if n == 0 || taps < 1 {
		return
	}
	src = src[:2*(n-1)+taps+Stride2Slack]
	if f := defaultKernels.stride2; f != nil {
		f(&dst[0], &src[0], n, taps, &evenLanes, isMax)
		return
	}
	for o := range dst {
		w := src[2*o : 2*o+taps]
		acc := w[0]
		for _, v := range w[1:] {
			if isMax {
				acc = max(acc, v)
			} else {
				acc += v
			}
		}
		dst[o] = acc
	}
}

// evenLanes selects the even floats of two zmm registers (VPERMT2PS); read
// only.
var evenLanes = [16]int32{0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30}

// PadRows fills rows rows of width floats, dst's row r at dst[r·dstStride:]:
// zeros in columns [0, lo) and [hi, width), and src[r·srcStride:][:hi−lo]
// in [lo, hi). It is im2col's gather of one kernel tap for a stride-1
// convolution, which Go's copy and clear did one short row at a time
// (35 floats in inception_v3) at a cost of 12% of the model.
func PadRows(dst []float32, dstStride int, src []float32, srcStride int, rows, lo, hi, width int) {
	if rows <= 0 || width <= 0 {
		return
	}
	lo, hi = min(max(lo, 0), width), min(max(hi, lo), width)
	_ = dst[(rows-1)*dstStride+width-1]
	if hi > lo {
		_ = src[(rows-1)*srcStride+hi-lo-1]
	}
	if f := defaultKernels.padRows; f != nil {
		s := &dst[0] // src is not read when hi = lo
		if hi > lo {
			s = &src[0]
		}
		f(&dst[0], dstStride, s, srcStride, rows, lo, hi, width)
		return
	}
	for r := range rows {
		d := dst[r*dstStride : r*dstStride+width]
		clear(d[:lo])
		copy(d[lo:hi], src[r*srcStride:])
		clear(d[hi:])
	}
}
