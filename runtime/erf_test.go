package runtime

import (
	"math"
	"testing"

	"rulebook/runtime/gemm"
)

// TestErfAccuracy holds gemm.Erf to 1e-7 absolute of math.Erf over a
// dense grid that spans the clamp, and to math.Erf's results on the
// special values.
func TestErfAccuracy(t *testing.T) {
	const n = 1 << 20
	src := make([]float32, n)
	for i := range src {
		src[i] = -6 + 12*float32(i)/n
	}
	dst := make([]float32, n)
	gemm.Erf(dst, src)
	worst, at := 0.0, float32(0)
	for i, x := range src {
		if d := math.Abs(float64(dst[i]) - math.Erf(float64(x))); d > worst {
			worst, at = d, x
		}
	}
	if worst > 1e-7 {
		t.Errorf("max |erf error| %.3g at x = %g, want ≤ 1e-7", worst, at)
	}
	inf := float32(math.Inf(1))
	special := []float32{0, float32(math.Copysign(0, -1)), inf, -inf, 4, -4, 3.9999998}
	got := make([]float32, len(special))
	gemm.Erf(got, special)
	for i, x := range special {
		want := float32(math.Erf(float64(x)))
		if got[i] != want || math.Signbit(float64(got[i])) != math.Signbit(float64(want)) {
			t.Errorf("erf(%g) = %g, want %g", x, got[i], want)
		}
	}
	nan := []float32{float32(math.NaN())}
	gemm.Erf(nan, nan)
	if !math.IsNaN(float64(nan[0])) {
		t.Errorf("erf(NaN) = %g, want NaN", nan[0])
	}
}

// BenchmarkErf compares gemm.Erf with math.Erf element by element, on
// GELU-sized rows.
func BenchmarkErf(b *testing.B) {
	src, dst := randomTensor(1, 64, 3072).Data, make([]float32, 64*3072)
	for i := range src {
		src[i] *= 3
	}
	b.Run("poly", func(b *testing.B) {
		for b.Loop() {
			gemm.Erf(dst, src)
		}
	})
	b.Run("math.Erf", func(b *testing.B) {
		for b.Loop() {
			for i, x := range src {
				dst[i] = float32(math.Erf(float64(x)))
			}
		}
	})
}
