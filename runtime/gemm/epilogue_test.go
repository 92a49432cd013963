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
