package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// kernelSets returns the implementations this machine can run, the
// portable one included, so that every test covers both.
func kernelSets() []*kernelSet {
	sets := []*kernelSet{defaultKernels}
	sets = append(sets, extraKernelSets()...)
	if defaultKernels.name != "go" {
		sets = append(sets, goKernels())
	}
	return sets
}

// withKernels runs f with ks as the package's kernels: for the fastest
// kernels once for each way of reading B and with products computed
// directly, transposed, or as the cost model decides (the driver is the
// same for all kernels); for the others with the defaults.
func withKernels(ks *kernelSet, f func()) {
	saved, savedFuse, savedSwap := defaultKernels, fuseBPack, forceSwap
	defer func() { defaultKernels, fuseBPack, forceSwap = saved, savedFuse, savedSwap }()
	defaultKernels = ks
	if ks != saved {
		f()
		return
	}
	for _, v := range []struct {
		fuse bool
		swap int
	}{{true, 0}, {false, 1}, {true, 2}} {
		fuseBPack, forceSwap = v.fuse, v.swap
		f()
	}
}

type gemmCase struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	padA, padB     int // leading dimension minus row length
	padC           int
	threads        int
}

func (tc gemmCase) String() string {
	return fmt.Sprintf("tA=%v tB=%v m=%d n=%d k=%d alpha=%v beta=%v pad=%d,%d,%d threads=%d kernels=%s fuse=%v swap=%d",
		tc.transA, tc.transB, tc.m, tc.n, tc.k, tc.alpha, tc.beta, tc.padA, tc.padB, tc.padC, tc.threads,
		defaultKernels.name, fuseBPack, forceSwap)
}

// operands builds random A, B, C for tc with the leading dimensions it
// asks for; C's padding and, when beta is 0, its elements are NaN.
func (tc gemmCase) operands(rng *rand.Rand) (a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	ra, ca := tc.m, tc.k
	if tc.transA {
		ra, ca = tc.k, tc.m
	}
	rb, cb := tc.k, tc.n
	if tc.transB {
		rb, cb = tc.n, tc.k
	}
	lda, ldb, ldc = max(1, ca+tc.padA), max(1, cb+tc.padB), max(1, tc.n+tc.padC)
	a = randSlice(rng, ra*lda)
	b = randSlice(rng, rb*ldb)
	c = randSlice(rng, tc.m*ldc)
	for i := range c {
		if tc.beta == 0 || i%ldc >= tc.n {
			c[i] = float32(math.NaN())
		}
	}
	return
}

func randSlice(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = 2*rng.Float32() - 1
	}
	return s
}

// check compares got (C after the call) with a float64 reference computed
// from c0 (C before it), with a float32 error bound that grows with k.
func (tc gemmCase) check(t *testing.T, a []float32, lda int, b []float32, ldb int, c0, got []float32, ldc int) {
	t.Helper()
	// op(A) by rows and op(B) by columns, in float64, for contiguous dots.
	at := make([]float64, tc.m*tc.k)
	bt := make([]float64, tc.n*tc.k)
	for p := 0; p < tc.k; p++ {
		for i := 0; i < tc.m; i++ {
			if tc.transA {
				at[i*tc.k+p] = float64(a[p*lda+i])
			} else {
				at[i*tc.k+p] = float64(a[i*lda+p])
			}
		}
		for j := 0; j < tc.n; j++ {
			if tc.transB {
				bt[j*tc.k+p] = float64(b[j*ldb+p])
			} else {
				bt[j*tc.k+p] = float64(b[p*ldb+j])
			}
		}
	}
	for i := 0; i < tc.m; i++ {
		for j := 0; j < ldc; j++ {
			g := got[i*ldc+j]
			if j >= tc.n {
				if !math.IsNaN(float64(g)) {
					t.Fatalf("%v: C(%d,%d) outside the matrix written: %v", tc, i, j, g)
				}
				continue
			}
			var s, abs float64
			ar, br := at[i*tc.k:(i+1)*tc.k], bt[j*tc.k:(j+1)*tc.k]
			for p, x := range ar {
				x *= br[p]
				s += x
				abs += math.Abs(x)
			}
			want := float64(tc.alpha) * s
			bound := math.Abs(float64(tc.alpha)) * abs
			if tc.beta != 0 {
				want += float64(tc.beta) * float64(c0[i*ldc+j])
				bound += math.Abs(float64(tc.beta) * float64(c0[i*ldc+j]))
			}
			tol := 1e-6*float64(tc.k+4)*bound + 1e-30
			if d := math.Abs(float64(g) - want); !(d <= tol) {
				t.Fatalf("%v: C(%d,%d) = %v, want %v (|diff| %g > %g)", tc, i, j, g, want, d, tol)
			}
		}
	}
}

func (tc gemmCase) run(t *testing.T, rng *rand.Rand) {
	t.Helper()
	a, lda, b, ldb, c, ldc := tc.operands(rng)
	c0 := append([]float32(nil), c...)
	SgemmParallel(tc.threads, tc.transA, tc.transB, tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, tc.beta, c, ldc)
	tc.check(t, a, lda, b, ldb, c0, c, ldc)
}

var testShapes = [][3]int{
	{0, 0, 0}, {0, 5, 5}, {5, 0, 5}, {5, 5, 0}, {1, 1, 1}, {7, 13, 5}, {33, 65, 17},
	{1, 50, 20}, {50, 1, 20}, {20, 30, 1}, {1, 1, 300}, {14, 32, 256}, {15, 33, 257},
	{29, 47, 300}, {100, 49, 70}, {49, 100, 70}, {64, 196, 40}, {3, 600, 9}, {600, 3, 9},
	{530, 40, 20}, {20, 2100, 10}, {13, 17, 520},
}

func TestSgemmTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, ks := range kernelSets() {
		withKernels(ks, func() {
			for _, s := range testShapes {
				for _, tr := range [4][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
					for _, alpha := range []float32{1, 0.5} {
						for _, beta := range []float32{0, 1, 0.25} {
							for _, pad := range []int{0, 3} {
								tc := gemmCase{tr[0], tr[1], s[0], s[1], s[2], alpha, beta, pad, 2 * pad, pad, 1}
								tc.run(t, rng)
							}
						}
					}
				}
			}
		})
	}
}

func TestSgemmParallel(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	shapes := [][3]int{{64, 300, 50}, {300, 64, 50}, {200, 49, 300}, {49, 200, 300}, {5, 2000, 40}, {2000, 5, 40}, {96, 96, 96}, {130, 530, 260}, {530, 600, 300}}
	for _, ks := range kernelSets() {
		withKernels(ks, func() {
			for _, s := range shapes {
				if defaultKernels.name == "go" && s[0]*s[1]*s[2] > 5e6 {
					continue // slow, and the driver is covered by the fast kernels
				}
				for _, tr := range [4][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
					for _, threads := range []int{2, 3, 8} {
						tc := gemmCase{tr[0], tr[1], s[0], s[1], s[2], 0.5, 0.25, 1, 0, 2, threads}
						tc.run(t, rng)
					}
				}
			}
		})
	}
}

// TestAlphaZero: alpha = 0 scales C by beta without reading A or B (NaN
// in them must not leak), like the reference BLAS.
func TestAlphaZero(t *testing.T) {
	a := []float32{float32(math.NaN()), 1, 2, 3}
	b := []float32{1, float32(math.NaN()), 2, 3}
	c := []float32{1, 2, 3, 4}
	Sgemm(false, false, 2, 2, 2, 0, a, 2, b, 2, 2, c, 2)
	if c[0] != 2 || c[1] != 4 || c[2] != 6 || c[3] != 8 {
		t.Fatalf("alpha=0, beta=2: got %v", c)
	}
	Sgemm(false, false, 2, 2, 2, 0, a, 2, b, 2, 0, c, 2)
	if c[0] != 0 || c[3] != 0 {
		t.Fatalf("alpha=0, beta=0: got %v", c)
	}
}

func TestPacked(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	shapes := [][3]int{{0, 3, 3}, {3, 3, 0}, {1, 1, 1}, {7, 13, 5}, {33, 65, 17}, {64, 49, 300}, {512, 49, 64}, {100, 300, 260}, {45, 17, 33}}
	for _, ks := range kernelSets() {
		withKernels(ks, func() {
			for _, s := range shapes {
				for _, tr := range [4][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
					for _, threads := range []int{1, 2} {
						tc := gemmCase{tr[0], tr[1], s[0], s[1], s[2], 0.5, 0.25, 2, 1, 1, threads}
						a, lda, b, ldb, c, ldc := tc.operands(rng)
						c0 := append([]float32(nil), c...)
						pa := PackA(tc.transA, tc.m, tc.k, a, lda)
						if pa.M() != tc.m || pa.K() != tc.k {
							t.Fatalf("PackA dims %d×%d", pa.M(), pa.K())
						}
						SgemmPackedA(threads, pa, tc.transB, tc.n, tc.alpha, b, ldb, tc.beta, c, ldc)
						tc.check(t, a, lda, b, ldb, c0, c, ldc)
						copy(c, c0)
						pb := PackB(tc.transB, tc.k, tc.n, b, ldb)
						if pb.K() != tc.k || pb.N() != tc.n {
							t.Fatalf("PackB dims %d×%d", pb.K(), pb.N())
						}
						SgemmPackedB(threads, tc.transA, tc.m, tc.alpha, a, lda, pb, tc.beta, c, ldc)
						tc.check(t, a, lda, b, ldb, c0, c, ldc)
					}
				}
			}
		})
	}
}

// TestAgainstGonum is a property test: random shapes, transpositions,
// scalars and leading dimensions agree with gonum's Sgemm.
func TestAgainstGonum(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	var impl gonum.Implementation
	n := 300
	if testing.Short() {
		n = 50
	}
	for it := 0; it < n; it++ {
		tc := gemmCase{
			transA: rng.IntN(2) == 1, transB: rng.IntN(2) == 1,
			m: rng.IntN(80), n: rng.IntN(80), k: rng.IntN(80),
			alpha: []float32{1, 0.5, -2}[rng.IntN(3)], beta: []float32{0, 1, 0.25, -1}[rng.IntN(4)],
			padA: rng.IntN(3), padB: rng.IntN(3), padC: rng.IntN(3), threads: 1 + rng.IntN(3),
		}
		if it%10 == 0 {
			tc.m, tc.n, tc.k = 1+rng.IntN(400), 1+rng.IntN(400), 1+rng.IntN(400)
		}
		a, lda, b, ldb, c, ldc := tc.operands(rng)
		if tc.beta == 0 {
			for i := range c {
				c[i] = 0 // gonum reads C under beta = 0 only through 0·C; keep it finite
			}
		}
		want := append([]float32(nil), c...)
		SgemmParallel(tc.threads, tc.transA, tc.transB, tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, tc.beta, c, ldc)
		impl.Sgemm(trans(tc.transA), trans(tc.transB), tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, tc.beta, want, ldc)
		for i := 0; i < tc.m; i++ {
			for j := 0; j < tc.n; j++ {
				g, w := c[i*ldc+j], want[i*ldc+j]
				tol := 1e-6 * float64(tc.k+4) * (float64(tc.k) + 1) * 2
				if d := math.Abs(float64(g - w)); !(d <= tol) {
					t.Fatalf("%v: C(%d,%d) = %v, gonum %v", tc, i, j, g, w)
				}
			}
		}
	}
}

func trans(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

func TestPanics(t *testing.T) {
	cases := []func(){
		func() { Sgemm(false, false, -1, 1, 1, 1, nil, 1, nil, 1, 0, nil, 1) },
		func() {
			Sgemm(false, false, 2, 2, 2, 1, make([]float32, 4), 1, make([]float32, 4), 2, 0, make([]float32, 4), 2)
		},
		func() {
			Sgemm(false, false, 2, 2, 2, 1, make([]float32, 3), 2, make([]float32, 4), 2, 0, make([]float32, 4), 2)
		},
		func() {
			Sgemm(false, false, 2, 2, 2, 1, make([]float32, 4), 2, make([]float32, 4), 2, 0, make([]float32, 3), 2)
		},
		func() {
			Sgemm(true, false, 2, 3, 2, 1, make([]float32, 4), 1, make([]float32, 6), 3, 0, make([]float32, 6), 3)
		},
	}
	for i, f := range cases {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("case %d: no panic", i)
				}
			}()
			f()
		}()
	}
}

// TestAllocs checks that steady-state calls allocate nothing, serial or
// parallel, direct or transposed, packed or not.
func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own account")
	}
	shapes := [][3]int{{64, 3136, 64}, {512, 49, 256}, {64, 64, 64}, {600, 40, 30}}
	for _, s := range shapes {
		m, n, k := s[0], s[1], s[2]
		a, b, c := make([]float32, m*k), make([]float32, k*n), make([]float32, m*n)
		pa := PackA(false, m, k, a, k)
		pb := PackB(false, k, n, b, n)
		for _, threads := range []int{1, 2} {
			for _, beta := range []float32{0, 1} {
				for _, tr := range [4][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
					lda, ldb := k, n
					if tr[0] {
						lda = m
					}
					if tr[1] {
						ldb = k
					}
					f := func() { SgemmParallel(threads, tr[0], tr[1], m, n, k, 1, a, lda, b, ldb, beta, c, n) }
					f()
					if allocs := testing.AllocsPerRun(10, f); allocs > 0 {
						t.Errorf("%v threads=%d beta=%v trans=%v: %v allocations per call", s, threads, beta, tr, allocs)
					}
				}
				f := func() {
					SgemmPackedA(threads, pa, false, n, 1, b, n, beta, c, n)
					SgemmPackedB(threads, false, m, 1, a, k, pb, beta, c, n)
				}
				f()
				if allocs := testing.AllocsPerRun(10, f); allocs > 0 {
					t.Errorf("%v threads=%d beta=%v packed: %v allocations per call", s, threads, beta, allocs)
				}
			}
		}
	}
}

func FuzzSgemm(f *testing.F) {
	f.Add(uint8(3), uint8(5), uint8(7), uint8(0), uint8(1), uint8(0), uint64(1))
	f.Add(uint8(33), uint8(49), uint8(17), uint8(3), uint8(2), uint8(1), uint64(2))
	f.Fuzz(func(t *testing.T, m, n, k, flags, pads, threads uint8, seed uint64) {
		tc := gemmCase{
			transA: flags&1 != 0, transB: flags&2 != 0,
			m: int(m % 70), n: int(n % 70), k: int(k % 70),
			alpha: []float32{1, 0.5, -1.5, 0}[flags>>2&3], beta: []float32{0, 1, 0.25, -2}[flags>>4&3],
			padA: int(pads & 3), padB: int(pads >> 2 & 3), padC: int(pads >> 4 & 3),
			threads: int(threads%4) + 1,
		}
		tc.run(t, rand.New(rand.NewPCG(seed, 7)))
	})
}

// goRunner runs each part on its own goroutine.
type goRunner int

func (r goRunner) Threads() int { return int(r) }

func (r goRunner) RunParts(parts int, part func(i int)) {
	var wg sync.WaitGroup
	for i := range parts {
		wg.Add(1)
		go func() { defer wg.Done(); part(i) }()
	}
	wg.Wait()
}

// TestSgemmOn: products whose parts a Runner runs equal the package's own
// parallel products bit for bit, packed A included.
func TestSgemmOn(t *testing.T) {
	for _, s := range [][3]int{{64, 768, 768}, {256, 196, 2304}, {512, 49, 4608}, {3, 5, 7}} {
		m, n, k := s[0], s[1], s[2]
		a, b, _ := benchOperands(m, n, k)
		want, got := make([]float32, m*n), make([]float32, m*n)
		SgemmParallel(3, false, false, m, n, k, 1, a, k, b, n, 0, want, n)
		SgemmOn(goRunner(3), false, false, m, n, k, 1, a, k, b, n, 0, got, n)
		if !slices.Equal(got, want) {
			t.Fatalf("%v: SgemmOn differs from SgemmParallel", s)
		}
		pa := PackA(false, m, k, a, k)
		SgemmPackedAOn(goRunner(3), pa, false, n, 1, b, n, 0, got, n)
		SgemmPackedA(3, pa, false, n, 1, b, n, 0, want, n)
		if !slices.Equal(got, want) {
			t.Fatalf("%v: SgemmPackedAOn differs from SgemmPackedA", s)
		}
	}
}
