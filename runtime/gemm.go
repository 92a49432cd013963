package runtime

import "rulebook/runtime/gemm"

// gemmCall is one C = alpha·op(A)·op(B) + beta·C product, row-major,
// computed by package gemm's AVX-512 kernels (gonum's Sgemm, at about a
// tenth of the speed here, remains the reference in gemm's tests). A kernel
// keeps one per product it issues and refills the fields before each call.
type gemmCall struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	a, b, c        []float32
	lda, ldb, ldc  int
}

func newGemmCall() *gemmCall { return &gemmCall{} }

// set fills in a product of densely stored matrices: op(A) is m×k, op(B)
// is k×n and C is m×n.
func (g *gemmCall) set(transA, transB bool, m, n, k int, alpha float32, a, b []float32, beta float32, c []float32) {
	g.transA, g.transB = transA, transB
	g.m, g.n, g.k = m, n, k
	g.alpha, g.beta = alpha, beta
	g.a, g.b, g.c = a, b, c
	g.lda, g.ldb, g.ldc = k, n, n
	if transA {
		g.lda = m
	}
	if transB {
		g.ldb = k
	}
	// Leading dimensions must be at least 1, even for empty matrices.
	g.lda, g.ldb, g.ldc = max(g.lda, 1), max(g.ldb, 1), max(g.ldc, 1)
}

// run computes the product on w's threads, or on the calling goroutine
// when w is nil (products issued from inside an already parallel loop).
func (g *gemmCall) run(w *workers) {
	if w == nil {
		gemm.Sgemm(g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, g.c, g.ldc)
		return
	}
	gemm.SgemmOn(w, g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, g.c, g.ldc)
}

// runPackedA computes the product with op(A) taken from pa, which must
// hold the m×k matrix set describes (packed once, for constant weights),
// on w's threads or, w nil, the calling goroutine.
func (g *gemmCall) runPackedA(w *workers, pa *gemm.PackedA) {
	if w == nil {
		gemm.SgemmPackedA(1, pa, g.transB, g.n, g.alpha, g.b, g.ldb, g.beta, g.c, g.ldc)
		return
	}
	gemm.SgemmPackedAOn(w, pa, g.transB, g.n, g.alpha, g.b, g.ldb, g.beta, g.c, g.ldc)
}
