package runtime

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"rulebook/internal/budget"
	"rulebook/onnx"
)

// InferShapes is the load's shape inference without the load: the same
// operator preparation, with float initializers kept as shapes (no data
// read or generated) and integer constants still folded, so that Reshape
// targets and Shape→Gather→Concat chains resolve. The training planner
// uses it to size each operator at batches far past what would fit in
// memory.

// maxShapeElements bounds the tensors whose shapes alone are inferred:
// their size in 4-byte elements still fits in an int64.
const maxShapeElements = math.MaxInt64 / 4

// ShapeOptions says how InferShapes reads the graph inputs.
type ShapeOptions struct {
	// Inputs are the shapes of the graph inputs (those that are not
	// initializers), in place of the declared ones. Every input needs one.
	Inputs map[string][]int
	// Batched names the inputs that carry the batch, on dimension
	// BatchAxis[name] (0 when absent). A value computed from a batched one
	// carries the batch too, when it has a dimension, unless Shape
	// computed it.
	Batched   map[string]bool
	BatchAxis map[string]int
	// RetraceBatch: a Reshape target that is a constant, traced at the
	// batch of Traced, is re-derived for the batch of Inputs (see
	// retrace.go); one that cannot be is refused with a *RetraceError.
	RetraceBatch bool
	// Traced are the input shapes the model was traced at, for
	// RetraceBatch; an input without one was traced at its given shape,
	// with dimension 0 set to 1 if it is batched.
	Traced map[string][]int
	// Opset is the version of the default domain assumed when the model
	// imports none; 0 refuses such a model, as Load does.
	Opset int64
}

// Shapes are the inferred shapes of a model's values.
type Shapes struct {
	byName  map[string]int
	values  []*value
	batched map[int]bool
}

// Shape is value name's shape: a graph input, an initializer, a constant
// or a node output.
func (s *Shapes) Shape(name string) ([]int, bool) {
	id, ok := s.byName[name]
	if !ok {
		return nil, false
	}
	return slices.Clone(s.values[id].shape), true
}

// Batched reports whether value name carries the batch (see
// ShapeOptions.Batched).
func (s *Shapes) Batched(name string) bool {
	id, ok := s.byName[name]
	return ok && s.batched[id]
}

// shapePass is what the builder keeps while it infers shapes only.
type shapePass struct {
	batched map[int]bool
	// digits, in the pass at the traced shapes, place the batch in each
	// value that holds it.
	digits map[int]digit
	// traced, in the pass at the batch asked for, is what the traced pass
	// learned; nil when targets are kept as they are.
	traced *traced
	// dynamic are the values computed from a Shape: their targets follow
	// the input shapes already.
	dynamic map[int]bool
}

// InferShapes infers the shape of every value of m with the given input
// shapes. Its errors are the load's, for the same graph.
func InferShapes(m *onnx.Model, opt ShapeOptions) (*Shapes, error) {
	pass := &shapePass{batched: map[int]bool{}, dynamic: map[int]bool{}}
	if opt.RetraceBatch {
		t, err := traceBatch(m, opt)
		if err != nil {
			return nil, err
		}
		pass.traced = t
	}
	return inferShapes(m, opt, pass)
}

// traceBatch infers shapes at the traced input shapes and follows the
// batch through them.
func traceBatch(m *onnx.Model, opt ShapeOptions) (*traced, error) {
	at := ShapeOptions{Inputs: map[string][]int{}, Batched: opt.Batched, BatchAxis: opt.BatchAxis, Opset: opt.Opset}
	for name, shape := range opt.Inputs {
		t, ok := opt.Traced[name]
		if !ok {
			t = slices.Clone(shape)
			if axis := opt.BatchAxis[name]; len(t) > axis && opt.Batched[name] {
				t[axis] = 1
			}
		}
		at.Inputs[name] = t
	}
	if maps.EqualFunc(at.Inputs, opt.Inputs, slices.Equal) {
		return nil, nil // at the traced shapes, every target holds
	}
	pass := &shapePass{batched: map[int]bool{}, dynamic: map[int]bool{}, digits: map[int]digit{}}
	s, err := inferShapes(m, at, pass)
	if err != nil {
		return nil, fmt.Errorf("at the input shapes the model was traced at (%s; a dynamic dimension is taken as 1): %w", formatInputs(at.Inputs), err)
	}
	t := &traced{shapes: map[string][]int{}, digits: map[string]digit{}}
	for name, id := range s.byName {
		t.shapes[name] = s.values[id].shape
		if d, ok := pass.digits[id]; ok {
			t.digits[name] = d
		}
	}
	return t, nil
}

func inferShapes(m *onnx.Model, opt ShapeOptions, pass *shapePass) (*Shapes, error) {
	if m.Graph == nil {
		return nil, fmt.Errorf("the model has no graph")
	}
	opset := opt.Opset
	if _, imported := m.Opset(""); imported || opset == 0 {
		var err error
		if opset, err = checkOpset(m); err != nil {
			return nil, err
		}
	} else if opset < minOpset || opset > maxOpset {
		return nil, fmt.Errorf("opset %d is assumed; supported opsets are %d..%d", opset, minOpset, maxOpset)
	}
	if err := checkOperators(m.Graph); err != nil {
		return nil, err
	}
	mem := budget.NewMeter(budget.Budget{})
	b := &builder{opset: opset, byName: map[string]int{}, mem: mem, shapes: pass,
		weights: &weightLoader{mode: WeightsFile, report: &LoadReport{}, present: map[string]bool{}, mem: mem}}
	if err := b.addInitializers(m.Graph); err != nil {
		return nil, err
	}
	if err := b.addGivenInputs(m.Graph, opt); err != nil {
		return nil, err
	}
	order, err := topologicalOrder(m.Graph, b.byName)
	if err != nil {
		return nil, err
	}
	for _, i := range order {
		if err := b.addNode(i, m.Graph.Nodes[i]); err != nil {
			return nil, err
		}
	}
	return &Shapes{byName: b.byName, values: b.values, batched: pass.batched}, nil
}

// addGivenInputs adds the graph inputs with the shapes opt gives them.
func (b *builder) addGivenInputs(g *onnx.Graph, opt ShapeOptions) error {
	for _, vi := range g.Inputs {
		if _, isInit := b.byName[vi.Name]; isInit {
			continue
		}
		if vi.Name == "" {
			return fmt.Errorf("a graph input has no name")
		}
		shape, ok := opt.Inputs[vi.Name]
		if !ok {
			return fmt.Errorf("input %q: no shape is given", vi.Name)
		}
		if _, err := elementsUpTo(shape, maxShapeElements); err != nil {
			return fmt.Errorf("input %q: %w", vi.Name, err)
		}
		id, err := b.newValue(&value{name: vi.Name, shape: slices.Clone(shape)})
		if err != nil {
			return err
		}
		if axis := opt.BatchAxis[vi.Name]; opt.Batched[vi.Name] && len(shape) > axis {
			b.shapes.batched[id] = true
			if b.shapes.digits != nil {
				b.shapes.digits[id] = digit{dim: axis, inner: 1, extent: shape[axis]}
			}
		}
	}
	return nil
}

// shapeOnly is an initializer that InferShapes does not read: a float
// weight, or anything stored outside the file.
func shapeOnly(t *onnx.Tensor) bool {
	return !isIntegerType(t.DataType) || t.DataLocation == onnx.LocationExternal
}

// initializer is t as a value: its data, or only its shape where the
// builder infers shapes and t is not an integer constant it may need.
func (b *builder) initializer(t *onnx.Tensor) (*value, error) {
	if b.shapes == nil || !shapeOnly(t) {
		return b.weights.load(t)
	}
	shape, err := tensorShape(t)
	if err != nil {
		return nil, err
	}
	return &value{name: t.Name, shape: shape}, nil
}

// retrace gives a Reshape of a batched value its target re-derived for
// the batch (ShapeOptions.RetraceBatch); other nodes keep their inputs.
func (p *shapePass) retrace(n *onnx.Node, ids []int, inputs []*value) ([]*value, error) {
	if p.traced == nil || n.OpType != "Reshape" || len(inputs) < 2 || inputs[0] == nil || inputs[1] == nil || !p.batched[ids[0]] || p.dynamic[ids[1]] {
		return inputs, nil
	}
	v, err := p.rederive(n, inputs[0].shape, inputs[1])
	if err != nil || v == inputs[1] {
		return inputs, err
	}
	out := slices.Clone(inputs)
	out[1] = v
	return out, nil
}

// propagate marks a node's outputs batched when an input is (see
// ShapeOptions.Batched).
func (p *shapePass) propagate(n *onnx.Node, in, outs []int, values []*value) {
	p.follow(n, in, outs, values)
	if n.OpType == "Shape" || slices.ContainsFunc(in, func(id int) bool { return id >= 0 && p.dynamic[id] }) {
		for _, id := range outs {
			if id >= 0 {
				p.dynamic[id] = true
			}
		}
	}
	if n.OpType == "Shape" || !slices.ContainsFunc(in, func(id int) bool { return id >= 0 && p.batched[id] }) {
		return
	}
	for _, id := range outs {
		if id >= 0 && len(values[id].shape) > 0 {
			p.batched[id] = true
		}
	}
}

// formatInputs lists input shapes by name, sorted.
func formatInputs(in map[string][]int) string {
	names := make([]string, 0, len(in))
	for name := range in {
		names = append(names, name)
	}
	slices.Sort(names)
	var b strings.Builder
	for i, name := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s", name, formatShape(in[name]))
	}
	return b.String()
}
