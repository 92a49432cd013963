package runtime

import (
	"fmt"
	"slices"

	"rulebook/onnx"
)

// Retracing a batch: an export traced at one batch holds Reshape targets
// that are constants for that batch. To infer shapes at another batch,
// InferShapes first infers them at the traced shapes and follows the
// batch there as a digit: one factor of one dimension, with the traced
// batch as its extent. A constant Reshape target is then re-derived at
// the new batch by scaling the output dimension the digit lands in.
// Where the traced shapes leave that dimension open (a batch of 1 merged
// with another dimension, say), the target is refused, not guessed.

// digit places the batch in a value traced at the traced batch: its
// dimension dim is outer·extent·inner.
type digit struct {
	dim, inner, extent int
}

// RetraceError is a constant Reshape target, traced at another batch,
// that cannot be re-derived at the batch asked for.
type RetraceError struct {
	Node   string // the Reshape node's name, or its output's
	Traced []int  // the input's shape as traced
	Input  []int  // the input's shape at the batch asked for
	Target []int  // the target as traced
	Why    string
}

func (e *RetraceError) Error() string {
	return fmt.Sprintf("Reshape %q: its constant target %s was traced for input %s and cannot be re-derived for input %s (%s); export with a dynamic batch (torch.onnx.export dynamic_axes) so that the target is computed from Shape, or at a batch above 1",
		e.Node, formatShape(e.Target), formatShape(e.Traced), formatShape(e.Input), e.Why)
}

// traced is what the first pass learned at the traced shapes, by value
// name: its shape and, where it is known, where the batch lies in it.
type traced struct {
	shapes map[string][]int
	digits map[string]digit
}

// strides are the row-major strides of shape.
func strides(shape []int) []int {
	s := make([]int, len(shape))
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= shape[i]
	}
	return s
}

// landing finds where digit d of shape x lands in the reshape of x to o
// (same element count): the output dimension whose span holds the
// digit's whole span. A digit of extent 1 sits on a boundary that two
// dimensions may share; it then lands in a dimension of size 1 at its
// stride, the batch kept as its own dimension, or nowhere. An empty
// value has no strides to place it by (found by FuzzTrainingFromONNX).
func landing(x, o []int, d digit) (digit, bool) {
	if numElements(x) == 0 || numElements(o) == 0 || d.dim < 0 || d.dim >= len(x) {
		return digit{}, false
	}
	sx := strides(x)
	lo := d.inner * sx[d.dim]
	hi := lo * d.extent
	so := strides(o)
	var found []int
	for k := range o {
		if lo%so[k] == 0 && so[k] <= lo && hi <= so[k]*o[k] && (hi%so[k] == 0) && (so[k]*o[k])%hi == 0 {
			found = append(found, k)
		}
	}
	if len(found) > 1 && d.extent == 1 {
		whole := slices.DeleteFunc(slices.Clone(found), func(k int) bool { return o[k] != 1 || so[k] != lo })
		if len(whole) == 1 {
			found = whole
		}
	}
	if len(found) != 1 {
		return digit{}, false
	}
	k := found[0]
	return digit{dim: k, inner: lo / so[k], extent: d.extent}, true
}

// follow places the batch in a node's first output, in the traced pass,
// from where it lies in the inputs; a node it cannot follow drops it.
func (p *shapePass) follow(n *onnx.Node, in, outs []int, values []*value) {
	if p.digits == nil || n.OpType == "Shape" || len(outs) == 0 {
		return
	}
	for _, out := range outs {
		if out < 0 {
			continue
		}
		if d, ok := p.place(n, in, values, values[out].shape); ok {
			p.digits[out] = d
		}
	}
}

// place is where the batch lies in an output of shape o of node n.
func (p *shapePass) place(n *onnx.Node, in []int, values []*value, o []int) (digit, bool) {
	at := -1
	for i, id := range in {
		if _, ok := p.digits[id]; id >= 0 && ok {
			at = i
			break
		}
	}
	if at < 0 {
		return digit{}, false
	}
	d, x := p.digits[in[at]], values[in[at]].shape
	switch n.OpType {
	case "Reshape", "Flatten":
		if numElements(x) != numElements(o) {
			return digit{}, false
		}
		return landing(x, o, d)
	case "Transpose":
		perm := attrInts(n, "perm")
		if perm == nil {
			perm = make([]int64, len(x))
			for i := range perm {
				perm[i] = int64(len(x) - 1 - i)
			}
		}
		if k := slices.Index(perm, int64(d.dim)); k >= 0 && k < len(o) {
			return digit{k, d.inner, d.extent}, true
		}
		return digit{}, false
	case "Squeeze", "Unsqueeze":
		return squeezePlace(n, in, values, x, o, d)
	case "MatMul":
		return matmulPlace(at, x, o, d, in, values, p)
	case "Gather":
		return gatherPlace(n, at, x, o, d, in, values)
	}
	k := d.dim + len(o) - len(x)
	if k >= 0 && k < len(o) && o[k] == x[d.dim] {
		return digit{k, d.inner, d.extent}, true
	}
	return digit{}, false
}

// squeezePlace keeps the batch's dimension through dimensions of size 1
// inserted or removed; a removed batch dimension drops it.
func squeezePlace(n *onnx.Node, in []int, values []*value, x, o []int, d digit) (digit, bool) {
	var axes []int64
	if len(in) > 1 && in[1] >= 0 {
		axes = values[in[1]].ints
	} else {
		axes = attrInts(n, "axes")
	}
	rank := len(x)
	if n.OpType == "Unsqueeze" {
		rank = len(o)
	}
	marked := make([]bool, rank)
	for _, a := range axes {
		if a < 0 {
			a += int64(rank)
		}
		if a < 0 || a >= int64(rank) {
			return digit{}, false
		}
		marked[a] = true
	}
	if axes == nil && n.OpType == "Squeeze" {
		for i, s := range x {
			marked[i] = s == 1
		}
	}
	if n.OpType == "Squeeze" {
		if marked[d.dim] {
			return digit{}, false
		}
		k := d.dim - count(marked[:d.dim])
		return digit{k, d.inner, d.extent}, true
	}
	k := -1
	for i, seen := 0, 0; i < len(o); i++ {
		if marked[i] {
			continue
		}
		if seen == d.dim {
			k = i
			break
		}
		seen++
	}
	return digit{k, d.inner, d.extent}, k >= 0
}

func count(b []bool) int {
	c := 0
	for _, x := range b {
		if x {
			c++
		}
	}
	return c
}

// matmulPlace: a batch in a row or a batch dimension of either operand
// stays; one in the contracted dimension leaves the product.
func matmulPlace(at int, x, o []int, d digit, in []int, values []*value, p *shapePass) (digit, bool) {
	if len(x) < 2 || len(o) < 1 {
		return digit{}, false
	}
	if at == 0 && d.dim != len(x)-1 {
		return digit{d.dim + len(o) - len(x), d.inner, d.extent}, d.dim+len(o)-len(x) >= 0
	}
	if at == 0 && len(in) > 1 && in[1] >= 0 {
		if bd, ok := p.digits[in[1]]; ok {
			return matmulPlace(1, values[in[1]].shape, o, bd, in, values, p)
		}
	}
	if at == 1 && d.dim != len(x)-2 {
		return digit{d.dim + len(o) - len(x), d.inner, d.extent}, d.dim+len(o)-len(x) >= 0
	}
	return digit{}, false
}

// gatherPlace: the batch outside the gathered axis stays, shifted by the
// indices' rank; in the indices, it moves to where they are read.
func gatherPlace(n *onnx.Node, at int, x, o []int, d digit, in []int, values []*value) (digit, bool) {
	axis := int(attrInt(n, "axis", 0))
	if at == 1 {
		data := values[in[0]].shape
		if axis < 0 {
			axis += len(data)
		}
		return digit{axis + d.dim, d.inner, d.extent}, axis >= 0
	}
	if axis < 0 {
		axis += len(x)
	}
	idx := len(o) - len(x) + 1
	switch {
	case d.dim < axis:
		return d, true
	case d.dim > axis:
		return digit{d.dim + idx - 1, d.inner, d.extent}, true
	}
	return digit{}, false
}

func attrInts(n *onnx.Node, name string) []int64 {
	if a := n.Attr(name); a != nil {
		return a.Ints
	}
	return nil
}

func attrInt(n *onnx.Node, name string, def int64) int64 {
	if a := n.Attr(name); a != nil {
		return a.I
	}
	return def
}

// rederive is Reshape node n's target at input shape x1 when the target
// is a constant traced for another batch: the traced output with the
// dimension that holds the batch scaled. Targets computed from Shape, and
// inputs unchanged since the trace, keep theirs.
func (p *shapePass) rederive(n *onnx.Node, x1 []int, target *value) (*value, error) {
	in, out := n.Inputs[0], n.Outputs[0]
	x0, ok := p.traced.shapes[in]
	o0, okOut := p.traced.shapes[out]
	if !ok || !okOut || slices.Equal(x0, x1) {
		return target, nil
	}
	name := n.Name
	if name == "" {
		name = out
	}
	refuse := func(why string) error {
		// A target with -1 or 0 that fits the new input says itself
		// where the change goes, as ONNX reads it.
		if _, err := reshapeTarget(x1, target.ints, attrInt(n, "allowzero", 0) != 0, maxShapeElements); err == nil && slices.ContainsFunc(target.ints, func(d int64) bool { return d <= 0 }) {
			return nil
		}
		return &RetraceError{Node: name, Traced: x0, Input: x1, Target: o0, Why: why}
	}
	refused := func(why string) (*value, error) {
		if err := refuse(why); err != nil {
			return nil, err
		}
		return target, nil
	}
	d, ok := p.traced.digits[in]
	if !ok {
		return refused("the batch cannot be followed to this input")
	}
	changed := 0
	for i := range x1 {
		if i >= len(x0) || x0[i] != x1[i] {
			changed++
			if i != d.dim {
				return refused(fmt.Sprintf("dimension %d changed, not the batch's", i))
			}
		}
	}
	if len(x0) != len(x1) || changed != 1 {
		return refused("the input's rank changed")
	}
	to, ok := landing(x0, o0, d)
	if !ok {
		return refused("the batch could land in more than one dimension of the target")
	}
	o1 := slices.Clone(o0)
	scaled := o0[to.dim] * x1[d.dim]
	if x0[d.dim] == 0 || scaled%x0[d.dim] != 0 {
		return refused("the batch does not divide the target")
	}
	o1[to.dim] = scaled / x0[d.dim]
	ints := make([]int64, len(o1))
	for i, s := range o1 {
		ints[i] = int64(s)
	}
	v := intConstant(ints, []int{len(ints)})
	v.name = target.name
	return v, nil
}
