package runtime

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"rulebook/onnx"
)

// ConstantOfShape, Equal, Where, Mod and Cast as exporters write them:
// shape checks and arithmetic over constants (vision transformers assert
// that the image divides into patches this way). They fold at load; on
// activations only a Cast to float runs (as a copy), and the others are
// refused with the reason.

// constInputs returns every input's elements, or an error naming the
// first input that is not a constant.
func constInputs(c *nodeContext) ([][]float64, error) {
	out := make([][]float64, len(c.inputs))
	for i, v := range c.inputs {
		if v == nil {
			continue
		}
		if !v.isConst() {
			return nil, fmt.Errorf("input %d (%q) is computed at run time; the runtime folds %s only over constants (shape arithmetic)", i, v.name, c.node.OpType)
		}
		out[i] = make([]float64, len(v.konst.Data))
		for j := range out[i] {
			if v.ints != nil {
				out[i][j] = float64(v.ints[j])
			} else {
				out[i][j] = float64(v.konst.Data[j])
			}
		}
	}
	return out, nil
}

// foldBroadcast computes f over the broadcast of the inputs' shapes.
func foldBroadcast(c *nodeContext, f func(x []float64) float64) ([]int, []float64, error) {
	in, err := constInputs(c)
	if err != nil {
		return nil, nil, err
	}
	shape, err := broadcastInputs(c)
	if err != nil {
		return nil, nil, err
	}
	if err := c.reserve(shape, true, true); err != nil {
		return nil, nil, err
	}
	out := make([]float64, numElements(shape))
	strides := make([][]int, len(in))
	for i := range in {
		strides[i] = broadcastStrides(c.shape(i), shape)
	}
	idx := make([]int, len(shape))
	args := make([]float64, len(in))
	for o := range out {
		for i := range in {
			off := 0
			for d, x := range idx {
				off += x * strides[i][d]
			}
			args[i] = in[i][off]
		}
		out[o] = f(args)
		for d := len(idx) - 1; d >= 0; d-- {
			if idx[d]++; idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
	return shape, out, nil
}

// broadcastStrides are the element strides of shape in within the
// broadcast shape out (0 along broadcast dimensions).
func broadcastStrides(in, out []int) []int {
	s := make([]int, len(out))
	st := stridesOf(in)
	for d := range out {
		k := d - (len(out) - len(in))
		if k >= 0 && in[k] != 1 {
			s[d] = st[k]
		}
	}
	return s
}

func constantOf(shape []int, vals []float64, integer bool) *value {
	if integer {
		ints := make([]int64, len(vals))
		for i, v := range vals {
			ints[i] = int64(v)
		}
		return intConstant(ints, shape)
	}
	data := make([]float32, len(vals))
	for i, v := range vals {
		data[i] = float32(v)
	}
	return &value{shape: shape, konst: &Tensor{Shape: shape, Data: data}}
}

// broadcastInputs is the broadcast of every input's shape.
func broadcastInputs(c *nodeContext) ([]int, error) {
	shape := c.shape(0)
	for i := 1; i < len(c.inputs); i++ {
		var err error
		if shape, err = broadcastShapes(shape, c.shape(i)); err != nil {
			return nil, err
		}
	}
	return shape, nil
}

// allConst reports whether every given input is known at load.
func allConst(c *nodeContext) bool {
	return !slices.ContainsFunc(c.inputs, func(v *value) bool { return v != nil && !v.isConst() })
}

func foldDef(integer func(c *nodeContext) bool, f func(c *nodeContext) func(x []float64) float64) func(c *nodeContext) (prepared, error) {
	return func(c *nodeContext) (prepared, error) {
		if c.shapesOnly && !allConst(c) {
			// Only folded at load; over activations the shape is known
			// all the same.
			shape, err := broadcastInputs(c)
			return prepared{outputs: [][]int{slices.Clone(shape)}}, errors.Join(err, c.attrs.err)
		}
		shape, vals, err := foldBroadcast(c, f(c))
		if err != nil {
			return prepared{}, err
		}
		return prepared{consts: []*value{constantOf(shape, vals, integer(c))}}, c.attrs.err
	}
}

func alwaysInt(*nodeContext) bool { return true }

// sameType: the output is an integer exactly when the first input is.
func sameType(c *nodeContext) bool { return c.inputs[0].ints != nil }

var (
	prepareEqual = foldDef(alwaysInt, func(*nodeContext) func(x []float64) float64 {
		return func(x []float64) float64 { return b2f(x[0] == x[1]) }
	})
	prepareWhere = foldDef(func(c *nodeContext) bool { return c.inputs[1].ints != nil }, func(*nodeContext) func(x []float64) float64 {
		return func(x []float64) float64 {
			if x[0] != 0 {
				return x[1]
			}
			return x[2]
		}
	})
	prepareMod = foldDef(sameType, func(c *nodeContext) func(x []float64) float64 {
		fmod := c.attrs.int("fmod", 0) == 1
		return func(x []float64) float64 {
			r := math.Mod(x[0], x[1])
			if !fmod && r != 0 && (r < 0) != (x[1] < 0) {
				r += x[1] // the sign of the divisor, as Python's %
			}
			return r
		}
	})
)

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// prepareConstantOfShape is a tensor of the given (constant) shape filled
// with the value attribute's one element (float 0 by default).
func prepareConstantOfShape(c *nodeContext) (prepared, error) {
	dims, err := c.constInts(0, "shape")
	if err != nil {
		return prepared{}, err
	}
	shape := make([]int, len(dims))
	for i, d := range dims {
		if d < 0 || d > maxTensorElements {
			return prepared{}, fmt.Errorf("shape %v has the invalid dimension %d", dims, d)
		}
		shape[i] = int(d)
	}
	fill, integer := 0.0, false
	if t := c.attrs.tensor("value"); t != nil {
		v, err := t.Float64s()
		if err != nil || len(v) != 1 {
			return prepared{}, fmt.Errorf("value must hold one element")
		}
		fill, integer = v[0], t.DataType != onnx.Float && t.DataType != onnx.Double && t.DataType != onnx.Float16
	}
	if err := c.reserve(shape, integer, false); err != nil {
		return prepared{}, err
	}
	n := numElements(shape)
	data := slices.Repeat([]float32{float32(fill)}, n)
	v := &value{shape: shape, konst: &Tensor{Shape: shape, Data: data}}
	if integer {
		v.ints = slices.Repeat([]int64{int64(fill)}, n)
	}
	return prepared{consts: []*value{v}}, c.attrs.err
}

// prepareCast folds over constants (exactly for integers); on activations
// only a cast to float32, the runtime's own type, runs, as a copy.
func prepareCast(c *nodeContext) (prepared, error) {
	to := onnx.DataType(c.attrs.int("to", 0))
	integer := isIntegerType(to)
	if !c.inputs[0].isConst() {
		if to != onnx.Float && !c.shapesOnly {
			return prepared{}, fmt.Errorf("a Cast to %s of a value computed at run time: the runtime computes in float32 only", to)
		}
		return prepared{kernel: copyKernel{}, outputs: [][]int{slices.Clone(c.shape(0))}}, c.attrs.err
	}
	if err := c.reserve(c.shape(0), integer, true); err != nil {
		return prepared{}, err
	}
	in, _ := constInputs(c)
	vals := in[0]
	if integer {
		for i, v := range vals {
			vals[i] = math.Trunc(v)
			if to == onnx.Bool {
				vals[i] = b2f(v != 0)
			}
		}
	}
	return prepared{consts: []*value{constantOf(slices.Clone(c.shape(0)), vals, integer)}}, c.attrs.err
}

// prepareRange is start, start+delta, … below limit (above it for a
// negative delta), over constant scalars.
func prepareRange(c *nodeContext) (prepared, error) {
	in, err := constInputs(c)
	if err != nil {
		return prepared{}, err
	}
	for i, x := range in {
		if len(x) != 1 {
			return prepared{}, fmt.Errorf("input %d holds %d elements; want a scalar", i, len(x))
		}
	}
	start, limit, delta := in[0][0], in[1][0], in[2][0]
	if delta == 0 {
		return prepared{}, fmt.Errorf("delta is 0")
	}
	count := max(math.Ceil((limit-start)/delta), 0)
	if !(count <= maxTensorElements) {
		return prepared{}, fmt.Errorf("range of %g elements is too large", count)
	}
	n := int(count)
	if err := c.reserve([]int{n}, sameType(c), true); err != nil {
		return prepared{}, err
	}
	vals := make([]float64, n)
	for i := range vals {
		vals[i] = start + float64(i)*delta
	}
	return prepared{consts: []*value{constantOf([]int{n}, vals, sameType(c))}}, c.attrs.err
}

var prepareNot = foldDef(alwaysInt, func(*nodeContext) func(x []float64) float64 {
	return func(x []float64) float64 { return b2f(x[0] == 0) }
})

// prepareScatterND writes updates into a copy of data at the index
// tuples (the last axis of indices), over constants; reduction is not
// supported.
func prepareScatterND(c *nodeContext) (prepared, error) {
	if r := c.attrs.str("reduction", "none"); r != "none" {
		return prepared{}, fmt.Errorf("reduction %q is not supported", r)
	}
	in, err := constInputs(c)
	if err != nil {
		return prepared{}, err
	}
	data, idxShape := c.shape(0), c.shape(1)
	k := idxShape[len(idxShape)-1]
	if k > len(data) {
		return prepared{}, fmt.Errorf("index tuples of %d elements for data of rank %d", k, len(data))
	}
	if err := c.reserve(data, sameType(c), true); err != nil {
		return prepared{}, err
	}
	out := slices.Clone(in[0])
	strides := stridesOf(data)
	slice := numElements(data[k:])
	for t := 0; t < len(in[1])/max(k, 1); t++ {
		off := 0
		for d := 0; d < k; d++ {
			i := int(in[1][t*k+d])
			if i < 0 {
				i += data[d]
			}
			if i < 0 || i >= data[d] {
				return prepared{}, fmt.Errorf("index %d is out of range for dimension %d of size %d", int(in[1][t*k+d]), d, data[d])
			}
			off += i * strides[d]
		}
		copy(out[off:off+slice], in[2][t*slice:(t+1)*slice])
	}
	return prepared{consts: []*value{constantOf(slices.Clone(data), out, sameType(c))}}, c.attrs.err
}
