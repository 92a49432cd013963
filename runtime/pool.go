package runtime

import (
	"fmt"
	"math"
	"slices"

	"rulebook/internal/budget"
	"rulebook/runtime/gemm"
)

type poolKind int

const (
	poolMax poolKind = iota
	poolAverage
)

// preparePool handles MaxPool and AveragePool over one to three spatial
// dimensions.
func preparePool(kind poolKind) func(c *nodeContext) (prepared, error) {
	return func(c *nodeContext) (prepared, error) {
		x := c.shape(0)
		if len(x) < 3 || len(x) > 5 {
			return prepared{}, fmt.Errorf("input X %s must have 1 to 3 spatial dimensions", formatShape(x))
		}
		a := &c.attrs
		if len(c.node.Outputs) > 1 && c.node.Outputs[1] != "" {
			return prepared{}, fmt.Errorf("the Indices output (int64) is not supported")
		}
		kernel := toInts(a.ints("kernel_shape", nil))
		if len(kernel) != len(x)-2 {
			return prepared{}, fmt.Errorf("kernel_shape %v must have one entry per spatial dimension of X %s", kernel, formatShape(x))
		}
		win, err := resolveWindow(a, x[2:], kernel, true)
		if err != nil {
			return prepared{}, err
		}
		includePad := kind == poolAverage && a.int("count_include_pad", 0) != 0
		parts := append(win.params(), fmt.Sprintf("ceil_mode=%d", boolInt(win.ceilMode)))
		if kind == poolAverage {
			parts = append(parts, fmt.Sprintf("count_include_pad=%d", boolInt(includePad)))
		}
		out := append([]int{x[0], x[1]}, win.out...)
		if err := reserveTaps(c.mem, win.out); err != nil {
			return prepared{}, err
		}
		k := newPoolKernel(kind, x[0]*x[1], win, includePad)
		return prepared{kernel: k, outputs: [][]int{out}, params: paramString(parts...)}, nil
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// poolKernel pools over three spatial dimensions; fewer are lifted to
// three with leading dimensions of size 1. For every output position and
// dimension the range of kernel taps that fall inside the input is
// precomputed, so the inner loops never test bounds.
type poolKernel struct {
	kind       poolKind
	planes     int // batch × channels
	in, out    [3]int
	strides    [3]int
	dilations  [3]int
	padBegin   [3]int
	first      [3][]int // per dimension and output index: first tap inside the input
	last       [3][]int // one past the last tap inside the input
	padded     [3][]int // taps inside the input or its padding (count_include_pad)
	includePad bool
	// inner is the range of output columns whose window lies inside the
	// row; kernel1 and kernel2 are the window's height and width.
	inner            [2]int
	kernel1, kernel2 int
	fast             *planePool // nil: pooled by plane
}

func newPoolKernel(kind poolKind, planes int, win window, includePad bool) *poolKernel {
	k := &poolKernel{kind: kind, planes: planes, includePad: includePad}
	lead := 3 - len(win.in)
	for d := range 3 {
		if d < lead {
			k.in[d], k.out[d], k.strides[d], k.dilations[d] = 1, 1, 1, 1
			k.first[d], k.last[d], k.padded[d] = []int{0}, []int{1}, []int{1}
			continue
		}
		s := d - lead
		k.in[d], k.out[d], k.strides[d], k.dilations[d] = win.in[s], win.out[s], win.strides[s], win.dilations[s]
		k.padBegin[d] = win.padBegin[s]
		k.first[d], k.last[d], k.padded[d] = tapRanges(win, s)
	}
	k.kernel1, k.kernel2 = 1, win.kernel[len(win.kernel)-1]
	if len(win.kernel) > 1 {
		k.kernel1 = win.kernel[len(win.kernel)-2]
	}
	k.inner = [2]int{len(k.first[2]), len(k.first[2])}
	for ow := range k.first[2] {
		if k.first[2][ow] == 0 && k.last[2][ow] == k.kernel2 {
			k.inner[0] = min(k.inner[0], ow)
			k.inner[1] = ow + 1
		}
	}
	k.fast = newPlanePool(k)
	return k
}

// reserveTaps takes the bytes of a pool's tap tables (three ints per
// output index of each spatial dimension, tapRanges) from the memory
// budget before they are built: a padded extent can make them larger
// than any tensor of the model (an empty batch leaves the output itself
// empty).
func reserveTaps(m *budget.Meter, out []int) error {
	n := uint64(0)
	for _, o := range out {
		n += uint64(o)
	}
	return m.Take(fmt.Sprintf("the tap tables of a pool with output extents %v", out), 3*8*n)
}

// tapRanges computes, for spatial dimension s and each output index, the
// taps j whose input index o·stride − padBegin + j·dilation lies inside
// the input ([first, last)), and how many lie inside input plus padding.
// Both are intervals of j, found by division rather than by walking the
// taps, so huge kernels cost nothing extra.
func tapRanges(win window, s int) (first, last, padded []int) {
	n, k, d := win.out[s], win.kernel[s], win.dilations[s]
	first, last, padded = make([]int, n), make([]int, n), make([]int, n)
	for o := range n {
		start := o*win.strides[s] - win.padBegin[s]
		first[o], last[o] = tapInterval(start, 0, win.in[s], k, d)
		lo, hi := tapInterval(start, -win.padBegin[s], win.in[s]+win.padEnd[s], k, d)
		padded[o] = hi - lo
	}
	return first, last, padded
}

// tapInterval returns the taps j in [0, k) with lo ≤ start + j·d < hi, as
// [first, last); empty intervals have first = last.
func tapInterval(start, lo, hi, k, d int) (int, int) {
	first := max(0, ceilDiv(lo-start, d))
	last := min(k, floorDiv(hi-1-start, d)+1)
	if last < first {
		return first, first
	}
	return first, last
}

func floorDiv(a, b int) int {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func ceilDiv(a, b int) int { return -floorDiv(-a, b) }

// scratchSize gives every plane its own row of partial results (see
// plane), so that workers pooling different planes never share one; the
// fast path (pool2d.go) has its own.
func (k *poolKernel) scratchSize(int) int {
	if k.fast != nil {
		return k.fast.scratchSize()
	}
	return k.planes * k.in[2]
}

func (k *poolKernel) bind(in, out []*Tensor, e *env) func() {
	if k.fast != nil {
		return k.fast.bind(in, out, e)
	}
	inPlane := k.in[0] * k.in[1] * k.in[2]
	outPlane := k.out[0] * k.out[1] * k.out[2]
	body := func(lo, hi int) {
		for p := lo; p < hi; p++ {
			acc := e.scratch[p*k.in[2] : (p+1)*k.in[2]]
			k.plane(out[0].Data[p*outPlane:(p+1)*outPlane], in[0].Data[p*inPlane:(p+1)*inPlane], acc)
		}
	}
	return func() { e.workers.parallelFor(k.planes, 1, body) }
}

// plane pools one batch×channel plane in two separable passes per output
// row: the input rows under the window are first reduced column by column
// into acc (contiguous loops over whole rows), then acc is reduced along
// the row for each output position. A k×k window costs k loads per input
// column and k per output instead of k² per output, and no loop tests
// bounds.
func (k *poolKernel) plane(dst, src, acc []float32) {
	init := float32(0)
	if k.kind == poolMax {
		init = float32(math.Inf(-1))
	}
	i := 0
	for od := range k.out[0] {
		for oh := range k.out[1] {
			rows := k.reduceRows(acc, src, od, oh, init)
			k.reduceRow(dst[i:i+k.out[2]], acc, od, oh, rows)
			i += k.out[2]
		}
	}
}

// reduceRows sets acc to the column-wise maximum or sum of the input rows
// under output row (od, oh) and returns how many there are.
func (k *poolKernel) reduceRows(acc, src []float32, od, oh int, init float32) int {
	b0 := od*k.strides[0] - k.padBegin[0]
	b1 := oh*k.strides[1] - k.padBegin[1]
	w := k.in[2]
	n := 0
	for j0 := k.first[0][od]; j0 < k.last[0][od]; j0++ {
		plane := (b0 + j0*k.dilations[0]) * k.in[1]
		for j1 := k.first[1][oh]; j1 < k.last[1][oh]; j1++ {
			r := (plane + b1 + j1*k.dilations[1]) * w
			row := src[r : r+w]
			switch {
			case n == 0:
				copy(acc, row)
			case k.kind == poolMax:
				gemm.Max(acc, acc, row)
			default:
				gemm.Add(acc, acc, row)
			}
			n++
		}
	}
	if n == 0 {
		fillValue(acc, init)
	}
	return n
}

// reduceRow pools acc along the row into one output row; rows is the
// number of input rows acc holds, for the average's count. With stride and
// dilation 1, the outputs whose window lies inside the row are whole
// vectors of shifted rows (gemm.Max, gemm.Add); the others, and other
// strides, are pooled one by one.
func (k *poolKernel) reduceRow(dst, acc []float32, od, oh, rows int) {
	lo, hi := k.inner[0], k.inner[1]
	if k.strides[2] != 1 || k.dilations[2] != 1 || lo >= hi {
		k.reduceRange(dst, acc, od, oh, rows, 0, len(dst))
		return
	}
	k.reduceRange(dst, acc, od, oh, rows, 0, lo)
	k.reduceRange(dst, acc, od, oh, rows, hi, len(dst))
	out, base := dst[lo:hi], lo-k.padBegin[2]
	copy(out, acc[base:])
	for j := 1; j < k.kernel2; j++ {
		if k.kind == poolMax {
			gemm.Max(out, out, acc[base+j:])
		} else {
			gemm.Add(out, out, acc[base+j:])
		}
	}
	if k.kind == poolAverage {
		for ow := lo; ow < hi; ow++ {
			dst[ow] /= float32(k.count(od, oh, ow, rows))
		}
	}
}

// reduceRange pools outputs [lo, hi) of a row one by one.
func (k *poolKernel) reduceRange(dst, acc []float32, od, oh, rows, lo, hi int) {
	s, d := k.strides[2], k.dilations[2]
	first, last := k.first[2], k.last[2]
	for ow := lo; ow < hi; ow++ {
		base := ow*s - k.padBegin[2]
		if k.kind == poolMax {
			m := float32(math.Inf(-1))
			for j := first[ow]; j < last[ow]; j++ {
				m = max(m, acc[base+j*d])
			}
			dst[ow] = m
			continue
		}
		sum := float32(0)
		for j := first[ow]; j < last[ow]; j++ {
			sum += acc[base+j*d]
		}
		dst[ow] = sum / float32(k.count(od, oh, ow, rows))
	}
}

// count is the number of elements output (od, oh, ow) averages.
func (k *poolKernel) count(od, oh, ow, rows int) int {
	if k.includePad {
		return k.padded[0][od] * k.padded[1][oh] * k.padded[2][ow]
	}
	return rows * (k.last[2][ow] - k.first[2][ow])
}

// prepareGlobalPool averages (or takes the maximum of) each batch×channel
// plane.
func prepareGlobalPool(kind poolKind) func(c *nodeContext) (prepared, error) {
	return func(c *nodeContext) (prepared, error) { return prepareGlobal(c, kind) }
}

func prepareGlobal(c *nodeContext, kind poolKind) (prepared, error) {
	x := c.shape(0)
	if len(x) < 3 {
		return prepared{}, fmt.Errorf("input X %s must have at least one spatial dimension", formatShape(x))
	}
	out := slices.Clone(x)
	for i := 2; i < len(out); i++ {
		out[i] = 1
	}
	k := globalPoolKernel{kind: kind, planes: x[0] * x[1], size: numElements(x[2:])}
	return prepared{kernel: k, outputs: [][]int{out}}, nil
}

type globalPoolKernel struct {
	kind         poolKind
	planes, size int
}

func (k globalPoolKernel) bind(in, out []*Tensor, e *env) func() {
	body := func(lo, hi int) {
		for p := lo; p < hi; p++ {
			plane := in[0].Data[p*k.size : (p+1)*k.size]
			if k.kind == poolMax {
				m := float32(math.Inf(-1))
				for _, x := range plane {
					m = max(m, x)
				}
				out[0].Data[p] = m
				continue
			}
			out[0].Data[p] = float32(sum64(plane) / float64(k.size))
		}
	}
	return func() { e.workers.parallelFor(k.planes, max(1, elementGrain/max(k.size, 1)), body) }
}

// sum64 adds in float64: long float32 sums lose digits.
func sum64(x []float32) float64 {
	s := 0.0
	for _, v := range x {
		s += float64(v)
	}
	return s
}
