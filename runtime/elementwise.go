package runtime

import (
	"fmt"
	"math"
	"slices"

	"rulebook/runtime/gemm"
)

// elementGrain is the fewest elements worth handing to another worker in
// an elementwise loop: below it the wake-up costs more than the work.
const elementGrain = 1 << 14

type binaryOp int

const (
	binaryAdd binaryOp = iota
	binarySub
	binaryMul
	binaryDiv
	binaryPow
	binaryMax
	binaryMin
	binaryPRelu // x where x ≥ 0, else x·slope
)

func binaryDef(op binaryOp) opDef {
	return opDef{2, 2, 1, 1, func(c *nodeContext) (prepared, error) {
		shape, err := broadcastShapes(c.shape(0), c.shape(1))
		if err != nil {
			return prepared{}, err
		}
		if op == binaryPRelu && !slices.Equal(shape, c.shape(0)) {
			return prepared{}, fmt.Errorf("slope %s does not broadcast to X %s", formatShape(c.shape(1)), formatShape(c.shape(0)))
		}
		k := &binaryKernel{op: op, layout: newBroadcastLayout(c.shape(0), c.shape(1), shape)}
		return prepared{kernel: k, outputs: [][]int{shape}}, nil
	}}
}

// broadcastShapes applies ONNX's multidirectional (numpy) broadcasting.
func broadcastShapes(a, b []int) ([]int, error) {
	out := make([]int, max(len(a), len(b)))
	for i := range out {
		da, db := dimFromEnd(a, len(out)-1-i), dimFromEnd(b, len(out)-1-i)
		switch {
		case da == db || db == 1:
			out[i] = da
		case da == 1:
			out[i] = db
		default:
			return nil, fmt.Errorf("shapes %s and %s do not broadcast", formatShape(a), formatShape(b))
		}
	}
	return out, nil
}

// dimFromEnd returns the dimension k places from the last one, 1 past the
// front (broadcasting's implicit leading ones).
func dimFromEnd(shape []int, k int) int {
	if k >= len(shape) {
		return 1
	}
	return shape[len(shape)-1-k]
}

// broadcastLayout describes how two operands map onto an output: merged
// output dimensions and, per dimension, each operand's element stride (0
// where the operand is broadcast). Merging adjacent dimensions that both
// operands traverse the same way leaves few dimensions, and the innermost
// stride of each operand is 0 or 1, so inner loops are plain vector or
// vector-scalar loops.
type broadcastLayout struct {
	dims   []int
	sa, sb []int
}

func newBroadcastLayout(a, b, out []int) broadcastLayout {
	stridesIn := func(shape []int) []int {
		s := make([]int, len(out))
		own := stridesOf(shape)
		for i := range out {
			k := len(out) - 1 - i
			if k < len(shape) && dimFromEnd(shape, k) != 1 {
				s[i] = own[len(shape)-1-k]
			}
		}
		return s
	}
	fullA, fullB := stridesIn(a), stridesIn(b)
	var l broadcastLayout
	for i, d := range out {
		if d == 1 {
			continue
		}
		last := len(l.dims) - 1
		if last >= 0 && l.sa[last] == fullA[i]*d && l.sb[last] == fullB[i]*d {
			l.dims[last] *= d
			l.sa[last], l.sb[last] = fullA[i], fullB[i]
			continue
		}
		l.dims = append(l.dims, d)
		l.sa = append(l.sa, fullA[i])
		l.sb = append(l.sb, fullB[i])
	}
	if len(l.dims) == 0 {
		l.dims, l.sa, l.sb = []int{1}, []int{0}, []int{0}
	}
	return l
}

// offsets returns where row r (an index over all but the innermost merged
// dimension) starts in each operand.
func (l *broadcastLayout) offsets(r int) (aOff, bOff int) {
	for i := len(l.dims) - 2; i >= 0; i-- {
		idx := r % l.dims[i]
		r /= l.dims[i]
		aOff += idx * l.sa[i]
		bOff += idx * l.sb[i]
	}
	return aOff, bOff
}

type binaryKernel struct {
	op     binaryOp
	layout broadcastLayout
	relu   bool // a fused Relu follows (fuse.go)
}

func (k *binaryKernel) withRelu() kernel {
	fused := *k
	fused.relu = true
	return &fused
}

func (k *binaryKernel) bind(in, out []*Tensor, e *env) func() {
	body := func(lo, hi int) { k.runRange(out[0].Data, in[0].Data, in[1].Data, lo, hi) }
	return func() { e.workers.parallelFor(len(out[0].Data), elementGrain, body) }
}

// runRange computes output elements [lo, hi), row piece by row piece.
func (k *binaryKernel) runRange(dst, a, b []float32, lo, hi int) {
	l := &k.layout
	inner := len(l.dims) - 1
	width := l.dims[inner]
	sa, sb := l.sa[inner], l.sb[inner]
	for lo < hi {
		row, col := lo/width, lo%width
		n := min(width-col, hi-lo)
		aOff, bOff := l.offsets(row)
		aOff += col * sa
		bOff += col * sb
		d := dst[lo : lo+n]
		switch {
		case sa == 1 && sb == 1:
			applyVV(k.op, d, a[aOff:aOff+n], b[bOff:bOff+n])
		case sa == 1:
			applyVS(k.op, d, a[aOff:aOff+n], b[bOff])
		case sb == 1:
			applySV(k.op, d, a[aOff], b[bOff:bOff+n])
		default:
			fillValue(d, applyScalar(k.op, a[aOff], b[bOff]))
		}
		if k.relu {
			reluInPlace(d)
		}
		lo += n
	}
}

func applyVV(op binaryOp, dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	switch op {
	case binaryAdd:
		gemm.Add(dst, a, b)
	case binaryMax:
		gemm.Max(dst, a, b)
	case binarySub:
		for i := range dst {
			dst[i] = a[i] - b[i]
		}
	case binaryMul:
		for i := range dst {
			dst[i] = a[i] * b[i]
		}
	case binaryDiv:
		for i := range dst {
			dst[i] = a[i] / b[i]
		}
	default:
		for i := range dst {
			dst[i] = applyScalar(op, a[i], b[i])
		}
	}
}

func applyVS(op binaryOp, dst, a []float32, s float32) {
	a = a[:len(dst)]
	switch op {
	case binaryAdd:
		gemm.AddMax(dst, a, s, float32(math.Inf(-1)))
	case binarySub:
		for i := range dst {
			dst[i] = a[i] - s
		}
	case binaryMul:
		for i := range dst {
			dst[i] = a[i] * s
		}
	case binaryDiv:
		for i := range dst {
			dst[i] = a[i] / s
		}
	case binaryPow:
		powScalarExponent(dst, a, s)
	default:
		for i := range dst {
			dst[i] = applyScalar(op, a[i], s)
		}
	}
}

func applySV(op binaryOp, dst []float32, s float32, b []float32) {
	b = b[:len(dst)]
	switch op {
	case binaryAdd:
		gemm.AddMax(dst, b, s, float32(math.Inf(-1)))
	case binarySub:
		for i := range dst {
			dst[i] = s - b[i]
		}
	case binaryMul:
		for i := range dst {
			dst[i] = s * b[i]
		}
	case binaryDiv:
		for i := range dst {
			dst[i] = s / b[i]
		}
	default:
		for i := range dst {
			dst[i] = applyScalar(op, s, b[i])
		}
	}
}

func applyScalar(op binaryOp, a, b float32) float32 {
	switch op {
	case binaryAdd:
		return a + b
	case binarySub:
		return a - b
	case binaryMul:
		return a * b
	case binaryDiv:
		return a / b
	case binaryMax:
		return max(a, b)
	case binaryMin:
		return min(a, b)
	case binaryPRelu:
		if a < 0 {
			return a * b
		}
		return a
	}
	return pow32(a, b)
}

// powScalarExponent special-cases the exponents layer normalisation and
// friends use, which are far cheaper than math.Pow.
func powScalarExponent(dst, a []float32, s float32) {
	switch s {
	case 1:
		copy(dst, a)
	case 2:
		for i, x := range a {
			dst[i] = x * x
		}
	case 3:
		for i, x := range a {
			dst[i] = x * x * x
		}
	default:
		for i, x := range a {
			dst[i] = pow32(x, s)
		}
	}
}

func pow32(a, b float32) float32 {
	return float32(math.Pow(float64(a), float64(b)))
}

func fillValue(dst []float32, v float32) {
	for i := range dst {
		dst[i] = v
	}
}

// prepareVariadic handles Sum, Max, Min and Mean: any number of inputs,
// broadcast together, folded left to right into the output.
func prepareVariadic(op binaryOp, mean bool) func(c *nodeContext) (prepared, error) {
	return func(c *nodeContext) (prepared, error) {
		out := []int{}
		for i := range c.inputs {
			if !c.has(i) {
				return prepared{}, fmt.Errorf("input %d is omitted", i)
			}
			var err error
			if out, err = broadcastShapes(out, c.shape(i)); err != nil {
				return prepared{}, err
			}
		}
		k := &variadicKernel{mean: mean, first: newBroadcastLayout(c.shape(0), c.shape(0), out)}
		for i := 1; i < len(c.inputs); i++ {
			k.rest = append(k.rest, &binaryKernel{op: op, layout: newBroadcastLayout(out, c.shape(i), out)})
		}
		return prepared{kernel: k, outputs: [][]int{out}}, nil
	}
}

type variadicKernel struct {
	mean  bool
	first broadcastLayout // input 0 onto the output
	rest  []*binaryKernel // output ∘ input i, in place
}

func (k *variadicKernel) bind(in, out []*Tensor, e *env) func() {
	bodies := make([]func(lo, hi int), len(k.rest))
	for i, r := range k.rest {
		bodies[i] = func(lo, hi int) { r.runRange(out[0].Data, out[0].Data, in[i+1].Data, lo, hi) }
	}
	scale := func(lo, hi int) {
		inv := 1 / float32(len(in))
		for i := lo; i < hi; i++ {
			out[0].Data[i] *= inv
		}
	}
	return func() {
		n := len(out[0].Data)
		broadcastCopy(out[0].Data, in[0].Data, &k.first)
		for _, body := range bodies {
			e.workers.parallelFor(n, elementGrain, body)
		}
		if k.mean {
			e.workers.parallelFor(n, elementGrain, scale)
		}
	}
}
