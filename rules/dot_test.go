package rules

import (
	"math/rand/v2"
	"testing"
)

// TestModDot: the unrolled modular dot product is the plain sum of
// products mod Prime, at every length around the unrolling and with the
// largest residues.
func TestModDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 40; n++ {
		for _, top := range []bool{false, true} {
			x, w := make([]uint32, n), make([]uint32, n)
			for i := range x {
				x[i], w[i] = rng.Uint32N(Prime), rng.Uint32N(Prime)
				if top {
					x[i], w[i] = Prime-1, Prime-1
				}
			}
			acc := uint32(Prime - 1)
			want := uint64(acc)
			for i := range x {
				want = (want + uint64(x[i])*uint64(w[i])%Prime) % Prime
			}
			if got := (Mod{}).Dot(acc, x, w); uint64(got) != want {
				t.Fatalf("n=%d top=%v: Dot = %d, want %d", n, top, got, want)
			}
		}
	}
}
