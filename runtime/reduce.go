package runtime

import (
	"fmt"
	"math"
	"slices"

	"rulebook/runtime/gemm"
)

// prepareSoftmax normalises along one axis (opset 13 on, default -1) or,
// before opset 13, over all dimensions from axis on (default 1), the input
// seen as a matrix. LogSoftmax is the same with the logarithm taken.
func prepareSoftmax(c *nodeContext) (prepared, error) { return prepareSoftmaxLike(c, false) }

func prepareLogSoftmax(c *nodeContext) (prepared, error) { return prepareSoftmaxLike(c, true) }

func prepareSoftmaxLike(c *nodeContext, log bool) (prepared, error) {
	in := c.shape(0)
	def := int64(-1)
	if c.opset < 13 {
		def = 1
	}
	attr := c.attrs.int("axis", def)
	rank := max(len(in), 1) // a scalar is softmaxed as a vector of one
	axis, err := normalizeAxis(attr, rank)
	if err != nil {
		return prepared{}, err
	}
	k := &softmaxKernel{outer: numElements(in[:min(axis, len(in))]), log: log}
	if c.opset < 13 {
		k.length, k.inner = numElements(in[min(axis, len(in)):]), 1
	} else if len(in) > 0 {
		k.length, k.inner = in[axis], numElements(in[axis+1:])
	} else {
		k.length, k.inner = 1, 1
	}
	return prepared{kernel: k, outputs: [][]int{slices.Clone(in)}, params: fmt.Sprintf("axis=%d", axis)}, nil
}

// softmaxKernel normalises outer×inner lines of length elements, element
// i of a line at stride inner.
type softmaxKernel struct {
	outer, length, inner int
	log                  bool
}

func (k *softmaxKernel) bind(in, out []*Tensor, e *env) func() {
	lines := k.outer * k.inner
	body := func(lo, hi int) {
		for l := lo; l < hi; l++ {
			start := (l/k.inner)*k.length*k.inner + l%k.inner
			softmaxLine(out[0].Data[start:], in[0].Data[start:], k.length, k.inner, k.log)
		}
	}
	return func() { e.workers.parallelFor(lines, max(1, elementGrain/max(k.length, 1)), body) }
}

// softmaxLine subtracts the maximum before exponentiating, so large inputs
// do not overflow. Contiguous lines (the last axis, as in attention)
// exponentiate in float32 vectors (gemm.ExpShift).
func softmaxLine(dst, src []float32, n, stride int, log bool) {
	if n == 0 {
		return
	}
	m := float32(math.Inf(-1))
	for i := range n {
		m = max(m, src[i*stride])
	}
	var sum float64
	if stride == 1 {
		sum = gemm.ExpShift(dst[:n], src[:n], m)
	} else {
		for i := range n {
			v := math.Exp(float64(src[i*stride] - m))
			dst[i*stride] = float32(v)
			sum += v
		}
	}
	if log {
		shift := m + float32(math.Log(sum))
		for i := range n {
			dst[i*stride] = src[i*stride] - shift
		}
		return
	}
	inv := float32(1 / sum)
	for i := range n {
		dst[i*stride] *= inv
	}
}

type reduceKind int

const (
	reduceMean reduceKind = iota
	reduceSum
	reduceMax
	reduceMin
	reduceProd
	reduceL1
	reduceL2
	reduceLogSum
	reduceLogSumExp
	reduceSumSquare
)

// prepareReduce reduces over axes: an attribute before axesInputFrom (13
// for ReduceSum, 18 for the others) and an optional constant input from
// then on, where noop_with_empty_axes makes an empty list mean no
// reduction rather than all axes.
func prepareReduce(kind reduceKind, axesInputFrom int64) func(c *nodeContext) (prepared, error) {
	return func(c *nodeContext) (prepared, error) {
		in := c.shape(0)
		a := &c.attrs
		var spec []int64
		var err error
		if c.opset >= axesInputFrom {
			if c.has(1) {
				if spec, err = c.constInts(1, "axes"); err != nil {
					return prepared{}, err
				}
			}
		} else {
			spec = a.ints("axes", nil)
		}
		keep := a.int("keepdims", 1) != 0
		noop := len(spec) == 0 && c.opset >= axesInputFrom && a.int("noop_with_empty_axes", 0) != 0
		reduced := make([]bool, len(in))
		for i := range reduced {
			reduced[i] = len(spec) == 0 && !noop
		}
		for _, x := range spec {
			axis, err := normalizeAxis(x, len(in))
			if err != nil {
				return prepared{}, err
			}
			reduced[axis] = true
		}
		out := []int{}
		var axes []int
		for i, d := range in {
			switch {
			case !reduced[i]:
				out = append(out, d)
			case keep:
				out = append(out, 1)
				axes = append(axes, i)
			default:
				axes = append(axes, i)
			}
		}
		k := newReduceKernel(kind, in, reduced)
		params := fmt.Sprintf("axes=%s keepdims=%d", joinInts(axes, ","), boolInt(keep))
		return prepared{kernel: k, outputs: [][]int{out}, params: params}, nil
	}
}

// reduceKernel reduces the elements that each output position gathers:
// those at base + offsets[j], where base walks the kept dimensions. When
// the reduced axes are the trailing ones the gathered elements are one
// contiguous run.
type reduceKernel struct {
	kind        reduceKind
	count       int   // elements per output
	keptDims    []int // sizes of the kept dimensions
	keptStrides []int // their input strides
	offsets     []int // relative positions of the gathered elements
	contiguous  bool
}

func newReduceKernel(kind reduceKind, in []int, reduced []bool) *reduceKernel {
	k := &reduceKernel{kind: kind, count: 1}
	strides := stridesOf(in)
	first := slices.Index(reduced, true)
	k.contiguous = first < 0 || !slices.Contains(reduced[first:], false)
	var redDims, redStrides []int
	for i, r := range reduced {
		if r {
			redDims, redStrides = append(redDims, in[i]), append(redStrides, strides[i])
			k.count *= in[i]
		} else {
			k.keptDims, k.keptStrides = append(k.keptDims, in[i]), append(k.keptStrides, strides[i])
		}
	}
	if !k.contiguous {
		k.offsets = make([]int, k.count)
		for j := range k.offsets {
			k.offsets[j] = offsetOf(j, redDims, redStrides)
		}
	}
	return k
}

// offsetOf maps a flat index over dims to an element offset.
func offsetOf(flat int, dims, strides []int) int {
	off := 0
	for i := len(dims) - 1; i >= 0; i-- {
		off += (flat % dims[i]) * strides[i]
		flat /= dims[i]
	}
	return off
}

func (k *reduceKernel) bind(in, out []*Tensor, e *env) func() {
	body := func(lo, hi int) {
		for o := lo; o < hi; o++ {
			out[0].Data[o] = k.reduceOne(in[0].Data, offsetOf(o, k.keptDims, k.keptStrides))
		}
	}
	return func() { e.workers.parallelFor(len(out[0].Data), max(1, elementGrain/max(k.count, 1)), body) }
}

func (k *reduceKernel) reduceOne(src []float32, base int) float32 {
	acc := newAccumulator(k.kind)
	if k.contiguous {
		if k.kind == reduceMean || k.kind == reduceSum {
			acc.sum = sum64(src[base : base+k.count])
		} else {
			for _, x := range src[base : base+k.count] {
				acc.add(x)
			}
		}
	} else {
		for _, o := range k.offsets {
			acc.add(src[base+o])
		}
	}
	return acc.result(k.count)
}

// accumulator folds elements in float64 for one reduction kind.
type accumulator struct {
	kind reduceKind
	sum  float64 // sum, |x| sum, x² sum or product, by kind
	max  float64 // running maximum: the result, or the shift of LogSumExp
	// LogSumExp rescales its sum whenever the maximum grows, so that
	// large inputs do not overflow.
}

func newAccumulator(kind reduceKind) accumulator {
	a := accumulator{kind: kind, max: math.Inf(-1)}
	switch kind {
	case reduceProd:
		a.sum = 1
	case reduceMin:
		a.max = math.Inf(1)
	}
	return a
}

func (a *accumulator) add(x32 float32) {
	x := float64(x32)
	switch a.kind {
	case reduceMean, reduceSum, reduceLogSum:
		a.sum += x
	case reduceMax:
		a.max = max(a.max, x)
	case reduceMin:
		a.max = min(a.max, x)
	case reduceProd:
		a.sum *= x
	case reduceL1:
		a.sum += math.Abs(x)
	case reduceL2, reduceSumSquare:
		a.sum += x * x
	case reduceLogSumExp:
		if x > a.max {
			a.sum *= math.Exp(a.max - x)
			a.max = x
		}
		a.sum += math.Exp(x - a.max)
	}
}

func (a *accumulator) result(count int) float32 {
	switch a.kind {
	case reduceMean:
		return float32(a.sum / float64(count))
	case reduceMax, reduceMin:
		return float32(a.max)
	case reduceL2:
		return float32(math.Sqrt(a.sum))
	case reduceLogSum:
		return float32(math.Log(a.sum))
	case reduceLogSumExp:
		return float32(a.max + math.Log(a.sum))
	}
	return float32(a.sum)
}
