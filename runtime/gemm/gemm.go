// Package gemm is a single-precision matrix multiply for row-major float32
// matrices, C = alpha·op(A)·op(B) + beta·C. It keeps gonum's blas32 Sgemm
// conventions, so it can replace it directly. It tiles C as BLIS does, with
// AVX-512 or AVX2 microkernels chosen at run time and portable Go kernels
// elsewhere. A call allocates nothing in steady state. docs/gemm.md tells
// the design: tiles, packing, cache blocking, parallelism and numerics.
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
