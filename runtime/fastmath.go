package runtime

import "math"

// Erf is GELU's inner function in transformers (bert_base has 12 on
// 64×3072 activations), where math.Erf's float64 evaluation with several
// branches made it a fifth of the model's time. erfSlice evaluates
// erf(x) = x·g(x²) with one degree-16 polynomial for g in u = x²/8 − 1 on
// |x| < 4 and ±1 beyond: no branch besides the clamp, no division, and an
// absolute error under 1.3e-8 before rounding to float32 (TestErfAccuracy),
// against 6e-8 for an ulp of float32 near 1. scripts/erf_coefficients.py
// fits the coefficients (highest degree first) and checks that bound.
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

// erfSlice sets dst[i] = erf(src[i]).
func erfSlice(dst, src []float32) {
	src = src[:len(dst)]
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
