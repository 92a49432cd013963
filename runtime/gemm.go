package runtime

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// Tile sizes for splitting a matrix product over the workers. Each tile of
// C is computed by one worker as a sum over k-blocks; a 64×128 tile of C and
// a 256×128 panel of B stay in the L1 and L2 caches while gonum's serial
// kernel streams through them. gonum only goes parallel itself from four
// 64×64 blocks on, so each tile runs serially inside gonum and the session's
// Threads setting is the only parallelism (measured on a 2-core AVX-512
// EPYC: 64x128x256 tiles beat gonum's own parallel split by 5–50%).
const (
	tileM = 64
	tileN = 128
	tileK = 256
)

// gemmCall is one C = alpha·op(A)·op(B) + beta·C product, row-major. A
// kernel keeps one per product it issues and refills the fields before each
// call; its tile function is bound once so that dispatching to the workers
// allocates nothing.
type gemmCall struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	a, b, c        []float32
	lda, ldb, ldc  int

	tilesN int
	tiles  func(lo, hi int)
}

func newGemmCall() *gemmCall {
	g := &gemmCall{}
	g.tiles = g.runTiles
	return g
}

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
	// gonum requires leading dimensions of at least 1 even for empty
	// matrices.
	g.lda, g.ldb, g.ldc = max(g.lda, 1), max(g.ldb, 1), max(g.ldc, 1)
}

// run computes the product, tiles spread over the workers.
func (g *gemmCall) run(w *workers) {
	if g.m == 0 || g.n == 0 {
		return
	}
	tilesM := (g.m + tileM - 1) / tileM
	g.tilesN = (g.n + tileN - 1) / tileN
	w.parallelFor(tilesM*g.tilesN, 1, g.tiles)
}

// runSerial computes the product on the calling goroutine, for products
// issued from inside an already parallel loop.
func (g *gemmCall) runSerial() {
	if g.m == 0 || g.n == 0 {
		return
	}
	g.tilesN = (g.n + tileN - 1) / tileN
	g.runTiles(0, ((g.m+tileM-1)/tileM)*g.tilesN)
}

func (g *gemmCall) runTiles(lo, hi int) {
	for t := lo; t < hi; t++ {
		i0, j0 := (t/g.tilesN)*tileM, (t%g.tilesN)*tileN
		g.tile(i0, min(i0+tileM, g.m), j0, min(j0+tileN, g.n))
	}
}

// tile computes rows [i0, i1) and columns [j0, j1) of C, accumulating over
// k-blocks; the first block applies beta.
func (g *gemmCall) tile(i0, i1, j0, j1 int) {
	if g.k == 0 {
		g.scaleTile(i0, i1, j0, j1)
		return
	}
	var impl gonum.Implementation
	c := g.c[i0*g.ldc+j0:]
	beta := g.beta
	for k0 := 0; k0 < g.k; k0 += tileK {
		k1 := min(k0+tileK, g.k)
		aOff := i0*g.lda + k0
		if g.transA {
			aOff = k0*g.lda + i0
		}
		bOff := k0*g.ldb + j0
		if g.transB {
			bOff = j0*g.ldb + k0
		}
		impl.Sgemm(transpose(g.transA), transpose(g.transB), i1-i0, j1-j0, k1-k0,
			g.alpha, g.a[aOff:], g.lda, g.b[bOff:], g.ldb, beta, c, g.ldc)
		beta = 1
	}
}

// scaleTile applies beta alone: an empty sum leaves C = beta·C.
func (g *gemmCall) scaleTile(i0, i1, j0, j1 int) {
	for i := i0; i < i1; i++ {
		row := g.c[i*g.ldc+j0 : i*g.ldc+j1]
		for j := range row {
			if g.beta == 0 {
				row[j] = 0
			} else {
				row[j] *= g.beta
			}
		}
	}
}

func transpose(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}
