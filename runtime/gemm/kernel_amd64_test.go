//go:build !purego

package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// kernelTables returns the assembly kernel tables this CPU runs, by name.
func kernelTables() map[string]*kernelSet {
	sets := map[string]*kernelSet{}
	if hasAVX512() {
		sets["avx512"] = avx512Kernels()
	}
	if hasAVX2FMA() {
		sets["avx2"] = avx2Kernels()
	}
	return sets
}

// TestKernels calls every assembly kernel directly: both A layouts, every
// tile height and width, column masks, beta 0 (C NaN), 1 and 0.5, k with
// and without an unrolled remainder, and the fused packing of B.
func TestKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for name, ks := range kernelTables() {
		for _, rowMajorA := range []bool{true, false} {
			for wide := range 2 {
				table := [2][2]*[15]kernelFunc{{&ks.ak1, &ks.ak2}, {&ks.ar1, &ks.ar2}}[b2i(rowMajorA)][wide]
				maxCols := ks.nr / 2 * (1 + wide)
				for mr := 1; mr <= ks.mr; mr++ {
					for _, k := range []int{1, 3, 4, 5, 17} {
						for _, beta := range []float32{0, 1, 0.5} {
							cols := 1 + rng.IntN(maxCols)
							if k == 4 {
								cols = maxCols
							}
							fused := beta != 1
							checkKernel(t, fmt.Sprintf("%s rowMajorA=%v mr=%d cols=%d k=%d beta=%v fused=%v", name, rowMajorA, mr, cols, k, beta, fused),
								table[mr], rowMajorA, mr, cols, maxCols, k, beta, fused, !ks.maskedB, rng)
						}
					}
				}
			}
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func checkKernel(t *testing.T, what string, f kernelFunc, rowMajorA bool, mr, cols, maxCols, k int, beta float32, fused, wholeVectors bool, rng *rand.Rand) {
	t.Helper()
	as := k + 3
	if !rowMajorA {
		as = mr + 2
	}
	a := randSlice(rng, 16*(k+20))
	bs := 37
	b := randSlice(rng, bs*k+64)
	const ldc = 53
	c := randSlice(rng, ldc*mr+64)
	if beta == 0 {
		for i := range c {
			c[i] = float32(math.NaN())
		}
	}
	c0 := append([]float32(nil), c...)
	var bp *float32
	pk := make([]float32, 32*k)
	if fused {
		bp = &pk[0]
	}
	const alpha = 0.75
	f(k, &a[0], as, &b[0], bs, &c[0], ldc, alpha, beta, 1<<cols-1, bp)
	for i := 0; i < mr; i++ {
		for j := 0; j < ldc; j++ {
			got, old := c[i*ldc+j], c0[i*ldc+j]
			if j >= cols {
				if !(got == old || got != got && old != old) {
					t.Fatalf("%s: wrote C(%d,%d) outside the mask", what, i, j)
				}
				continue
			}
			var s float64
			for p := 0; p < k; p++ {
				av := a[i*as+p]
				if !rowMajorA {
					av = a[p*as+i]
				}
				s += float64(av) * float64(b[p*bs+j])
			}
			want := alpha * s
			if beta != 0 {
				want += float64(beta) * float64(old)
			}
			if math.Abs(float64(got)-want) > 1e-5*(1+math.Abs(want)) {
				t.Fatalf("%s: C(%d,%d) = %v, want %v", what, i, j, got, want)
			}
		}
	}
	if !fused {
		return
	}
	for p := 0; p < k; p++ {
		for j := 0; j < maxCols; j++ {
			want := b[p*bs+j]
			if j >= cols && !wholeVectors {
				want = 0
			}
			if pk[p*32+j] != want {
				t.Fatalf("%s: packed B(%d,%d) = %v, want %v", what, p, j, pk[p*32+j], want)
			}
		}
	}
}

// BenchmarkKernel measures the kernels alone on packed, cache-resident
// operands (kc = 256): the ceiling for whole products.
func BenchmarkKernel(b *testing.B) {
	const kc = 256
	for name, ks := range kernelTables() {
		for _, mr := range []int{ks.mr, ks.mr / 2, 4} {
			for _, rowMajorA := range []bool{true, false} {
				f, as := ks.ar2[mr], kc
				if !rowMajorA {
					f, as = ks.ak2[mr], mr
				}
				b.Run(fmt.Sprintf("%s/%dx%d/rowMajorA=%v", name, mr, ks.nr, rowMajorA), func(b *testing.B) {
					a := make([]float32, ks.mr*kc)
					bb := make([]float32, 32*kc)
					c := make([]float32, ks.mr*32)
					for i := range a {
						a[i] = 1e-3
					}
					for i := range bb {
						bb[i] = 1e-3
					}
					for i := 0; i < b.N; i++ {
						f(kc, &a[0], as, &bb[0], 32, &c[0], 32, 1, 1, 1<<ks.nr-1, nil)
					}
					reportGFLOPS(b, mr, ks.nr, kc)
				})
			}
		}
	}
}
