package gemm

import (
	"sync"
	"unsafe"
)

// Blocking parameters (see the package comment for why). On Zen 5 every
// benchmark shape ran within noise (±3%) of these for kc in 192…512, mc in
// 256…1024 and nc in 256…1024: the kernels stream their operands from L2
// fast enough that the blocking only has to keep them there.
const (
	kc = 256 // depth of one pass over a C tile
	mc = 512 // rows of A per L2-resident block (512×256×4 B = 512 KiB)
	nc = 512 // columns of B packed at a time: a 256×512 block is 512 KiB
	// panelWidth is the number of columns in a B panel (two zmm vectors)
	// and of rows in an A panel of PackA. mc and nc are multiples of it.
	panelWidth = 32
)

// Operand layouts. An operand X is described by its non-k dimension r (the
// rows i of op(A), or the columns j of op(B)) and its k dimension p.
const (
	rowMajor = iota // X(r, p) = data[r·stride + p]: A, or B transposed
	kMajor          // X(r, p) = data[p·stride + r]: A transposed, or B
	panels          // packed: X(r, p) = data[(r/32)·stride·32 + p·32 + r%32], stride = k
)

type operand struct {
	layout int
	data   []float32
	stride int
}

// problem is one product C = alpha·op(A)·op(B) + beta·C with op(A) m×k and
// op(B) k×n.
type problem struct {
	m, n, k     int
	alpha, beta float32
	a, b        operand
	c           []float32
	ldc         int
}

// workspace holds one goroutine's packing buffer. Workspaces live on a
// free list so that steady-state calls allocate nothing.
type workspace struct {
	b []float32 // B panels: up to ⌈nc/32⌉ panels of kc×32
	// edge is the last, partial panel of B, zero padded, for kernels that
	// read whole vectors (kernelSet.maskedB false).
	edge []float32
	// tr holds one 16×16 block on its way from the scratch Cᵀ to C.
	tr [256]float32
}

var workspaces freeList[workspace]

// freeList keeps values for reuse. Unlike sync.Pool it never drops them at
// a garbage collection, so a steady state allocates nothing even across
// collections; it holds at most as many values as were ever in use at once.
type freeList[T any] struct {
	mu   sync.Mutex
	free []*T
}

func (l *freeList[T]) get() *T {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.free); n > 0 {
		x := l.free[n-1]
		l.free = l.free[:n-1]
		return x
	}
	return new(T)
}

func (l *freeList[T]) put(x *T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.free = append(l.free, x)
}

func grow(buf *[]float32, n int) []float32 {
	if cap(*buf) < n {
		*buf = make([]float32, n)
	}
	return (*buf)[:n]
}

// fuseBPack selects how k-major B (not transposed) is read. When true, the
// first row tile of each panel reads B in place and its kernel stores the
// rows it loads into a contiguous panel that the other row tiles then
// read (packing at the cost of two stores per k step, overlapped with the
// FMAs); when false every tile reads B in place. In place is as fast when
// B's rows map to distinct cache sets, but a power-of-two leading
// dimension maps a whole panel onto a few sets (and every row onto its
// own page), which costs up to 40% (measured on 768×3072 and 1024²).
var fuseBPack = true

// block computes rows [i0, i1) and columns [j0, j1) of C for problem p,
// using the kernels ks. j0 is a multiple of panelWidth when B is packed
// and i0 is one when A is packed, so that panels are never split.
//
// Loop order (Goto): column blocks of nc, depth blocks of kc, row blocks
// of mc; inside, each 32-column panel of B meets every row tile of the A
// block, from L1, while the A block (mc×kc) stays in L2. A is never
// copied: the kernels read it in place, row-major or k-major. (Copying
// blocks of A into contiguous memory, tried with a 128-column threshold,
// measured 0–10% slower on every benchmark shape, 4096-float rows
// included: each 14-row sliver is reused from L1/L2 across all panels.)
func (ks *kernelSet) block(w *workspace, p *problem, i0, i1, j0, j1 int) {
	k := p.k
	a, b := &p.a, &p.b
	oneBlock := i1-i0 <= mc
	fuse := b.layout == kMajor && fuseBPack
	for jc := j0; jc < j1; jc += nc {
		ncur := min(nc, j1-jc)
		np := (ncur + panelWidth - 1) / panelWidth
		for pc := 0; pc < k; pc += kc {
			kcur := min(kc, k-pc)
			ps := kcur * panelWidth
			beta := p.beta
			if pc > 0 {
				beta = 1
			}
			switch {
			case b.layout == rowMajor:
				ks.packTransposed(w, grow(&w.b, np*ps), kcur, b.data, b.stride, jc, ncur, pc)
			case fuse && oneBlock:
				grow(&w.b, ps) // one panel, filled and consumed panel after panel
			case fuse:
				grow(&w.b, np*ps)
			}
			for ic := i0; ic < i1; ic += mc {
				mcur := min(mc, i1-ic)
				var av aView
				switch a.layout {
				case panels:
					av = aView{panels, a.data[pc*panelWidth:], a.stride * panelWidth, 0}
				case rowMajor:
					av = aView{rowMajor, a.data[ic*a.stride+pc:], a.stride, ic}
				default:
					av = aView{kMajor, a.data[pc*a.stride+ic:], a.stride, ic}
				}
				for jr := 0; jr < ncur; jr += panelWidth {
					cols := min(panelWidth, ncur-jr)
					q := jr / panelWidth
					var bp, pk *float32
					bs := panelWidth
					switch {
					case !ks.maskedB && cols < panelWidth && b.layout == kMajor:
						buf := grow(&w.edge, ps)
						for pp := 0; pp < kcur; pp++ {
							row := buf[pp*panelWidth : (pp+1)*panelWidth]
							copy(row[:cols], b.data[(pc+pp)*b.stride+jc+jr:])
							clear(row[cols:])
						}
						bp = &buf[0]
					case b.layout == panels:
						bp = &b.data[((jc+jr)/panelWidth)*b.stride*panelWidth+pc*panelWidth]
					case b.layout == rowMajor:
						bp = &w.b[q*ps]
					case !fuse:
						bp, bs = &b.data[pc*b.stride+jc+jr], b.stride
					case oneBlock:
						bp, bs, pk = &b.data[pc*b.stride+jc+jr], b.stride, &w.b[0]
					case ic == i0:
						bp, bs, pk = &b.data[pc*b.stride+jc+jr], b.stride, &w.b[q*ps]
					default:
						bp = &w.b[q*ps]
					}
					ks.rowTiles(p, &av, ic, ic+mcur, kcur, bp, bs, pk, jc+jr, cols, beta)
				}
			}
		}
	}
}

// aView locates one block of A for the kernels: rows [base, base+mc) and
// depth [pc, pc+kc) of op(A).
type aView struct {
	layout int
	// A(base+r, pc+p) is at data[r·stride+p] (rowMajor), data[p·stride+r]
	// (kMajor), or data[(i/32)·stride + p·32 + i%32] (panels: stride is
	// the panel size, base 0).
	data   []float32
	stride int
	base   int
}

// rowTiles runs the kernels down rows [i0, i1) of one column panel of C
// (columns [j, j+cols)), in column chunks of ks.nr, splitting the rows into
// near-equal tiles of at most ks.mr rows; packed A is split panel by
// panel. If pk is not nil the first tile of each chunk copies the B
// columns it reads to pk, and the others read pk.
func (ks *kernelSet) rowTiles(p *problem, av *aView, i0, i1, kcur int, bp *float32, bs int, pk *float32, j, cols int, beta float32) {
	for c0 := 0; c0 < cols; c0 += ks.nr {
		w := min(ks.nr, cols-c0)
		var mask uint64 = 1<<w - 1
		ar, ak := &ks.ar2, &ks.ak2
		if 2*w <= ks.nr {
			ar, ak = &ks.ar1, &ks.ak1
		}
		// B columns [c0, c0+w): pointers stay inside the panel.
		b, s := (*float32)(unsafe.Add(unsafe.Pointer(bp), 4*c0)), bs
		var cp *float32
		if pk != nil {
			cp = (*float32)(unsafe.Add(unsafe.Pointer(pk), 4*c0))
		}
		// Segments of rows: all of them, or each A panel's.
		for lo, hi := i0, i1; lo < i1; lo = hi {
			hi = i1
			if av.layout == panels {
				hi = min(i1, (lo/panelWidth+1)*panelWidth)
			}
			rows := hi - lo
			nt := (rows + ks.mr - 1) / ks.mr
			for t := 0; t < nt; t++ {
				i, e := lo+rows*t/nt, lo+rows*(t+1)/nt
				mr := e - i
				c := &p.c[i*p.ldc+j+c0]
				switch av.layout {
				case rowMajor:
					ar[mr](kcur, &av.data[(i-av.base)*av.stride], av.stride, b, s, c, p.ldc, p.alpha, beta, mask, cp)
				case kMajor:
					ak[mr](kcur, &av.data[i-av.base], av.stride, b, s, c, p.ldc, p.alpha, beta, mask, cp)
				case panels:
					ak[mr](kcur, &av.data[(i/panelWidth)*av.stride+i%panelWidth], panelWidth, b, s, c, p.ldc, p.alpha, beta, mask, cp)
				}
				if cp != nil {
					b, s, cp = cp, panelWidth, nil
				}
			}
		}
	}
}
