// Package gemm is a single-precision matrix multiply for row-major float32
// matrices, C = alpha·op(A)·op(B) + beta·C, with the argument conventions of
// gonum's blas32 Sgemm so that it can replace it directly.
//
// # Design
//
// The product is computed as in Goto & van de Geijn, "Anatomy of
// high-performance matrix multiplication" (2008) and the BLIS framework: C
// is cut into tiles of up to 14 rows × 32 columns, and each tile is the
// product of a 14×kc sliver of A and a kc×32 sliver of B accumulated in
// registers by a microkernel (kernels_amd64.s: 28 zmm accumulators, one
// broadcast of A per row and two 16-wide loads of B per k step, so 28
// FMAs per 16 loads). Measured alone on the 2-core Zen 5 EPYC this was
// tuned on, the kernel runs at 235–250 GFLOPS per core, over 90% of the
// FMA peak (two 512-bit FMAs per cycle); whole products run at 190–250.
//
// Unlike the textbook algorithm, operands are copied only when that pays,
// because in convolution and transformer layers one dimension is often
// 49…768 and packing the other operand costs a large fraction of the
// arithmetic that reuses it:
//
//   - the kernels read A in place, either row-major (A(i,p) = a[i·lda+p]:
//     rows 0…13 are addressed from two base registers and three stride
//     registers) or k-major (A(i,p) = a[p·lda+i]);
//   - B, when not transposed, is read in place by the first row tile of
//     each 32-column panel, whose kernel also stores the rows it loads into
//     a contiguous panel for the other tiles ("fused packing": two stores
//     per k step hidden under 28 FMAs, and no cache-set conflicts from
//     power-of-two leading dimensions for the other tiles);
//   - B, when transposed, is transposed into panels with 16×16 in-register
//     transposes, 512 columns at a time;
//   - PackA and PackB prepare constant operands (weights) once, in the panel
//     format, for SgemmPackedA and SgemmPackedB.
//
// The kernels pad only in the vector direction (columns, 16 at a time,
// under a lane mask); rows are exact, one kernel per tile height 1…14, and
// row tiles are balanced (64 rows: 13+13+13+13+12). When N is a poor
// multiple of 16 but M a good one (N = 49 or 196 in ResNet's last stages)
// the product is computed transposed, Cᵀ = op(B)ᵀ·op(A)ᵀ, into a scratch
// matrix that is then transposed into C, which costs M·N moves against
// 2·M·N·K flops; a cost model (run.go) decides.
//
// Cache blocking: kc = 256 (a 14×256 A sliver is 14 KiB and a 256×32 B
// panel 32 KiB: both fit the 48 KiB L1d of Zen 5, and each kernel call does
// 115k FMAs per pass over its C tile), mc = 512 (the A block, 512×256×4 B =
// 512 KiB, stays in the 1 MiB L2 while the B panels stream past it), and
// nc = 512 columns of transposed B packed at a time (512 KiB).
//
// Parallelism splits C into column ranges of whole panels (or, when C is
// too narrow, row ranges), one per goroutine, each with its own packing
// buffers; workers are long-lived goroutines and buffers are pooled, so
// that a call allocates nothing in steady state.
//
// Kernels are chosen at run time: AVX-512F (zmm, tiles up to 14×32) when
// the CPU and OS support it, else AVX2+FMA (ymm, tiles up to 6×16), else
// portable Go; on other architectures and under the purego build tag only
// the Go kernels are built. All share the driver.
//
// Numerics: products are accumulated in float32, in k order, with fused
// multiply-adds (a different rounding from gonum's, within float32
// accuracy). There is no flush-to-zero; on Zen 5 denormal inputs and
// products cost nothing extra (measured), other CPUs may differ. The
// kernels use unaligned loads and stores throughout, so no alignment is
// required of any matrix; rows that start on a 64-byte boundary are only
// slightly faster.
package gemm

//go:generate go run gen_kernels.go

import "fmt"

// Sgemm computes C = alpha·op(A)·op(B) + beta·C for row-major float32
// matrices, op(X) = X or Xᵀ per transA/transB. A is m×k (k×m if transA)
// with leading dimension lda, B is k×n (n×k if transB) with ldb, and C is
// m×n with ldc. When beta is zero C is only written, so it may hold NaN or
// garbage. It panics on inconsistent arguments as gonum's Sgemm does.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	SgemmParallel(1, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// SgemmParallel is Sgemm split over up to threads goroutines (threads ≤ 1:
// the calling goroutine only), the caller's among them. Products under
// about 2 Mflop per goroutine use fewer. threads beyond GOMAXPROCS only
// add switching.
func SgemmParallel(threads int, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	p := newProblem(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	run(threads, nil, &p)
}

// SgemmOn is SgemmParallel with the parts run by r.
func SgemmOn(r Runner, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	p := newProblem(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	run(r.Threads(), r, &p)
}

func newProblem(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) problem {
	checkMatrix("a", transA, m, k, a, lda)
	checkMatrix("b", transB, k, n, b, ldb)
	checkC(m, n, c, ldc)
	p := problem{m: m, n: n, k: k, alpha: alpha, beta: beta, c: c, ldc: ldc}
	if transA {
		p.a = operand{layout: kMajor, data: a, stride: lda}
	} else {
		p.a = operand{layout: rowMajor, data: a, stride: lda}
	}
	if transB {
		p.b = operand{layout: rowMajor, data: b, stride: ldb}
	} else {
		p.b = operand{layout: kMajor, data: b, stride: ldb}
	}
	return p
}

// PackedA is op(A) prepared once for SgemmPackedA: op(A)ᵀ in panels of 32
// rows of op(A), each k×32, k-major, zero padded.
type PackedA struct{ packed }

// PackedB is op(B) prepared once for SgemmPackedB: panels of 32 columns,
// each k×32, k-major, zero padded.
type PackedB struct{ packed }

// packed is a k×n matrix stored as ⌈n/32⌉ panels of k×32 elements;
// element (p, j) is at data[(j/32)·k·32 + p·32 + j%32].
type packed struct {
	k, n int
	data []float32
}

// PackA packs op(A) (m×k; A is k×m if transA) for SgemmPackedA. Pack
// constant operands such as convolution weights once and reuse them.
func PackA(transA bool, m, k int, a []float32, lda int) *PackedA {
	checkMatrix("a", transA, m, k, a, lda)
	// op(A)ᵀ is k×m; it is stored transposed (m×k row-major) unless transA.
	return &PackedA{packPanels(!transA, k, m, a, lda)}
}

// PackB packs op(B) (k×n; B is n×k if transB) for SgemmPackedB.
func PackB(transB bool, k, n int, b []float32, ldb int) *PackedB {
	checkMatrix("b", transB, k, n, b, ldb)
	return &PackedB{packPanels(transB, k, n, b, ldb)}
}

// M returns the number of rows of op(A).
func (p *PackedA) M() int { return p.n }

// K returns the number of columns of op(A).
func (p *PackedA) K() int { return p.k }

// K returns the number of rows of op(B).
func (p *PackedB) K() int { return p.k }

// N returns the number of columns of op(B).
func (p *PackedB) N() int { return p.n }

// SgemmPackedA computes C = alpha·op(A)·op(B) + beta·C like SgemmParallel,
// with op(A) (m×k) taken from pa. B is k×n (n×k if transB).
func SgemmPackedA(threads int, pa *PackedA, transB bool, n int, alpha float32, b []float32, ldb int, beta float32, c []float32, ldc int) {
	p := newPackedAProblem(pa, transB, n, alpha, b, ldb, beta, c, ldc)
	run(threads, nil, &p)
}

// SgemmPackedAOn is SgemmPackedA with the parts run by r.
func SgemmPackedAOn(r Runner, pa *PackedA, transB bool, n int, alpha float32, b []float32, ldb int, beta float32, c []float32, ldc int) {
	p := newPackedAProblem(pa, transB, n, alpha, b, ldb, beta, c, ldc)
	run(r.Threads(), r, &p)
}

func newPackedAProblem(pa *PackedA, transB bool, n int, alpha float32, b []float32, ldb int, beta float32, c []float32, ldc int) problem {
	m, k := pa.n, pa.k
	checkMatrix("b", transB, k, n, b, ldb)
	checkC(m, n, c, ldc)
	p := problem{m: m, n: n, k: k, alpha: alpha, beta: beta, c: c, ldc: ldc}
	p.a = operand{layout: panels, data: pa.data, stride: k}
	if transB {
		p.b = operand{layout: rowMajor, data: b, stride: ldb}
	} else {
		p.b = operand{layout: kMajor, data: b, stride: ldb}
	}
	return p
}

// SgemmPackedB computes C = alpha·op(A)·op(B) + beta·C like SgemmParallel,
// with op(B) (k×n) taken from pb. A is m×k (k×m if transA).
func SgemmPackedB(threads int, transA bool, m int, alpha float32, a []float32, lda int, pb *PackedB, beta float32, c []float32, ldc int) {
	k, n := pb.k, pb.n
	checkMatrix("a", transA, m, k, a, lda)
	checkC(m, n, c, ldc)
	p := problem{m: m, n: n, k: k, alpha: alpha, beta: beta, c: c, ldc: ldc}
	if transA {
		p.a = operand{layout: kMajor, data: a, stride: lda}
	} else {
		p.a = operand{layout: rowMajor, data: a, stride: lda}
	}
	p.b = operand{layout: panels, data: pb.data, stride: k}
	run(threads, nil, &p)
}

// checkMatrix panics unless x holds a rows×cols matrix op(X) (stored
// cols×rows if trans) with leading dimension ld.
func checkMatrix(name string, trans bool, rows, cols int, x []float32, ld int) {
	if rows < 0 || cols < 0 {
		panic(fmt.Sprintf("gemm: negative dimension of %s: %d×%d", name, rows, cols))
	}
	r, c := rows, cols
	if trans {
		r, c = cols, rows
	}
	if ld < max(1, c) {
		panic(fmt.Sprintf("gemm: bad leading dimension of %s: %d < %d", name, ld, max(1, c)))
	}
	if r > 0 && c > 0 && len(x) < (r-1)*ld+c {
		panic(fmt.Sprintf("gemm: %s too short: len %d < %d", name, len(x), (r-1)*ld+c))
	}
}

func checkC(m, n int, c []float32, ldc int) {
	if ldc < max(1, n) {
		panic(fmt.Sprintf("gemm: bad leading dimension of c: %d < %d", ldc, max(1, n)))
	}
	if m > 0 && n > 0 && len(c) < (m-1)*ldc+n {
		panic(fmt.Sprintf("gemm: c too short: len %d < %d", len(c), (m-1)*ldc+n))
	}
}

// scaleC sets C = beta·C, writing zeros without reading C when beta is 0.
func scaleC(m, n int, beta float32, c []float32, ldc int) {
	if beta == 1 {
		return
	}
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}
