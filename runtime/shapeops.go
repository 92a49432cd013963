package runtime

import (
	"fmt"
	"slices"
)

// prepareReshape reads the target shape, a constant, at load: 0 copies the
// input dimension (unless allowzero, opset 14, asks for a literal 0) and
// one -1 takes what is left.
func prepareReshape(c *nodeContext) (prepared, error) {
	spec, err := c.constInts(1, "shape")
	if err != nil {
		return prepared{}, err
	}
	in := c.shape(0)
	out, err := reshapeTarget(in, spec, c.attrs.int("allowzero", 0) != 0, c.limit())
	if err != nil {
		return prepared{}, err
	}
	return prepared{kernel: copyKernel{}, outputs: [][]int{out}}, nil
}

// reshapeTarget resolves spec for an input of shape in; no dimension or
// element count may pass limit.
func reshapeTarget(in []int, spec []int64, allowZero bool, limit int) ([]int, error) {
	out := make([]int, len(spec))
	infer, known := -1, 1
	for i, d := range spec {
		switch {
		case d == -1 && infer >= 0:
			return nil, fmt.Errorf("shape %v has more than one -1", spec)
		case d == -1:
			infer = i
			continue
		case d == 0 && !allowZero:
			if i >= len(in) {
				return nil, fmt.Errorf("shape %v copies dimension %d, but the input %s has rank %d", spec, i, formatShape(in), len(in))
			}
			out[i] = in[i]
		case d < 0 || d > int64(limit):
			return nil, fmt.Errorf("shape %v has the invalid dimension %d", spec, d)
		default:
			out[i] = int(d)
		}
		if out[i] != 0 && known > limit/out[i] {
			return nil, fmt.Errorf("shape %v is too large", spec)
		}
		known *= out[i]
	}
	total := numElements(in)
	if infer >= 0 {
		if known == 0 || total%known != 0 {
			return nil, fmt.Errorf("cannot infer the -1 in %v for input %s (%d elements)", spec, formatShape(in), total)
		}
		out[infer] = total / known
	}
	if numElements(out) != total {
		return nil, fmt.Errorf("cannot reshape %s (%d elements) to %v", formatShape(in), total, spec)
	}
	return out, nil
}

// prepareFlatten makes a matrix of the dimensions before axis and those
// from axis on.
func prepareFlatten(c *nodeContext) (prepared, error) {
	in := c.shape(0)
	axis := c.attrs.int("axis", 1)
	if axis < 0 {
		axis += int64(len(in))
	}
	if axis < 0 || axis > int64(len(in)) {
		return prepared{}, fmt.Errorf("axis %d is out of range for rank %d", c.attrs.int("axis", 1), len(in))
	}
	out := []int{numElements(in[:axis]), numElements(in[axis:])}
	return prepared{kernel: copyKernel{}, outputs: [][]int{out}, params: fmt.Sprintf("axis=%d", axis)}, nil
}

// prepareTranspose permutes dimensions; the default reverses them.
func prepareTranspose(c *nodeContext) (prepared, error) {
	in := c.shape(0)
	perm := toInts(c.attrs.ints("perm", nil))
	if perm == nil {
		perm = make([]int, len(in))
		for i := range perm {
			perm[i] = len(in) - 1 - i
		}
	}
	if len(perm) != len(in) {
		return prepared{}, fmt.Errorf("perm %v does not fit rank %d", perm, len(in))
	}
	seen := make([]bool, len(in))
	out := make([]int, len(in))
	for i, p := range perm {
		if p < 0 || p >= len(in) || seen[p] {
			return prepared{}, fmt.Errorf("perm %v is not a permutation of 0..%d", perm, len(in)-1)
		}
		seen[p] = true
		out[i] = in[p]
	}
	return prepared{kernel: newTransposeKernel(in, perm), outputs: [][]int{out}, params: "perm=" + joinInts(perm, ",")}, nil
}

// transposeKernel walks the output in order, reading the input with the
// permuted strides. Input dimensions of size 1 are dropped and dimensions
// that stay adjacent are merged first, so that e.g. [0 2 1 3] on
// [1 64 12 64] becomes a swap of the outer two of three dimensions with
// contiguous rows of 64.
type transposeKernel struct {
	dims    []int // output dimensions, merged
	strides []int // input stride of each output dimension
}

func newTransposeKernel(in, perm []int) *transposeKernel {
	// Surviving input dimensions in output order, merged when consecutive.
	inStrides := stridesOf(in)
	k := &transposeKernel{}
	prev := -2
	for _, p := range perm {
		if in[p] == 1 {
			continue
		}
		if last := len(k.dims) - 1; last >= 0 && p == prev+1 && inStrides[prev] == inStrides[p]*in[p] {
			k.dims[last] *= in[p]
			k.strides[last] = inStrides[p]
		} else {
			k.dims = append(k.dims, in[p])
			k.strides = append(k.strides, inStrides[p])
		}
		prev = p
	}
	if len(k.dims) == 0 {
		k.dims, k.strides = []int{1}, []int{1}
	}
	return k
}

func (k *transposeKernel) bind(in, out []*Tensor, e *env) func() {
	inner := len(k.dims) - 1
	width, step := k.dims[inner], k.strides[inner]
	rows := numElements(k.dims[:inner])
	body := func(lo, hi int) {
		src, dst := in[0].Data, out[0].Data
		for r := lo; r < hi; r++ {
			off := 0
			for i, rem := inner-1, r; i >= 0; i-- {
				off += (rem % k.dims[i]) * k.strides[i]
				rem /= k.dims[i]
			}
			d := dst[r*width : (r+1)*width]
			if step == 1 {
				copy(d, src[off:off+width])
				continue
			}
			for j := range d {
				d[j] = src[off+j*step]
			}
		}
	}
	return func() { e.workers.parallelFor(rows, max(1, elementGrain/max(width, 1)), body) }
}

// prepareConcat joins inputs along an axis (negative counts from the end).
func prepareConcat(c *nodeContext) (prepared, error) {
	first := c.shape(0)
	for i := range c.inputs {
		if !c.has(i) {
			return prepared{}, fmt.Errorf("input %d is omitted", i)
		}
	}
	if len(first) == 0 {
		return prepared{}, fmt.Errorf("cannot concatenate scalars")
	}
	axis, err := normalizeAxis(c.attrs.int("axis", 0), len(first))
	if err != nil {
		return prepared{}, err
	}
	out := slices.Clone(first)
	out[axis] = 0
	sizes := make([]int, len(c.inputs))
	for i := range c.inputs {
		s := c.shape(i)
		if len(s) != len(first) {
			return prepared{}, fmt.Errorf("input %d has shape %s, input 0 has %s", i, formatShape(s), formatShape(first))
		}
		for d := range s {
			if d != axis && s[d] != first[d] {
				return prepared{}, fmt.Errorf("input %d has shape %s, input 0 has %s: they differ off axis %d", i, formatShape(s), formatShape(first), axis)
			}
		}
		sizes[i] = s[axis]
		out[axis] += s[axis]
	}
	k := &sliceKernel{outer: numElements(first[:axis]), inner: numElements(first[axis+1:]), sizes: sizes}
	return prepared{kernel: concatKernel{k}, outputs: [][]int{out}, params: fmt.Sprintf("axis=%d", axis)}, nil
}

// sliceKernel describes a tensor cut along one axis into pieces: Concat
// assembles the pieces, Split takes them apart. The whole tensor is outer
// blocks of sum(sizes)·inner elements; piece p is, in each block, sizes[p]
// rows of inner elements.
type sliceKernel struct {
	outer, inner int
	sizes        []int
}

// forPieces returns a computation that calls f for every block and piece
// with the piece's offset in the whole tensor and its length, the calls
// spread over the workers.
func (k *sliceKernel) forPieces(e *env, f func(whole, piece, length, block int)) func() {
	offsets := make([]int, len(k.sizes)+1)
	for i, s := range k.sizes {
		offsets[i+1] = offsets[i] + s*k.inner
	}
	blockLen := offsets[len(k.sizes)]
	pieces := len(k.sizes)
	body := func(lo, hi int) {
		for t := lo; t < hi; t++ {
			block, p := t/pieces, t%pieces
			f(block*blockLen+offsets[p], p, k.sizes[p]*k.inner, block)
		}
	}
	total := k.outer * blockLen
	grain := max(1, k.outer*pieces*elementGrain/max(total, 1))
	return func() { e.workers.parallelFor(k.outer*pieces, grain, body) }
}

type concatKernel struct{ *sliceKernel }

func (k concatKernel) bind(in, out []*Tensor, e *env) func() {
	return k.forPieces(e, func(whole, piece, length, block int) {
		copy(out[0].Data[whole:whole+length], in[piece].Data[block*length:(block+1)*length])
	})
}

type splitKernel struct{ *sliceKernel }

func (k splitKernel) bind(in, out []*Tensor, e *env) func() {
	return k.forPieces(e, func(whole, piece, length, block int) {
		copy(out[piece].Data[block*length:(block+1)*length], in[0].Data[whole:whole+length])
	})
}

// prepareSplit cuts the input along an axis: into the sizes given by the
// split input (opset 13 on) or attribute (before 13), else into equal
// parts, one per output (from opset 18 num_outputs may leave the last
// part smaller).
func prepareSplit(c *nodeContext) (prepared, error) {
	in := c.shape(0)
	if len(in) == 0 {
		return prepared{}, fmt.Errorf("cannot split a scalar")
	}
	axis, err := normalizeAxis(c.attrs.int("axis", 0), len(in))
	if err != nil {
		return prepared{}, err
	}
	parts := len(c.node.Outputs)
	var split []int64
	switch {
	case c.opset >= 13 && c.has(1):
		if split, err = c.constInts(1, "split"); err != nil {
			return prepared{}, err
		}
	case c.opset < 13:
		split = c.attrs.ints("split", nil)
	}
	sizes, err := splitSizes(in[axis], parts, split, c.opset >= 18 && c.attrs.has("num_outputs"))
	if err != nil {
		return prepared{}, err
	}
	outs := make([][]int, parts)
	for i, s := range sizes {
		outs[i] = slices.Clone(in)
		outs[i][axis] = s
	}
	k := &sliceKernel{outer: numElements(in[:axis]), inner: numElements(in[axis+1:]), sizes: sizes}
	params := fmt.Sprintf("axis=%d split=%s", axis, joinInts(sizes, ","))
	return prepared{kernel: splitKernel{k}, outputs: outs, params: params}, nil
}

func splitSizes(dim, parts int, split []int64, uneven bool) ([]int, error) {
	if split != nil {
		if len(split) != parts {
			return nil, fmt.Errorf("split %v has %d sizes for %d outputs", split, len(split), parts)
		}
		sum := int64(0)
		for _, s := range split {
			if s < 0 || s > maxTensorElements {
				return nil, fmt.Errorf("split %v has a negative size", split)
			}
			sum += s
		}
		if sum != int64(dim) {
			return nil, fmt.Errorf("split %v adds up to %d, not the axis size %d", split, sum, dim)
		}
		return toInts(split), nil
	}
	size := (dim + parts - 1) / parts
	if !uneven && dim%parts != 0 {
		return nil, fmt.Errorf("axis size %d does not split into %d equal parts", dim, parts)
	}
	sizes := make([]int, parts)
	for i := range sizes {
		sizes[i] = max(0, min(size, dim-i*size))
	}
	return sizes, nil
}

// prepareSqueeze removes dimensions of size 1: those listed in axes (an
// attribute before opset 13, an optional constant input from 13), or all.
func prepareSqueeze(c *nodeContext) (prepared, error) {
	in := c.shape(0)
	spec, err := axesOperand(c, 13, false)
	if err != nil {
		return prepared{}, err
	}
	drop := make([]bool, len(in))
	for _, x := range spec {
		axis, err := normalizeAxis(x, len(in))
		if err != nil {
			return prepared{}, err
		}
		if in[axis] != 1 {
			return prepared{}, fmt.Errorf("axis %d has size %d, not 1", axis, in[axis])
		}
		drop[axis] = true
	}
	out := []int{}
	for i, d := range in {
		if !drop[i] && (spec != nil || d != 1) {
			out = append(out, d)
		}
	}
	return prepared{kernel: copyKernel{}, outputs: [][]int{out}}, nil
}

// prepareUnsqueeze inserts dimensions of size 1 at axes (of the output),
// an attribute before opset 13 and a constant input from 13.
func prepareUnsqueeze(c *nodeContext) (prepared, error) {
	in := c.shape(0)
	spec, err := axesOperand(c, 13, true)
	if err != nil {
		return prepared{}, err
	}
	rank := len(in) + len(spec)
	inserted := make([]bool, rank)
	for _, x := range spec {
		axis, err := normalizeAxis(x, rank)
		if err != nil {
			return prepared{}, err
		}
		if inserted[axis] {
			return prepared{}, fmt.Errorf("axes %v repeat %d", spec, axis)
		}
		inserted[axis] = true
	}
	out := make([]int, 0, rank)
	next := 0
	for _, ins := range inserted {
		if ins {
			out = append(out, 1)
		} else {
			out = append(out, in[next])
			next++
		}
	}
	return prepared{kernel: copyKernel{}, outputs: [][]int{out}}, nil
}

// axesOperand reads axes from the attribute (before inputFrom) or the
// optional constant input 1; nil when absent.
func axesOperand(c *nodeContext, inputFrom int64, required bool) ([]int64, error) {
	var spec []int64
	var err error
	if c.opset >= inputFrom {
		if c.has(1) {
			spec, err = c.constInts(1, "axes")
		}
	} else {
		spec = c.attrs.ints("axes", nil)
	}
	if err == nil && required && spec == nil {
		err = fmt.Errorf("axes are required")
	}
	return spec, err
}

// prepareExpand broadcasts the input to a constant shape (numpy style: the
// result is the broadcast of both).
func prepareExpand(c *nodeContext) (prepared, error) {
	spec, err := c.constInts(1, "shape")
	if err != nil {
		return prepared{}, err
	}
	target := make([]int, len(spec))
	for i, d := range spec {
		if d < 0 || d > maxTensorElements {
			return prepared{}, fmt.Errorf("shape %v has the invalid dimension %d", spec, d)
		}
		target[i] = int(d)
	}
	out, err := broadcastShapes(c.shape(0), target)
	if err != nil {
		return prepared{}, err
	}
	return prepared{kernel: &expandKernel{layout: newBroadcastLayout(c.shape(0), c.shape(0), out)}, outputs: [][]int{out}}, nil
}

type expandKernel struct{ layout broadcastLayout }

func (k *expandKernel) bind(in, out []*Tensor, e *env) func() {
	return func() { broadcastCopy(out[0].Data, in[0].Data, &k.layout) }
}

// prepareDropout is the identity of inference. Training mode (an input
// from opset 12) and the mask output are not supported.
func prepareDropout(c *nodeContext) (prepared, error) {
	if len(c.node.Outputs) > 1 && c.node.Outputs[1] != "" {
		return prepared{}, fmt.Errorf("the mask output is not supported")
	}
	if c.has(2) {
		mode, err := c.constInts(2, "training_mode")
		if err != nil {
			return prepared{}, err
		}
		if len(mode) != 1 || mode[0] != 0 {
			return prepared{}, fmt.Errorf("training mode is not supported")
		}
	}
	return prepared{kernel: copyKernel{}, outputs: [][]int{slices.Clone(c.shape(0))}}, nil
}
