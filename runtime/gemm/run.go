package gemm

import (
	"sync"
	"sync/atomic"
)

const (
	// maxThreads bounds the goroutines one call uses.
	maxThreads = 64
	// minFlopsPerThread keeps parts large enough that waking a worker
	// (a few µs) is worth it: 2 Mflop is ~10 µs of one core's kernel time.
	minFlopsPerThread = 2 << 20
)

// Runner runs the parts of a parallel product on its own goroutines, so
// that a caller with a thread pool (the runtime's sessions) keeps every
// parallel loop on one set of threads.
type Runner interface {
	// Threads is how many parts may run at once.
	Threads() int
	// RunParts calls part(i) for every i in [0, parts), possibly at once,
	// and returns when all have returned.
	RunParts(parts int, part func(i int))
}

// run computes p with up to threads goroutines: r's, or the package's own
// when r is nil.
func run(threads int, r Runner, p *problem) {
	if p.m == 0 || p.n == 0 {
		return
	}
	if p.k == 0 || p.alpha == 0 {
		scaleC(p.m, p.n, p.beta, p.c, p.ldc)
		return
	}
	ks := defaultKernels
	j := jobs.get()
	j.ks = ks
	j.out = *p
	j.p = *p
	j.swapped = false
	if swapPays(ks, p) {
		// Compute T = Cᵀ = op(B)ᵀ·op(A)ᵀ into scratch, then C = T ᵀ + beta·C.
		// An operand's description does not depend on which side it is on.
		j.swapped = true
		j.p = problem{m: p.n, n: p.m, k: p.k, alpha: p.alpha, beta: 0, a: p.b, b: p.a, ldc: p.m}
		if cap(j.t) < p.m*p.n {
			j.t = make([]float32, p.m*p.n)
		}
		j.p.c = j.t[:p.m*p.n]
	}
	q := &j.p
	flops := 2 * float64(q.m) * float64(q.n) * float64(q.k)
	t := max(1, min(threads, maxThreads, int(flops/minFlopsPerThread)))
	j.split(t)
	if r != nil && j.parts > 1 {
		if j.partFn == nil {
			j.partFn = j.runPart // bound once per pooled job: no allocation per call
		}
		r.RunParts(j.parts, j.partFn)
		j.out, j.p = problem{}, problem{}
		jobs.put(j)
		return
	}
	if j.parts > 1 {
		startWorkers(j.parts - 1)
		j.wg.Add(j.parts - 1)
		for i := 1; i < j.parts; i++ {
			work <- task{j, i}
		}
	}
	j.runPart(0)
	if j.parts > 1 {
		j.wg.Wait()
	}
	j.out, j.p = problem{}, problem{}
	jobs.put(j)
}

// job is one call's shared state; jobs are pooled so that a call allocates
// nothing once the pools are warm.
type job struct {
	ks      *kernelSet
	out     problem // the caller's product
	p       problem // the product computed: out, or its transpose into t
	swapped bool
	t       []float32 // scratch for the transposed product
	// Parts: byCols splits the columns of p.c at bounds, else the rows.
	byCols bool
	parts  int
	bounds [maxThreads + 1]int
	wg     sync.WaitGroup
	partFn func(i int) // runPart, for a Runner
}

var jobs freeList[job]

// split cuts p.c into t parts of near-equal work. Columns split at panel
// boundaries and leave each part its own B panels; rows split finely but
// make every part transpose the same B panels, so columns win unless they
// balance badly.
func (j *job) split(t int) {
	q := &j.p
	j.parts = t
	np := (q.n + panelWidth - 1) / panelWidth
	j.byCols = true
	if t > 1 {
		// Imbalance of a column split: the largest part over the mean.
		colImb := float64((np+t-1)/t*t) / float64(np)
		rowUnit := 1
		if q.a.layout == panels {
			rowUnit = panelWidth
		}
		units := (q.m + rowUnit - 1) / rowUnit
		rowImb := float64((units+t-1)/t*t) / float64(units)
		if np < t || (colImb > 1.1 && rowImb < colImb) {
			j.byCols = false
		}
		if j.byCols {
			t = min(t, np)
			for i := 0; i <= t; i++ {
				j.bounds[i] = min(q.n, np*i/t*panelWidth)
			}
		} else {
			t = min(t, units)
			for i := 0; i <= t; i++ {
				j.bounds[i] = min(q.m, units*i/t*rowUnit)
			}
		}
		j.parts = t
	}
	if t <= 1 {
		j.parts = 1
		j.byCols = true
		j.bounds[0], j.bounds[1] = 0, q.n
	}
}

// runPart computes part i and, for a transposed product, moves it into
// the caller's C.
func (j *job) runPart(i int) {
	w := workspaces.get()
	q := &j.p
	i0, i1, j0, j1 := 0, q.m, 0, q.n
	if j.byCols {
		j0, j1 = j.bounds[i], j.bounds[i+1]
	} else {
		i0, i1 = j.bounds[i], j.bounds[i+1]
	}
	j.ks.block(w, q, i0, i1, j0, j1)
	if j.swapped {
		// Rows [i0, i1) of T are columns of C, columns [j0, j1) its rows.
		o := &j.out
		j.ks.transposeInto(w, o.c, o.ldc, q.c, q.ldc, o.beta, j0, j1, i0, i1)
	}
	workspaces.put(w)
}

// forceSwap overrides swapPays in tests and benchmarks: 1 never swaps, 2
// always does.
var forceSwap = 0

// swapPays reports whether computing Cᵀ = op(B)ᵀ·op(A)ᵀ and transposing
// it is estimated faster than computing C directly.
func swapPays(ks *kernelSet, p *problem) bool {
	if forceSwap != 0 {
		return forceSwap == 2
	}
	direct := cost(ks, p.m, p.n, p.k, p.b.layout == rowMajor)
	swapped := cost(ks, p.n, p.m, p.k, p.a.layout == rowMajor) + ks.transposeCycles*float64(p.m)*float64(p.n)
	return swapped < 0.97*direct
}

// cost estimates the cycles of an m×n×k product: per k step, a tile of
// mr rows and nv vectors issues mr·nv FMAs at two per cycle, but no faster
// than the 4-cycle FMA latency allows with mr·nv independent chains (8
// chains keep both pipes busy); plus transposing B when packB. A last
// tile of up to nr/2 columns runs 1-vector kernels, which by this count
// cost half a full tile, but measure (Zen 5, N = 196 against its
// transpose) at nearly a full one: the same A sliver is streamed for half
// the FMAs; it is counted as 0.9.
func cost(ks *kernelSet, m, n, k int, packB bool) float64 {
	// Row tiles are balanced: nt-r of height h and r of height h+1.
	nt := (m + ks.mr - 1) / ks.mr
	h, r := m/nt, m%nt
	tileCycles := func(nv int) float64 {
		return float64(nt-r)*max(float64(h*nv), 8)/2 + float64(r)*max(float64((h+1)*nv), 8)/2
	}
	full, rem := n/ks.nr, n%ks.nr
	c := float64(full) * tileCycles(2)
	if rem > ks.nr/2 {
		c += tileCycles(2)
	} else if rem > 0 {
		c += 0.9 * tileCycles(2)
	}
	c *= float64(k)
	if packB {
		c += ks.packCycles * float64(n) * float64(k)
	}
	return c
}

// task is one part of a job, sent to a worker.
type task struct {
	j    *job
	part int
}

var (
	work       = make(chan task, maxThreads)
	workersMu  sync.Mutex
	numWorkers atomic.Int32
)

// startWorkers makes sure that at least n worker goroutines exist. Workers
// live for the rest of the process, blocked on the work channel when idle.
func startWorkers(n int) {
	if int(numWorkers.Load()) >= n {
		return
	}
	workersMu.Lock()
	defer workersMu.Unlock()
	for int(numWorkers.Load()) < n {
		go worker()
		numWorkers.Add(1)
	}
}

func worker() {
	for t := range work {
		t.j.runPart(t.part)
		t.j.wg.Done()
	}
}

// Transposes reports whether SgemmParallel computes an m×n×k product of
// row-major A and B (neither transposed) as Cᵀ = Bᵀ·Aᵀ. Callers with a
// constant A use it to decide whether packing A pays: in a transposed
// product A is the operand transposed into panels on every call, while in
// a direct one A is read in place in taller row tiles than its 32-row
// panels allow.
func Transposes(m, n, k int) bool {
	p := problem{m: m, n: n, k: k, a: operand{layout: rowMajor}, b: operand{layout: kMajor}}
	return swapPays(defaultKernels, &p)
}
