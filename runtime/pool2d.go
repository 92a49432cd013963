package runtime

import (
	"math"

	"rulebook/runtime/gemm"
)

// planePool is the fast path of 1-D and 2-D pools with dilation 1 and a
// row stride of 1 or 2. It covers every pool of the torchvision
// classifiers. The general path (poolKernel.plane) ran 6–14× slower than
// ONNX Runtime on inception_v3's planes, because it makes several calls per
// output row and pools strided rows one element at a time.
//
// Here each plane is pooled in blocks of output rows:
//   - A block's input rows are read in place, or copied into a buffer
//     bordered with the pool's identity (−Inf or 0) where a window reaches
//     past the input.
//   - The column pass reduces kh input rows per output row. With stride 1
//     that is kh vector calls over the whole block.
//   - The row pass reduces kw shifted copies of the block (rowsStride1), or
//     the even lanes of kw offsets a row (gemm.PoolStride2).
//   - An average is scaled by per-position reciprocal counts.
//
// Planes are split among a fixed number of slots, each with its own
// scratch, so scratch does not grow with the channel count.
type planePool struct {
	kind           poolKind
	planes         int
	h, w           int // input plane
	outH, outW     int
	kh, kw, sh, sw int
	pt, pl         int // leading padding
	// hp, wp are the extent of the windows in padded coordinates.
	hp, wp   int
	bordered bool // some window reaches outside the input
	rows     int  // output rows per block
	inv      []float32
}

// poolSlots bounds the parallel pieces of one pool (and its scratch).
const poolSlots = 32

// blockFloats bounds a block's column-pass buffer: 16 KiB stays in L1.
const blockFloats = 4096

// newPlanePool returns the fast path for k, or nil where it does not
// apply.
func newPlanePool(k *poolKernel) *planePool {
	if k.in[0] != 1 || k.dilations[1] != 1 || k.dilations[2] != 1 || k.strides[2] > 2 || k.kernel2 < 1 {
		return nil
	}
	p := &planePool{
		kind: k.kind, planes: k.planes, h: k.in[1], w: k.in[2], outH: k.out[1], outW: k.out[2],
		kh: k.kernel1, kw: k.kernel2, sh: k.strides[1], sw: k.strides[2], pt: k.padBegin[1], pl: k.padBegin[2],
	}
	if p.outH < 1 || p.outW < 1 {
		return nil
	}
	p.hp, p.wp = (p.outH-1)*p.sh+p.kh, (p.outW-1)*p.sw+p.kw
	p.bordered = p.pt > 0 || p.pl > 0 || p.hp > p.h || p.wp > p.w
	p.rows = max(1, min(p.outH, blockFloats/p.stride()))
	if k.kind == poolAverage {
		p.inv = make([]float32, p.outH*p.outW)
		for oh := range p.outH {
			for ow := range p.outW {
				p.inv[oh*p.outW+ow] = 1 / float32(k.count(0, oh, ow, k.last[1][oh]-k.first[1][oh]))
			}
		}
	}
	return p
}

// stride is the row stride of the column pass's source and output.
func (p *planePool) stride() int {
	if p.bordered {
		return p.wp
	}
	return p.w
}

// scratchPerSlot is one slot's column-pass buffer and bordered rows.
func (p *planePool) scratchPerSlot() int {
	n := p.rows*p.stride() + gemm.Stride2Slack + p.kw
	if p.sw == 1 {
		n += p.rows * p.stride() // the row pass's results
	}
	if p.bordered {
		n += ((p.rows-1)*p.sh + p.kh) * p.wp
	}
	return n
}

func (p *planePool) scratchSize() int { return min(p.planes, poolSlots) * p.scratchPerSlot() }

func (p *planePool) bind(in, out []*Tensor, e *env) func() {
	slots := min(p.planes, poolSlots)
	per := p.scratchPerSlot()
	inPlane, outPlane := p.h*p.w, p.outH*p.outW
	body := func(lo, hi int) {
		for s := lo; s < hi; s++ {
			scratch := e.scratch[s*per : (s+1)*per]
			for pl := s * p.planes / slots; pl < (s+1)*p.planes/slots; pl++ {
				p.plane(out[0].Data[pl*outPlane:(pl+1)*outPlane], in[0].Data[pl*inPlane:(pl+1)*inPlane], scratch)
			}
		}
	}
	return func() { e.workers.parallelFor(slots, 1, body) }
}

func (p *planePool) identity() float32 {
	if p.kind == poolMax {
		return float32(math.Inf(-1))
	}
	return 0
}

// plane pools one plane, block by block.
func (p *planePool) plane(dst, src, scratch []float32) {
	stride := p.stride()
	v := scratch[:p.rows*stride+gemm.Stride2Slack+p.kw]
	h := scratch[len(v):len(v)]
	if p.sw == 1 {
		h = scratch[len(v) : len(v)+p.rows*stride]
	}
	border := scratch[len(v)+len(h):]
	for o0 := 0; o0 < p.outH; o0 += p.rows {
		o1 := min(o0+p.rows, p.outH)
		r0, r1 := o0*p.sh, (o1-1)*p.sh+p.kh // padded rows the block reads
		rows := src[min(r0*p.w, len(src)):]
		if p.bordered {
			rows = border[:(r1-r0)*p.wp]
			p.fillBorder(rows, src, r0, r1)
		}
		p.columns(v, rows, o1-o0, stride)
		if p.sw == 1 {
			p.rowsStride1(dst[o0*p.outW:o1*p.outW], v, h, o0, o1-o0, stride)
			continue
		}
		for oh := o0; oh < o1; oh++ {
			gemm.PoolStride2(dst[oh*p.outW:(oh+1)*p.outW], v[(oh-o0)*stride:], p.kw, p.kind == poolMax)
		}
		if p.inv != nil {
			blk := dst[o0*p.outW : o1*p.outW]
			gemm.Mul(blk, blk, p.inv[o0*p.outW:o1*p.outW])
		}
	}
}

// fillBorder copies padded rows [r0, r1) into dst (row stride wp), the
// identity outside the input.
func (p *planePool) fillBorder(dst, src []float32, r0, r1 int) {
	id := p.identity()
	for r := r0; r < r1; r++ {
		row := dst[(r-r0)*p.wp : (r-r0+1)*p.wp]
		iy := r - p.pt
		if iy < 0 || iy >= p.h {
			fillValue(row, id)
			continue
		}
		lo, hi := min(p.pl, p.wp), min(p.pl+p.w, p.wp)
		fillValue(row[:lo], id)
		copy(row[lo:hi], src[iy*p.w:iy*p.w+hi-lo])
		fillValue(row[hi:], id)
	}
}

// columns reduces, for each of the block's n output rows, the kh source
// rows its windows cover into v (row stride stride, wp columns used).
func (p *planePool) columns(v, rows []float32, n, stride int) {
	if p.sh == 1 {
		span := (n-1)*stride + p.wp
		copy(v[:span], rows[:span])
		for i := 1; i < p.kh; i++ {
			p.reduce(v[:span], rows[i*stride:i*stride+span])
		}
		return
	}
	for r := range n {
		dst := v[r*stride : r*stride+p.wp]
		base := r * p.sh * stride
		copy(dst, rows[base:base+p.wp])
		for i := 1; i < p.kh; i++ {
			p.reduce(dst, rows[base+i*stride:base+i*stride+p.wp])
		}
	}
}

func (p *planePool) reduce(acc, x []float32) {
	if p.kind == poolMax {
		gemm.Max(acc, acc, x)
	} else {
		gemm.Add(acc, acc, x)
	}
}

// rowsStride1 is the row pass of stride 1 for a block of n output rows
// from o0: the kw shifted copies of the block's column results are
// reduced into h in kw vector calls over the whole block (columns past a
// row's outputs hold values never used), and each output row is then
// copied out of h, scaled by its reciprocal counts for an average: one
// call a row instead of kw.
func (p *planePool) rowsStride1(dst, v, h []float32, o0, n, stride int) {
	span := (n-1)*stride + p.outW
	copy(h[:span], v[:span])
	for j := 1; j < p.kw; j++ {
		p.reduce(h[:span], v[j:j+span])
	}
	for r := range n {
		out, row := dst[r*p.outW:(r+1)*p.outW], h[r*stride:r*stride+p.outW]
		if p.inv != nil {
			gemm.Mul(out, row, p.inv[(o0+r)*p.outW:(o0+r+1)*p.outW])
		} else {
			copy(out, row)
		}
	}
}
