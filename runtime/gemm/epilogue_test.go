package gemm

import (
	"math"
	"testing"
)

// TestAddMax checks AddMax against the scalar definition on every length
// up to 150 (all loop paths and tail masks), in place and not, with lo 0
// and −Inf, and that NaN sums stay NaN.
func TestAddMax(t *testing.T) {
	inf := float32(math.Inf(-1))
	for n := 0; n <= 150; n++ {
		src := make([]float32, n+1)
		for i := range src {
			src[i] = float32((i*7919)%23) - 11.5
		}
		if n > 3 {
			src[3] = float32(math.NaN())
		}
		for _, lo := range []float32{0, inf} {
			dst := make([]float32, n+1)
			dst[n] = 42 // past the end: must stay
			AddMax(dst[:n], src[:n], 0.25, lo)
			inPlace := append([]float32(nil), src...)
			AddMax(inPlace[:n], inPlace[:n], 0.25, lo)
			for i := range n {
				want := max(src[i]+0.25, lo)
				for _, got := range []float32{dst[i], inPlace[i]} {
					if got != want && !(math.IsNaN(float64(got)) && math.IsNaN(float64(want))) {
						t.Fatalf("n %d lo %g: [%d] = %g, want %g", n, lo, i, got, want)
					}
				}
			}
			if dst[n] != 42 || inPlace[n] != src[n] {
				t.Fatalf("n %d: wrote past the end", n)
			}
		}
	}
}

// TestMaxAdd checks Max and Add against Go's max and + on every length up
// to 150, with NaNs in either operand, and aliased destinations.
func TestMaxAdd(t *testing.T) {
	nan := float32(math.NaN())
	for n := 0; n <= 150; n++ {
		x, y := make([]float32, n+1), make([]float32, n+1)
		for i := range x {
			x[i], y[i] = float32((i*7919)%23)-11.5, float32((i*104729)%19)-9.5
		}
		if n > 5 {
			x[2], y[5] = nan, nan
		}
		for _, op := range []struct {
			name string
			f    func(dst, x, y []float32)
			want func(a, b float32) float32
		}{
			{"Max", Max, func(a, b float32) float32 { return max(a, b) }},
			{"Add", Add, func(a, b float32) float32 { return a + b }},
		} {
			dst := make([]float32, n+1)
			dst[n] = 42
			op.f(dst[:n], x[:n], y[:n])
			alias := append([]float32(nil), x...)
			op.f(alias[:n], alias[:n], y[:n])
			for i := range n {
				want := op.want(x[i], y[i])
				for _, got := range []float32{dst[i], alias[i]} {
					if got != want && !(math.IsNaN(float64(got)) && math.IsNaN(float64(want))) {
						t.Fatalf("%s n %d: [%d] = %g, want %g", op.name, n, i, got, want)
					}
				}
			}
			if dst[n] != 42 {
				t.Fatalf("%s n %d: wrote past the end", op.name, n)
			}
		}
	}
}
