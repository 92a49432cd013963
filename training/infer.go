package training

import (
	"errors"
	"fmt"
	"slices"

	"rulebook/onnx"
	"rulebook/rules"
	"rulebook/runtime"
)

// inference carries shapes (the runtime's, for every value) and which
// values are weights and integer constants while the nodes are visited in
// order.
type inference struct {
	g       *Graph
	onnx    *onnx.Graph
	shapes  *runtime.Shapes
	consts  map[string]bool   // integer initializers, Constants and what is computed from them alone
	weights map[string]string // weight value -> the initializer it is
	owned   map[string]bool   // initializers already given to an operator
	strided map[string]bool   // transposed views, which a Reshape copies
}

// newInference reads the initializers and gives every graph input its
// shape at the batch: dimension axis is the batch, and a dimension
// without a size is 1. The runtime then infers the rest, re-deriving a constant
// Reshape target traced at the declared batch for the batch.
func newInference(m *onnx.Model, g *Graph, batch int64, axis int) (*inference, error) {
	og := m.Graph
	inf := &inference{g: g, onnx: og, consts: map[string]bool{}, weights: map[string]string{}, owned: map[string]bool{}, strided: map[string]bool{}}
	for _, t := range og.Initializers {
		if err := checkShape("initializer "+t.Name, t.Dims); err != nil {
			return nil, err
		}
		g.shapes[t.Name] = slices.Clone(t.Dims)
		if t.DataType == onnx.Float || t.DataType == onnx.Float16 || t.DataType == onnx.Double {
			inf.weights[t.Name] = t.Name
		} else if _, err := t.Float64s(); err == nil {
			inf.consts[t.Name] = true
		}
	}
	opt := runtime.ShapeOptions{Inputs: map[string][]int{}, Batched: map[string]bool{}, BatchAxis: map[string]int{}, RetraceBatch: true,
		Traced: map[string][]int{}, Opset: assumedOpset}
	for _, in := range og.Inputs {
		if og.Initializer(in.Name) != nil {
			continue
		}
		shape := make([]int64, len(in.Shape))
		for i, d := range in.Shape {
			shape[i] = d.Value
			if !d.HasValue {
				shape[i] = 1
			}
		}
		// The export was traced at its declared shape; Reshape targets
		// traced there are re-derived for the batch.
		opt.Traced[in.Name] = toInt(shape)
		if len(shape) > axis {
			shape[axis] = batch
			g.batched[in.Name] = true
			opt.Batched[in.Name], opt.BatchAxis[in.Name] = true, axis
		}
		if err := checkShape("input "+in.Name, shape); err != nil {
			return nil, fmt.Errorf("at batch %d: %w", batch, err)
		}
		g.shapes[in.Name] = shape
		g.inputs[in.Name] = true
		opt.Inputs[in.Name] = toInt(shape)
	}
	shapes, err := runtime.InferShapes(m, opt)
	if err != nil {
		return nil, shapeError(err)
	}
	inf.shapes = shapes
	return inf, nil
}

// assumedOpset is the default domain's version read into a model that
// imports none: the planner's shapes follow opsets 13 to 17.
const assumedOpset = 17

// shapeError marks what the runtime's shape inference refuses as an
// invalid model, unless the operator is one the runtime lacks.
func shapeError(err error) error {
	if _, ok := errors.AsType[*runtime.UnsupportedOpsError](err); ok {
		return err
	}
	return fmt.Errorf("%w (%w)", err, ErrInvalid)
}

func toInt(s []int64) []int {
	out := make([]int, len(s))
	for i, d := range s {
		out[i] = int(d)
	}
	return out
}

func toInt64(s []int) []int64 {
	out := make([]int64, len(s))
	for i, d := range s {
		out[i] = int64(d)
	}
	return out
}

// shape is v's shape as the runtime inferred it; nil for an omitted
// input or output.
func (inf *inference) shape(v string) []int64 {
	if v == "" {
		return nil
	}
	if s, ok := inf.g.shapes[v]; ok {
		return s
	}
	s, _ := inf.shapes.Shape(v)
	return toInt64(s)
}

// node reads n's shapes and appends its Op.
func (inf *inference) node(n *onnx.Node) error {
	in := make([][]int64, len(n.Inputs))
	for i, v := range n.Inputs {
		in[i] = inf.shape(v)
	}
	out := make([][]int64, len(n.Outputs))
	for i, v := range n.Outputs {
		out[i] = inf.shape(v)
		if err := checkShape("output "+v, out[i]); err != nil {
			return err
		}
	}
	op := Op{Name: n.Name, Type: n.OpType, Module: ModulePath(n.Name), Inputs: n.Inputs, Outputs: n.Outputs,
		NeedsAllFeatures: needsAllFeatures[n.OpType], Class: ClassOf(n.OpType)}
	allWeights := true
	for _, v := range n.Inputs {
		if _, w := inf.weights[v]; !w && v != "" {
			allWeights = false
		}
	}
	for i, v := range n.Outputs {
		if v == "" {
			continue
		}
		inf.g.shapes[v] = out[i]
		inf.g.batched[v] = inf.shapes.Batched(v)
		op.OutputBytes += 4 * float64(runtime.Elements(out[i]))
		if n.OpType == "Identity" && allWeights && len(n.Inputs) == 1 {
			inf.weights[v] = inf.weights[n.Inputs[0]]
		}
	}
	if inf.folds(n) {
		for _, v := range n.Outputs {
			inf.consts[v] = true
		}
	}
	if n.OpType == "Identity" && allWeights {
		op.OutputBytes = 0
	}
	if len(out) > 0 && len(in) > 0 {
		readAxes(n, &op, len(out[0]), len(in[0]))
	}
	inf.work(n, &op, in, out)
	inf.view(n)
	idx := len(inf.g.Ops)
	for _, v := range n.Inputs {
		if v != "" {
			inf.g.consumers[v] = append(inf.g.consumers[v], idx)
		}
	}
	for _, v := range n.Outputs {
		inf.g.producer[v] = idx
	}
	inf.g.Ops = append(inf.g.Ops, op)
	return nil
}

// folds reports whether n's outputs are constants: a Constant, or an
// operator reading only constants (torch.onnx's Pow(Constant, Constant)
// for a scale).
func (inf *inference) folds(n *onnx.Node) bool {
	if n.OpType == "Constant" {
		return true
	}
	for _, v := range n.Inputs {
		if v != "" && !inf.consts[v] {
			return false
		}
	}
	return len(n.Inputs) > 0
}

// activation reports whether v is data flowing from the graph input (not
// a weight or constant).
func (inf *inference) activation(v string) bool {
	_, w := inf.weights[v]
	c := inf.consts[v]
	return v != "" && !w && !c && inf.onnx.Initializer(v) == nil
}

// needsAllFeatures lists the operators that read every feature of their
// input.
var needsAllFeatures = map[string]bool{"LayerNormalization": true, "ReduceMean": true, "ReduceSum": true,
	"ReduceMax": true, "Flatten": true, "Gemm": true, "Concat": true, "Split": true}

// work sets the node's forward and backward work from the ONNX count,
// and what training keeps: the weights it owns and the activations it
// saves for the backward pass.
func (inf *inference) work(n *onnx.Node, op *Op, in, out [][]int64) {
	for _, v := range n.Inputs {
		if v == "" {
			continue
		}
		if w, ok := inf.weights[v]; ok && !inf.owned[w] && n.OpType != "Identity" {
			inf.owned[w] = true
			op.ParamBytes += 4 * float64(runtime.Elements(inf.g.shapes[w]))
		}
	}
	if runtime.CostsNothing(n.OpType) {
		return
	}
	op.Forward = runtime.NodeWork(n, in, out)
	switch n.OpType {
	case "MatMul", "Gemm", "Conv":
		op.Product = inf.product(n, in, out, runtime.Contraction(n, in))
	}
	op.Backward = Work{FLOPs: op.Forward.FLOPs, Bytes: 2 * op.Forward.Bytes}
	if op.Product != nil || n.OpType == "MatMul" {
		op.Backward.FLOPs = 2 * op.Forward.FLOPs
	}
	if n.OpType == "Gather" && len(n.Inputs) > 1 {
		if _, table := inf.weights[n.Inputs[0]]; table {
			op.Forward, op.Backward = inf.lookup(in, out)
			op.Lookup = true
		}
	}
	op.Saved = inf.saved(n, in, out)
}

// lookup is an embedding lookup's work: it reads the indices and only the
// rows it gathers, not the table; backward adds the output's gradient
// into those rows.
func (inf *inference) lookup(in, out [][]int64) (fwd, bwd Work) {
	rows := 4 * float64(runtime.Elements(out[0]))
	idx := 8 * float64(runtime.Elements(in[1]))
	fwd = Work{FLOPs: 0, Bytes: idx + 2*rows}
	bwd = Work{FLOPs: float64(runtime.Elements(out[0])), Bytes: idx + 3*rows}
	return fwd, bwd
}

// product describes n as a weight product when its second input is a
// weight (an ungrouped convolution's kernel, a MatMul's or Gemm's matrix).
func (inf *inference) product(n *onnx.Node, in, out [][]int64, k int64) *Product {
	if _, ok := inf.weights[n.Inputs[1]]; !ok || (n.OpType == "Conv" && attrInt(n, "group", 1) != 1) || len(in[1]) < 2 {
		return nil
	}
	o := out[0]
	p := &Product{K: k, Weight: n.Inputs[1], Linear: n.OpType != "Conv"}
	switch {
	case n.OpType == "Conv":
		p.N, p.WeightOutAxis, p.WeightInAxis = in[1][0], 0, 1
		p.Conv = convAttrs(n, in[0], in[1])
	case n.OpType == "Gemm" && attrInt(n, "transB", 0) == 1:
		p.N, p.WeightOutAxis, p.WeightInAxis = in[1][0], 0, 1
	default:
		p.N, p.WeightOutAxis, p.WeightInAxis = in[1][len(in[1])-1], len(in[1])-1, len(in[1])-2
	}
	if p.N > 0 {
		p.M = runtime.Elements(o) / p.N
	}
	return p
}

// convAttrs are an ungrouped Conv's parameters in the registry's terms,
// or nil where the registry cannot express its window.
func convAttrs(n *onnx.Node, x, w []int64) *rules.ConvAttrs {
	if len(x) != 4 || len(w) != 4 {
		return nil
	}
	win := rules.ONNXWindow{Kernel: []int{int(w[2]), int(w[3])}, In: []int{int(x[2]), int(x[3])},
		Strides: n.AttrInts(rules.ONNXAttrStrides), Dilations: n.AttrInts(rules.ONNXAttrDilations), Pads: n.AttrInts(rules.ONNXAttrPads), AutoPad: n.AttrString(rules.ONNXAttrAutoPad, "")}
	stride, padding, why := win.Registry()
	if why != "" {
		return nil
	}
	return &rules.ConvAttrs{Stride: stride, Padding: padding, Activation: rules.ActNone, Groups: 1}
}

func attrInt(n *onnx.Node, name string, def int64) int64 {
	if a := n.Attr(name); a != nil {
		return a.I
	}
	return def
}
