package runtime

import (
	"fmt"
	"slices"
)

// prepareMatMul follows numpy's matmul: a 1-D first operand is a row
// vector and a 1-D second operand a column vector (the added dimension is
// dropped from the result), and leading batch dimensions broadcast.
func prepareMatMul(c *nodeContext) (prepared, error) {
	a, b := c.shape(0), c.shape(1)
	if len(a) == 0 || len(b) == 0 {
		return prepared{}, fmt.Errorf("operands %s and %s must not be scalars", formatShape(a), formatShape(b))
	}
	ra, rb := a, b
	if len(a) == 1 {
		ra = []int{1, a[0]}
	}
	if len(b) == 1 {
		rb = []int{b[0], 1}
	}
	m, k := ra[len(ra)-2], ra[len(ra)-1]
	n := rb[len(rb)-1]
	if rb[len(rb)-2] != k {
		return prepared{}, fmt.Errorf("operands %s and %s: inner dimensions %d and %d differ", formatShape(a), formatShape(b), k, rb[len(rb)-2])
	}
	batch, err := broadcastShapes(ra[:len(ra)-2], rb[:len(rb)-2])
	if err != nil {
		return prepared{}, fmt.Errorf("batch dimensions: %w", err)
	}
	out := slices.Clone(batch)
	if len(a) > 1 {
		out = append(out, m)
	}
	if len(b) > 1 {
		out = append(out, n)
	}
	kern := &matMulKernel{m: m, n: n, k: k, batches: numElements(batch),
		layout: newBroadcastLayout(ra[:len(ra)-2], rb[:len(rb)-2], batch)}
	// With a plain matrix as second operand, all of A's batches form one
	// tall matrix: one product instead of many small ones.
	if len(rb) == 2 {
		kern.m, kern.batches = m*kern.batches, 1
		kern.layout = newBroadcastLayout(nil, nil, nil)
	}
	return prepared{kernel: kern, outputs: [][]int{out}}, nil
}

type matMulKernel struct {
	m, n, k int
	batches int
	// layout maps a batch index to the batch offsets of A and B, in
	// matrices.
	layout broadcastLayout
	// bias: a fused bias Add (fuse.go) with a row of n in input 2; only
	// for a single product (batches 1).
	bias bool
}

func (mk *matMulKernel) bind(in, out []*Tensor, e *env) func() {
	gemm := newGemmCall()
	// Many small products (attention heads) go one per worker; few large
	// ones are each split into tiles.
	perWorker := mk.batches >= e.workers.threads && e.workers.threads > 1
	body := func(lo, hi int) {
		var g gemmCall
		for i := lo; i < hi; i++ {
			mk.setBatch(&g, i, in[0].Data, in[1].Data, out[0].Data)
			g.run(nil)
		}
	}
	return func() {
		if perWorker {
			e.workers.parallelFor(mk.batches, 1, body)
			return
		}
		for i := range mk.batches {
			mk.setBatch(gemm, i, in[0].Data, in[1].Data, out[0].Data)
			if mk.bias {
				// The product accumulates onto rows preset to the bias.
				y := out[0].Data
				for r := range mk.m {
					copy(y[r*mk.n:(r+1)*mk.n], in[2].Data)
				}
				gemm.beta = 1
			}
			gemm.run(e.workers)
		}
	}
}

// setBatch points g at the product of batch i.
func (mk *matMulKernel) setBatch(g *gemmCall, i int, a, b, c []float32) {
	aOff, bOff := mk.layout.at(i)
	aSize, bSize, cSize := mk.m*mk.k, mk.k*mk.n, mk.m*mk.n
	g.set(false, false, mk.m, mk.n, mk.k, 1,
		a[aOff*aSize:(aOff+1)*aSize], b[bOff*bSize:(bOff+1)*bSize], 0, c[i*cSize:(i+1)*cSize])
}

// at returns the operand offsets of flat output index i.
func (l *broadcastLayout) at(i int) (aOff, bOff int) {
	inner := len(l.dims) - 1
	aOff, bOff = l.offsets(i / l.dims[inner])
	col := i % l.dims[inner]
	return aOff + col*l.sa[inner], bOff + col*l.sb[inner]
}

// prepareGemm computes Y = alpha·op(A)·op(B) + beta·C with C broadcast to
// Y's shape (unidirectionally); C is optional from opset 11.
func prepareGemm(c *nodeContext) (prepared, error) {
	a, b := c.shape(0), c.shape(1)
	if len(a) != 2 || len(b) != 2 {
		return prepared{}, fmt.Errorf("inputs A %s and B %s must be matrices", formatShape(a), formatShape(b))
	}
	at := &c.attrs
	k := &gemmKernel{transA: at.int("transA", 0) != 0, transB: at.int("transB", 0) != 0,
		alpha: at.float("alpha", 1), beta: at.float("beta", 1)}
	k.m, k.k = a[0], a[1]
	if k.transA {
		k.m, k.k = a[1], a[0]
	}
	kb := b[0]
	k.n = b[1]
	if k.transB {
		kb, k.n = b[1], b[0]
	}
	if kb != k.k {
		return prepared{}, fmt.Errorf("op(A) is %d×%d but op(B) is %d×%d", k.m, k.k, kb, k.n)
	}
	out := []int{k.m, k.n}
	if c.has(2) {
		cs := c.shape(2)
		if s, err := broadcastShapes(cs, out); err != nil || !slices.Equal(s, out) {
			return prepared{}, fmt.Errorf("input C %s does not broadcast to %s", formatShape(cs), formatShape(out))
		}
		k.hasC = true
		k.layout = newBroadcastLayout(cs, cs, out)
	}
	params := fmt.Sprintf("alpha=%g beta=%g transA=%d transB=%d", k.alpha, k.beta, boolInt(k.transA), boolInt(k.transB))
	return prepared{kernel: k, outputs: [][]int{out}, params: params}, nil
}

type gemmKernel struct {
	transA, transB bool
	alpha, beta    float32
	m, n, k        int
	hasC           bool
	layout         broadcastLayout // C onto Y
}

func (gk *gemmKernel) bind(in, out []*Tensor, e *env) func() {
	gemm := newGemmCall()
	return func() {
		y := out[0].Data
		beta := float32(0)
		if gk.hasC {
			broadcastCopy(y, in[2].Data, &gk.layout)
			beta = gk.beta
		}
		gemm.set(gk.transA, gk.transB, gk.m, gk.n, gk.k, gk.alpha, in[0].Data, in[1].Data, beta, y)
		gemm.run(e.workers)
	}
}

// broadcastCopy writes src, broadcast by the layout's first operand, into
// dst.
func broadcastCopy(dst, src []float32, l *broadcastLayout) {
	inner := len(l.dims) - 1
	width := l.dims[inner]
	for row := range len(dst) / max(width, 1) {
		off, _ := l.offsets(row)
		d := dst[row*width : (row+1)*width]
		if l.sa[inner] == 1 {
			copy(d, src[off:off+width])
		} else {
			fillValue(d, src[off])
		}
	}
}
