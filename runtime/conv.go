package runtime

import (
	"fmt"
	"math"
	"slices"

	"rulebook/runtime/gemm"
)

// prepareConv handles Conv over one or two spatial dimensions; a 1-D
// convolution runs as a 2-D one of height 1.
func prepareConv(c *nodeContext) (prepared, error) {
	x, w := c.shape(0), c.shape(1)
	if len(x) < 3 || len(x) != len(w) {
		return prepared{}, fmt.Errorf("input X %s and weights W %s must have the same rank, at least 3", formatShape(x), formatShape(w))
	}
	if len(x) > 4 {
		return prepared{}, fmt.Errorf("convolution over %d spatial dimensions is not supported (1 and 2 are)", len(x)-2)
	}
	a := &c.attrs
	group := a.int("group", 1)
	if group < 1 || int64(x[1]) != int64(w[1])*group || int64(w[0])%group != 0 {
		return prepared{}, fmt.Errorf("group %d does not fit X %s and W %s (X channels = group × W dim 1, W dim 0 divisible by group)", group, formatShape(x), formatShape(w))
	}
	kernel := w[2:]
	if ks := a.ints("kernel_shape", nil); ks != nil && !slices.Equal(toInts(ks), kernel) {
		return prepared{}, fmt.Errorf("kernel_shape %v does not match W %s", ks, formatShape(w))
	}
	if c.has(2) && !slices.Equal(c.shape(2), w[:1]) {
		return prepared{}, fmt.Errorf("bias B %s must be [%d]", formatShape(c.shape(2)), w[0])
	}
	win, err := resolveWindow(a, x[2:], kernel, false)
	if err != nil {
		return prepared{}, err
	}
	out := append([]int{x[0], w[0]}, win.out...)
	k := newConvKernel(x, w[0], int(group), win, c.has(2))
	k.constW = c.inputs[1].isConst()
	return prepared{kernel: k, outputs: [][]int{out}, params: paramString(append(win.params(), fmt.Sprintf("group=%d", group))...)}, nil
}

// convKernel computes a convolution as one matrix product per image and
// group: W_g (M/g × C/g·kh·kw) times the image's columns (C/g·kh·kw ×
// oh·ow), the columns gathered by im2col into the scratch buffer. A 1×1
// kernel with stride 1 and no padding needs no gathering: in NCHW the
// image already is its column matrix.
type convKernel struct {
	batch, channels, height, width int
	filters, outH, outW            int
	kh, kw, sh, sw, dh, dw, pt, pl int
	group                          int
	direct                         bool
	hasBias                        bool
	relu                           bool // a fused Relu follows (fuse.go)
	constW                         bool // weights known at load: packed once per session
}

func (k *convKernel) withRelu() kernel {
	fused := *k
	fused.relu = true
	return &fused
}

func newConvKernel(x []int, filters, group int, win window, hasBias bool) *convKernel {
	k := &convKernel{batch: x[0], channels: x[1], filters: filters, group: group, hasBias: hasBias}
	// A 1-D convolution is a 2-D one over a single row.
	lift := func(v []int, one int) (int, int) {
		if len(v) == 1 {
			return one, v[0]
		}
		return v[0], v[1]
	}
	k.height, k.width = lift(win.in, 1)
	k.outH, k.outW = lift(win.out, 1)
	k.kh, k.kw = lift(win.kernel, 1)
	k.sh, k.sw = lift(win.strides, 1)
	k.dh, k.dw = lift(win.dilations, 1)
	k.pt, k.pl = lift(win.padBegin, 0)
	k.direct = k.kh == 1 && k.kw == 1 && k.sh == 1 && k.sw == 1 &&
		slices.Max(append(slices.Clone(win.padBegin), win.padEnd...)) == 0
	return k
}

// colRows is the number of rows of one group's column matrix.
func (k *convKernel) colRows() int { return k.channels / k.group * k.kh * k.kw }

func (k *convKernel) scratchSize(threads int) int {
	if k.direct {
		return 0
	}
	rows, copies := k.blockRows(), 1
	if b := k.tileBlocks(threads); b > 0 {
		rows, copies = k.tileRows(b), threads
	}
	n, err := checkedElements([]int{copies, k.colRows(), rows, k.outW})
	if err != nil {
		return maxTensorElements + 1 // reported by NewSession, never folded
	}
	return n
}

// Column blocks. A column matrix of a large image (288 × 147·147 floats in
// inception_v3's second layer, 25 MB) does not fit in cache: written by
// im2col and read back by the product from memory, it held those layers
// to a third of the product's speed. Gathering and multiplying blocks of
// output rows whose columns fit in about colBudget floats keeps them in
// L2; blocks keep at least minBlockCols columns, because a product over
// fewer runs its kernels in poorly filled panels.
const (
	colBudget    = 1 << 17 // floats: 512 KiB
	minBlockCols = 1024
)

// productCols is the width of one product: a block's or tile's
// positions, or all of them for a direct convolution.
func (k *convKernel) productCols(threads int) int {
	if b := k.tileBlocks(threads); b > 0 {
		return k.tileRows(b) * k.outW
	}
	if k.direct {
		return k.outH * k.outW
	}
	return k.blockRows() * k.outW
}

// Tiles. On several threads a convolution run as three parallel steps per
// block (gather, product, epilogue) waits at three barriers, and at two
// threads scaled 1.3× on inception_v3. Run as tiles instead (image,
// group and block of output rows), each worker gathers, multiplies and
// finishes its own tiles with nothing shared, the columns it gathered
// still in its cache. An image's rows are cut into the fewest blocks
// (near-equal, within a row) such that the tiles are a multiple of the
// thread count, so the threads get equal shares, or at least 8 a thread;
// each block has at least minTileCols positions and gathers at most
// 2·colBudget floats. Where no cut fits (a small image, or one output
// row gathering more than 2·colBudget) the steps stay parallel. A direct
// convolution, which gathers nothing, runs as tiles only on images of at
// least minDirectTileCols positions a thread: on smaller ones the
// product's own split (by filters, when positions are few) is better.
const (
	minTileCols       = 32
	minDirectTileCols = 256
)

// tileBlocks is the number of row blocks per image and group when the
// convolution runs as tiles, or 0 where it runs as parallel steps (also
// on one thread, where tiles gain nothing).
func (k *convKernel) tileBlocks(threads int) int {
	rowFloats := k.colRows() * k.outW
	if threads <= 1 || k.outH < 1 || (k.direct && k.outH*k.outW < threads*minDirectTileCols) || (!k.direct && rowFloats > 2*colBudget) {
		return 0
	}
	least := 1 // blocks within the gathering budget
	if !k.direct {
		least = (k.outH + 2*colBudget/rowFloats - 1) / (2 * colBudget / rowFloats)
	}
	most := k.outH / max(1, (minTileCols+k.outW-1)/k.outW) // blocks of minTileCols positions
	planes := k.batch * k.group
	for b := least; b <= most; b++ {
		if tiles := b * planes; tiles >= threads && (tiles%threads == 0 || tiles >= 8*threads) {
			return b
		}
	}
	return 0
}

// tileRange is the output rows [y0, y1) of row block blk of blocks.
func (k *convKernel) tileRange(blk, blocks int) (int, int) {
	return blk * k.outH / blocks, (blk + 1) * k.outH / blocks
}

// tileRows is the most output rows a tile has.
func (k *convKernel) tileRows(blocks int) int { return (k.outH + blocks - 1) / blocks }

// blockRows is the number of output rows gathered and multiplied at once
// when the convolution runs as parallel steps.
func (k *convKernel) blockRows() int {
	rows := max(colBudget/max(k.colRows()*k.outW, 1), (minBlockCols+k.outW-1)/max(k.outW, 1), 1)
	if rows >= k.outH {
		return max(k.outH, 1)
	}
	// Even blocks: the last is not a sliver.
	blocks := (k.outH + rows - 1) / rows
	return (k.outH + blocks - 1) / blocks
}

func (k *convKernel) bind(in, out []*Tensor, e *env) func() {
	call := newGemmCall()
	cols := &im2col{k: k}
	cols.body = cols.rows
	epi := &convEpilogue{relu: k.relu, stride: k.outH * k.outW}
	epi.body = epi.rows
	packed := k.packWeights(in[1], e.workers.threads)
	if blocks := k.tileBlocks(e.workers.threads); blocks > 0 {
		return k.bindTiles(in, out, e, packed, blocks)
	}
	return func() {
		x := in[0].Data
		inPlane, cg := k.height*k.width, k.channels/k.group
		for b := range k.batch {
			for g := range k.group {
				xg := x[(b*k.channels+g*cg)*inPlane : (b*k.channels+(g+1)*cg)*inPlane]
				if k.direct {
					k.block(call, packed, epi, in, out, e.workers, b, g, xg, 0, k.outH)
					continue
				}
				for y0 := 0; y0 < k.outH; y0 += k.blockRows() {
					y1 := min(y0+k.blockRows(), k.outH)
					cols.src, cols.y0, cols.y1 = xg, y0, y1
					cols.dst = e.scratch[:k.colRows()*(y1-y0)*k.outW]
					e.workers.parallelFor(k.colRows(), 1, cols.body)
					k.block(call, packed, epi, in, out, e.workers, b, g, cols.dst, y0, y1)
				}
			}
		}
	}
}

// bindTiles runs the convolution as tiles, blocks of them per image and
// group (see tileBlocks), each gathered, multiplied and finished by one
// worker in its own part of the scratch.
func (k *convKernel) bindTiles(in, out []*Tensor, e *env, packed []*gemm.PackedA, blocks int) func() {
	threads := e.workers.threads
	per := k.colRows() * k.tileRows(blocks) * k.outW // a worker's gathered columns
	type worker struct {
		call *gemmCall
		cols *im2col
		epi  *convEpilogue
	}
	ws := make([]worker, threads)
	for i := range ws {
		ws[i] = worker{newGemmCall(), &im2col{k: k}, &convEpilogue{relu: k.relu, stride: k.outH * k.outW}}
	}
	inPlane, cg := k.height*k.width, k.channels/k.group
	body := func(id, lo, hi int) {
		w := &ws[id]
		for t := lo; t < hi; t++ {
			b, g, blk := t/(k.group*blocks), t/blocks%k.group, t%blocks
			y0, y1 := k.tileRange(blk, blocks)
			xg := in[0].Data[(b*k.channels+g*cg)*inPlane : (b*k.channels+(g+1)*cg)*inPlane]
			if k.direct {
				k.block(w.call, packed, w.epi, in, out, nil, b, g, xg, y0, y1)
				continue
			}
			w.cols.src, w.cols.y0, w.cols.y1 = xg, y0, y1
			w.cols.dst = e.scratch[id*per : id*per+k.colRows()*(y1-y0)*k.outW]
			w.cols.rows(0, k.colRows())
			k.block(w.call, packed, w.epi, in, out, nil, b, g, w.cols.dst, y0, y1)
		}
	}
	return func() { e.workers.parallelForID(k.batch*k.group*blocks, body) }
}

// block computes output rows [y0, y1) of image b, group g, from their
// column matrix (the image itself for a direct convolution), and runs the
// epilogue over them: in parallel on w, or on the calling goroutine when
// w is nil.
func (k *convKernel) block(call *gemmCall, packed []*gemm.PackedA, epi *convEpilogue, in, out []*Tensor, w *workers, b, g int, colMatrix []float32, y0, y1 int) {
	outPlane, mg, rows := k.outH*k.outW, k.filters/k.group, k.colRows()
	c0, n := y0*k.outW, (y1-y0)*k.outW
	yg := out[0].Data[(b*k.filters+g*mg)*outPlane : (b*k.filters+(g+1)*mg)*outPlane]
	cols, ldb := colMatrix, n
	if k.direct { // the image is the column matrix: its rows are whole planes
		cols, ldb = colMatrix[c0:], outPlane
	}
	call.set(false, false, mg, n, rows, 1, in[1].Data[g*mg*rows:(g+1)*mg*rows], cols, 0, yg[c0:])
	call.ldb, call.ldc = ldb, outPlane
	if packed != nil {
		call.runPackedA(w, packed[g])
	} else {
		call.run(w)
	}
	if k.hasBias || k.relu {
		epi.dst, epi.bias, epi.lo, epi.hi = yg, nil, c0, c0+n
		if k.hasBias {
			epi.bias = in[2].Data[g*mg : (g+1)*mg]
		}
		if w == nil {
			epi.rows(0, mg)
		} else {
			w.parallelFor(mg, max(1, elementGrain/max(n, 1)), epi.body)
		}
	}
}

// packWeights packs each group's constant weight matrix once (gemm.PackA)
// when the product runs transposed (N = 49 or 196 in ResNet's last
// stages): the weights are then its B operand, which was transposed into
// panels on every call. Direct products read the weights in place, in
// taller row tiles than packed panels of 32 rows allow. It returns nil
// when not packing, and for weights known only at run time.
func (k *convKernel) packWeights(w *Tensor, threads int) []*gemm.PackedA {
	mg, rows := k.filters/k.group, k.colRows()
	if !k.constW || w == nil || len(w.Data) < k.filters*rows || !gemm.Transposes(mg, k.productCols(threads), rows) {
		return nil
	}
	packed := make([]*gemm.PackedA, k.group)
	for g := range packed {
		packed[g] = gemm.PackA(false, mg, rows, w.Data[g*mg*rows:(g+1)*mg*rows], rows)
	}
	return packed
}

// im2col gathers one group of an image into its column matrix, for output
// rows [y0, y1): row (c, i, j) holds, for each of their positions, the
// input element that kernel tap (i, j) of channel c sees there, or 0 in
// the padding.
type im2col struct {
	k        *convKernel
	src, dst []float32
	y0, y1   int
	body     func(lo, hi int)
}

func (m *im2col) rows(lo, hi int) {
	k := m.k
	taps := k.kh * k.kw
	width := (m.y1 - m.y0) * k.outW
	for r := lo; r < hi; r++ {
		ch, tap := r/taps, r%taps
		i, j := tap/k.kw, tap%k.kw
		plane := m.src[ch*k.height*k.width : (ch+1)*k.height*k.width]
		m.row(m.dst[r*width:(r+1)*width], plane, i, j)
	}
}

// row fills one column-matrix row for kernel tap (i, j) of one channel,
// over output rows [y0, y1). The output rows whose input row lies inside
// the image, [oyLo, oyHi), and the output columns whose input column
// does, [lo, hi), are found once, so the copy loops test no bounds; with
// stride 1 the rows are gathered by one gemm.PadRows call.
func (m *im2col) row(dst, plane []float32, i, j int) {
	k := m.k
	shift := j*k.dw - k.pl // input column = output column × sw + shift
	lo := min(max(ceilDiv(-shift, k.sw), 0), k.outW)
	hi := min(max(ceilDiv(k.width-shift, k.sw), lo), k.outW)
	base := k.pt - i*k.dh // input row = output row × sh − base
	oyLo := min(max(ceilDiv(base, k.sh), m.y0), m.y1)
	oyHi := min(max(ceilDiv(k.height+base, k.sh), oyLo), m.y1)
	clear(dst[:(oyLo-m.y0)*k.outW])
	clear(dst[(oyHi-m.y0)*k.outW:])
	if oyHi == oyLo {
		return
	}
	if k.sw == 1 {
		var src []float32
		if hi > lo {
			src = plane[(oyLo*k.sh-base)*k.width+lo+shift:]
		}
		gemm.PadRows(dst[(oyLo-m.y0)*k.outW:], k.outW, src, k.sh*k.width, oyHi-oyLo, lo, hi, k.outW)
		return
	}
	for oy := oyLo; oy < oyHi; oy++ {
		d := dst[(oy-m.y0)*k.outW : (oy-m.y0+1)*k.outW]
		iy := oy*k.sh - base
		clear(d[:lo])
		clear(d[hi:])
		strided(d[lo:hi], plane[iy*k.width+lo*k.sw+shift:], k.sw)
	}
}

// strided sets dst[x] = src[x·step].
func strided(dst, src []float32, step int) {
	if len(dst) == 0 {
		return
	}
	src = src[:(len(dst)-1)*step+1]
	for x := range dst {
		dst[x] = src[x*step]
	}
}

// convEpilogue adds each output row's bias and applies a fused Relu, in
// one pass over columns [lo, hi) of the product while they are still in
// cache.
type convEpilogue struct {
	dst, bias []float32 // bias nil: none
	stride    int       // between output rows
	lo, hi    int
	relu      bool
	body      func(lo, hi int)
}

func (f *convEpilogue) rows(lo, hi int) {
	floor := float32(math.Inf(-1))
	if f.relu {
		floor = 0
	}
	for r := lo; r < hi; r++ {
		row := f.dst[r*f.stride+f.lo : r*f.stride+f.hi]
		var b float32
		if f.bias != nil {
			b = f.bias[r]
		}
		gemm.AddMax(row, row, b, floor)
	}
}
