package runtime

import (
	"fmt"
	"slices"
)

// Shape, Gather and Slice: what PyTorch's exporter writes for a reshape
// computed from shapes (a channel shuffle, a flatten of a known batch).
// Every shape is known at load, so Shape is a constant, and Gather and
// Slice over constants fold exactly on integers; over activations they
// run as kernels.

// prepareShape is its input's shape as a constant, from start to end
// (opset 15; negative values count from the end, both clamped).
func prepareShape(c *nodeContext) (prepared, error) {
	dims := c.shape(0)
	r := int64(len(dims))
	start, end := clampIndex(c.attrs.int("start", 0), r), clampIndex(c.attrs.int("end", r), r)
	ints := []int64{}
	for i := start; i < end; i++ {
		ints = append(ints, int64(dims[i]))
	}
	return prepared{consts: []*value{intConstant(ints, []int{len(ints)})}}, c.attrs.err
}

// clampIndex reads a possibly negative position in [0, n] as ONNX does.
func clampIndex(i, n int64) int64 {
	if i < 0 {
		i += n
	}
	return min(max(i, 0), n)
}

// prepareGather takes the slices of data at the given indices along axis.
// Indices must be constants (they are, in exported shape arithmetic and
// channel selections).
func prepareGather(c *nodeContext) (prepared, error) {
	data := c.shape(0)
	axis, err := normalizeAxis(c.attrs.int("axis", 0), len(data))
	if err != nil {
		return prepared{}, err
	}
	if c.shapesOnly && !c.inputs[1].isConst() {
		// Indices computed at run time (an embedding lookup) leave the
		// shape known all the same.
		return prepared{outputs: [][]int{slices.Concat(data[:axis], c.shape(1), data[axis+1:])}}, c.attrs.err
	}
	idx, err := c.constInts(1, "indices")
	if err != nil {
		return prepared{}, err
	}
	n := data[axis]
	picks := make([]int, len(idx))
	for i, x := range idx {
		if x < -int64(n) || x >= int64(n) {
			return prepared{}, fmt.Errorf("index %d is out of range for axis %d of size %d", x, axis, n)
		}
		picks[i] = int((x + int64(n)) % int64(n))
	}
	out := slices.Concat(data[:axis], c.shape(1), data[axis+1:])
	k := &gatherKernel{outer: numElements(data[:axis]), axisLen: n, inner: numElements(data[axis+1:]), picks: picks}
	if v := c.inputs[0]; v.ints != nil {
		if err := c.reserve(out, true, false); err != nil {
			return prepared{}, err
		}
		return prepared{consts: []*value{intConstant(k.gatherInts(v.ints), out)}}, c.attrs.err
	}
	return prepared{kernel: k, outputs: [][]int{out}}, c.attrs.err
}

// gatherKernel copies, for each outer block, the inner blocks picked.
type gatherKernel struct {
	outer, axisLen, inner int
	picks                 []int
}

func (k *gatherKernel) bind(in, out []*Tensor, e *env) func() {
	return func() { gatherBlocks(out[0].Data, in[0].Data, k) }
}

func gatherBlocks[T any](dst, src []T, k *gatherKernel) {
	o := 0
	for b := 0; b < k.outer; b++ {
		base := b * k.axisLen * k.inner
		for _, p := range k.picks {
			o += copy(dst[o:o+k.inner], src[base+p*k.inner:base+(p+1)*k.inner])
		}
	}
}

func (k *gatherKernel) gatherInts(src []int64) []int64 {
	dst := make([]int64, k.outer*len(k.picks)*k.inner)
	gatherBlocks(dst, src, k)
	return dst
}

// prepareSlice takes data[starts:ends:steps] on the given axes (opset 10
// and later: starts, ends, axes and steps are constant inputs; opset 1–9:
// attributes).
func prepareSlice(c *nodeContext) (prepared, error) {
	data := c.shape(0)
	starts, ends, axes, steps, err := sliceSpec(c, len(data))
	if err != nil {
		return prepared{}, err
	}
	k := &sliceStrides{shape: slices.Clone(data), start: make([]int, len(data)), step: make([]int, len(data))}
	for i := range data {
		k.step[i] = 1
	}
	seen := map[int]bool{}
	for j, a := range axes {
		axis, err := normalizeAxis(a, len(data))
		if err != nil || seen[axis] {
			return prepared{}, fmt.Errorf("axes %v: %d is out of range or repeated", axes, a)
		}
		seen[axis] = true
		if steps[j] == 0 {
			return prepared{}, fmt.Errorf("step 0 on axis %d", axis)
		}
		k.start[axis], k.shape[axis], k.step[axis] = sliceRange(starts[j], ends[j], steps[j], int64(data[axis]))
	}
	k.strides = stridesOf(data)
	if v := c.inputs[0]; v.ints != nil {
		if err := c.reserve(k.shape, true, false); err != nil {
			return prepared{}, err
		}
		return prepared{consts: []*value{intConstant(sliceCopy(make([]int64, numElements(k.shape)), v.ints, k), slices.Clone(k.shape))}}, c.attrs.err
	}
	return prepared{kernel: k, outputs: [][]int{slices.Clone(k.shape)}}, c.attrs.err
}

func sliceSpec(c *nodeContext, rank int) (starts, ends, axes, steps []int64, err error) {
	if c.opset < 10 {
		starts, ends = c.attrs.ints("starts", nil), c.attrs.ints("ends", nil)
		axes = c.attrs.ints("axes", nil)
	} else {
		if starts, err = c.constInts(1, "starts"); err == nil {
			ends, err = c.constInts(2, "ends")
		}
		if err == nil && c.has(3) {
			axes, err = c.constInts(3, "axes")
		}
		if err == nil && c.has(4) {
			steps, err = c.constInts(4, "steps")
		}
	}
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if axes == nil {
		for i := range starts {
			axes = append(axes, int64(i))
		}
	}
	if steps == nil {
		steps = slices.Repeat([]int64{1}, len(starts))
	}
	if len(ends) != len(starts) || len(axes) != len(starts) || len(steps) != len(starts) || len(starts) > rank {
		return nil, nil, nil, nil, fmt.Errorf("starts %v, ends %v, axes %v and steps %v differ in length", starts, ends, axes, steps)
	}
	return starts, ends, axes, steps, c.attrs.err
}

// sliceRange is ONNX's clamping of one axis's start and end (negative
// counts from the end; a negative step walks backwards), giving the first
// index, the count and the step.
func sliceRange(start, end, step, n int64) (first, count, stride int) {
	norm := func(i, lo, hi int64) int64 {
		if i < 0 {
			i += n
		}
		return min(max(i, lo), hi)
	}
	if step > 0 {
		start, end = norm(start, 0, n), norm(end, 0, n)
		if end <= start {
			return 0, 0, int(step)
		}
		return int(start), int((end - start + step - 1) / step), int(step)
	}
	start, end = norm(start, 0, n-1), norm(end, -1, n-1)
	if start <= end {
		return 0, 0, int(step)
	}
	return int(start), int((start - end - step - 1) / -step), int(step)
}

// sliceStrides is a strided view: output index i on each axis reads input
// index start + i·step.
type sliceStrides struct {
	shape, start, step, strides []int
}

func (k *sliceStrides) bind(in, out []*Tensor, e *env) func() {
	return func() { sliceCopy(out[0].Data, in[0].Data, k) }
}

func sliceCopy[T any](dst, src []T, k *sliceStrides) []T {
	if len(dst) == 0 {
		return dst
	}
	base := 0
	for i := range k.shape {
		base += k.start[i] * k.strides[i]
	}
	idx := make([]int, len(k.shape))
	last := len(k.shape) - 1
	for o := range dst {
		off := base
		for i, x := range idx {
			off += x * k.step[i] * k.strides[i]
		}
		dst[o] = src[off]
		for d := last; d >= 0; d-- {
			if idx[d]++; idx[d] < k.shape[d] {
				break
			}
			idx[d] = 0
		}
	}
	return dst
}
