package gemm

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestErfSameBits: the vector routine gives erfScalar's bits on random
// values across the clamp, the special values and every tail length.
func TestErfSameBits(t *testing.T) { forEachKernelSet(t, testErfSameBits) }

func testErfSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	src := make([]float32, 4099)
	for i := range src {
		src[i] = float32(rng.NormFloat64() * 3)
	}
	inf := float32(math.Inf(1))
	copy(src, []float32{0, float32(math.Copysign(0, -1)), inf, -inf, 4, -4, 3.9999998, float32(math.NaN()), 1e-40, -1e-40})
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, len(src)} {
		want, got := make([]float32, n), make([]float32, n)
		erfScalar(want, src[:n])
		Erf(got, src[:n])
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("n=%d: erf(%g) = %g, want %g (erfScalar)", n, src[i], got[i], want[i])
			}
		}
	}
}

// TestErfAccuracy holds Erf to 1e-7 absolute of math.Erf over a
// dense grid that spans the clamp, and to math.Erf's results on the
// special values.
func TestErfAccuracy(t *testing.T) { forEachKernelSet(t, testErfAccuracy) }

func testErfAccuracy(t *testing.T) {
	const n = 1 << 20
	src := make([]float32, n)
	for i := range src {
		src[i] = -6 + 12*float32(i)/n
	}
	dst := make([]float32, n)
	Erf(dst, src)
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
	Erf(got, special)
	for i, x := range special {
		want := float32(math.Erf(float64(x)))
		if got[i] != want || math.Signbit(float64(got[i])) != math.Signbit(float64(want)) {
			t.Errorf("erf(%g) = %g, want %g", x, got[i], want)
		}
	}
	nan := []float32{float32(math.NaN())}
	Erf(nan, nan)
	if !math.IsNaN(float64(nan[0])) {
		t.Errorf("erf(NaN) = %g, want NaN", nan[0])
	}
}

// BenchmarkErf compares Erf's vector and scalar paths and math.Erf, on
// GELU-sized rows.
func BenchmarkErf(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 3))
	src, dst := make([]float32, 64*3072), make([]float32, 64*3072)
	for i := range src {
		src[i] = float32(rng.NormFloat64() * 3)
	}
	b.Run("vector", func(b *testing.B) {
		for b.Loop() {
			Erf(dst, src)
		}
	})
	b.Run("scalar", func(b *testing.B) {
		for b.Loop() {
			erfScalar(dst, src)
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

// TestExpShiftAccuracy holds ExpShift to 2 ulp of float32 against
// math.Exp over the range softmax uses and beyond, its sum to the sum of
// its outputs, and the edges to math.Exp's.
func TestExpShiftAccuracy(t *testing.T) { forEachKernelSet(t, testExpShiftAccuracy) }

func testExpShiftAccuracy(t *testing.T) {
	const n = 1<<16 + 5
	src := make([]float32, n)
	for i := range src {
		src[i] = -110 + 200*float32(i)/n
	}
	dst := make([]float32, n)
	const shift = 0.5
	sum := ExpShift(dst, src, shift)
	var want float64
	for i, x := range src {
		w := math.Exp(float64(x - shift))
		want += float64(dst[i])
		if w < 1e-37 || w > 1e38 { // float32 subnormals and overflow: compared below
			continue
		}
		if ulps := math.Abs(float64(dst[i])-w) / ulp32(float32(w)); ulps > 2 {
			t.Fatalf("exp(%g) = %g, want %g (%.1f ulp)", x-shift, dst[i], w, ulps)
		}
	}
	if math.Abs(sum-want) > 1e-6*want {
		t.Errorf("sum %g, want %g", sum, want)
	}
	inf := float32(math.Inf(1))
	edges := []float32{0, -inf, inf, -200, 200, float32(math.NaN())}
	got := make([]float32, len(edges))
	ExpShift(got, edges, 0)
	for i, x := range edges {
		w := float32(math.Exp(float64(x)))
		if got[i] != w && !(math.IsNaN(float64(w)) && math.IsNaN(float64(got[i]))) {
			t.Errorf("exp(%g) = %g, want %g", x, got[i], w)
		}
	}
}

// ulp32 is the spacing of float32 values at x.
func ulp32(x float32) float64 {
	return float64(math.Nextafter32(x, float32(math.Inf(1))) - x)
}

// TestPoolStride2: the vector routine against the windows' maximum and
// sum computed here, for every tail length and tap count, NaN included.
func TestPoolStride2(t *testing.T) { forEachKernelSet(t, testPoolStride2) }

func testPoolStride2(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, taps := range []int{1, 2, 3, 5} {
		for _, n := range []int{1, 5, 15, 16, 17, 33, 73} {
			src := make([]float32, 2*(n-1)+taps+Stride2Slack)
			for i := range src {
				src[i] = float32(rng.NormFloat64())
			}
			src[2*(n/2)+taps-1] = float32(math.NaN())
			for _, isMax := range []bool{true, false} {
				got := make([]float32, n)
				PoolStride2(got, src, taps, isMax)
				for o := range got {
					want := src[2*o]
					for _, v := range src[2*o+1 : 2*o+taps] {
						if isMax {
							want = max(want, v)
						} else {
							want += v
						}
					}
					if got[o] != want && !(math.IsNaN(float64(got[o])) && math.IsNaN(float64(want))) {
						t.Fatalf("taps %d, n %d, max %v: output %d = %g, want %g", taps, n, isMax, o, got[o], want)
					}
				}
			}
		}
	}
}

func TestMul(t *testing.T) { forEachKernelSet(t, testMul) }

func testMul(t *testing.T) {
	for _, n := range []int{1, 15, 16, 17, 64, 100} {
		x, y, got := make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range x {
			x[i], y[i] = float32(i)+0.5, float32(n-i)
		}
		Mul(got, x, y)
		for i := range got {
			if got[i] != x[i]*y[i] {
				t.Fatalf("n %d: %g·%g = %g", n, x[i], y[i], got[i])
			}
		}
	}
}

// TestPadRows against the definition, for rows of every tail length and
// padding on either side.
func TestPadRows(t *testing.T) { forEachKernelSet(t, testPadRows) }

func testPadRows(t *testing.T) {
	for _, tc := range []struct{ rows, lo, hi, width, ds, ss int }{
		{1, 0, 5, 5, 5, 5}, {3, 1, 35, 35, 35, 37}, {4, 0, 16, 17, 17, 20}, {2, 3, 3, 7, 9, 7}, {5, 2, 33, 36, 36, 40}, {2, 0, 0, 4, 4, 4},
	} {
		src := make([]float32, tc.rows*tc.ss+tc.hi)
		for i := range src {
			src[i] = float32(i + 1)
		}
		dst := make([]float32, tc.rows*tc.ds+tc.width)
		for i := range dst {
			dst[i] = -1
		}
		PadRows(dst, tc.ds, src, tc.ss, tc.rows, tc.lo, tc.hi, tc.width)
		for r := range tc.rows {
			for c := range tc.width {
				want := float32(0)
				if c >= tc.lo && c < tc.hi {
					want = src[r*tc.ss+c-tc.lo]
				}
				if got := dst[r*tc.ds+c]; got != want {
					t.Fatalf("%+v: row %d column %d = %g, want %g", tc, r, c, got, want)
				}
			}
		}
		if tc.ds > tc.width && dst[tc.width] != -1 {
			t.Fatalf("%+v: wrote past a row's width", tc)
		}
	}
}

// forEachKernelSet runs test with each kernel set this machine runs, the
// portable Go one included, so that the fallbacks of the vector routines
// are tested where the assembly is used too.
func forEachKernelSet(t *testing.T, test func(t *testing.T)) {
	saved := defaultKernels
	defer func() { defaultKernels = saved }()
	for _, ks := range kernelSets() {
		defaultKernels = ks
		t.Run(ks.name, test)
	}
}
