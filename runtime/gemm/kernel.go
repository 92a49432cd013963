package gemm

import (
	"math/bits"
	"unsafe"
)

// kernelFunc computes one tile of C: with acc(i, j) = Σ_{p<k} A(i, p)·B(p, j),
// C(i, j) = alpha·acc + beta·C(i, j) for the rows of the tile and the columns
// selected by mask (bit j: column j; always the low bits), and never reads
// C when beta is zero. Strides are in elements: B(p, j) is at b[p·bs + j];
// A(i, p) is at a[i·as + p] for row-major kernels and a[p·as + i] for
// k-major ones. k ≥ 1. Kernels of a set with maskedB read only the masked
// columns of B; the others read whole vectors. If bp is not nil, the
// kernel also stores each row of B it reads (its vectors: masked columns
// zeroed when maskedB) at bp[p·32 …], making a packed panel for the next
// tiles.
type kernelFunc func(k int, a *float32, as int, b *float32, bs int, c *float32, ldc int, alpha, beta float32, mask uint64, bp *float32)

// kernelSet is one implementation of the kernels, indexed by tile height.
type kernelSet struct {
	name string
	mr   int // tallest tile
	nr   int // widest tile: 32 or 16 columns (a divisor of panelWidth)
	// ar for row-major A, ak for k-major A; 2: up to nr columns, 1: up to
	// nr/2.
	ar2, ar1, ak2, ak1 [15]kernelFunc
	// maskedB: the kernels read only the masked columns of B. Otherwise
	// they read whole vectors, and the driver pads partial panels.
	maskedB bool
	// Cycles per element (for swapPays) to transpose B into panels and to
	// move the scratch Cᵀ into C.
	packCycles, transposeCycles float64
	// transpose16, if not nil, transposes nb side-by-side 16×16 blocks of
	// src into nb stacked blocks of dst (strides in elements), reading only
	// the columns of src under mask.
	transpose16 func(dst *float32, ds int, src *float32, ss int, nb int, mask uint64)
	// addMax, if not nil, sets dst[i] = max(src[i] + b, lo) for i < n
	// (AddMax).
	addMax func(dst, src *float32, n int, b, lo float32)
	// vmax, if not nil, sets dst[i] = max(x[i], y[i]) (NaN if either is)
	// for i < n (Max).
	vmax func(dst, x, y *float32, n int)
	// arith, if not nil, sets dst[i] = x[i] + y[i], or x[i]·y[i] when
	// mul (Add, Mul).
	arith func(dst, x, y *float32, n int, mul bool)
	// stride2, if not nil, is PoolStride2's routine.
	stride2 func(dst, src *float32, n, taps int, idx *[16]int32, isMax bool)
	// padRows, if not nil, is PadRows.
	padRows func(dst *float32, dstStride int, src *float32, srcStride int, rows, lo, hi, width int)
	// erf, if not nil, is Erf on n elements, n a multiple of 8.
	erf func(dst, src *float32, n int, c *erfCoefficients)
	// expShift, if not nil, is ExpShift for n ≥ 1.
	expShift func(dst, src *float32, n int, shift float32, c *expConstants) float32
}

// defaultKernels is the fastest implementation this CPU runs; see
// kernels_select_amd64.go.
var defaultKernels = goKernels()

// goKernels returns the portable kernels: the same tiles computed by plain
// Go loops (the compiler does not vectorize them: ~6 GFLOPS on Zen 5; they serve
// non-amd64 targets, the purego build and x86 CPUs without AVX2).
func goKernels() *kernelSet {
	ks := &kernelSet{name: "go", mr: 14, nr: 32, maskedB: true, packCycles: 2, transposeCycles: 2}
	for mr := 1; mr <= 14; mr++ {
		ks.ar2[mr], ks.ar1[mr] = goKernel(true, mr), goKernel(true, mr)
		ks.ak2[mr], ks.ak1[mr] = goKernel(false, mr), goKernel(false, mr)
	}
	return ks
}

func goKernel(rowMajorA bool, mr int) kernelFunc {
	return func(k int, a *float32, as int, b *float32, bs int, c *float32, ldc int, alpha, beta float32, mask uint64, bp *float32) {
		cols := bits.Len64(mask)
		var la int
		if rowMajorA {
			la = (mr-1)*as + k
		} else {
			la = (k-1)*as + mr
		}
		av := unsafe.Slice(a, la)
		bv := unsafe.Slice(b, (k-1)*bs+cols)
		cv := unsafe.Slice(c, (mr-1)*ldc+cols)
		if bp != nil {
			pv := unsafe.Slice(bp, k*panelWidth)
			for p := 0; p < k; p++ {
				copy(pv[p*panelWidth:p*panelWidth+cols], bv[p*bs:])
			}
		}
		var acc [14 * 32]float32
		for p := 0; p < k; p++ {
			brow := bv[p*bs : p*bs+cols]
			for i := 0; i < mr; i++ {
				var x float32
				if rowMajorA {
					x = av[i*as+p]
				} else {
					x = av[p*as+i]
				}
				arow := acc[i*32 : i*32+cols]
				for j, y := range brow {
					arow[j] += x * y
				}
			}
		}
		for i := 0; i < mr; i++ {
			crow := cv[i*ldc : i*ldc+cols]
			arow := acc[i*32 : i*32+cols]
			if beta == 0 {
				for j := range crow {
					crow[j] = alpha * arow[j]
				}
			} else {
				for j := range crow {
					crow[j] = alpha*arow[j] + beta*crow[j]
				}
			}
		}
	}
}
