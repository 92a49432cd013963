package training

import (
	"fmt"
	"slices"

	"rulebook/onnx"
)

// outputShapes infers n's output shapes from its input shapes (ONNX
// semantics, opset 13–17), and records integer constants that later
// Reshapes read.
func (inf *inference) outputShapes(n *onnx.Node, in [][]int64) ([][]int64, error) {
	one := func(s []int64) ([][]int64, error) { return [][]int64{s}, nil }
	switch n.OpType {
	case "Relu", "Erf", "Sqrt", "Sigmoid", "Tanh", "Softmax", "Identity", "Dropout", "Cast", "Clip",
		"LayerNormalization", "BatchNormalization", "Neg", "Exp", "Log", "Gelu":
		return one(slices.Clone(in[0]))
	case "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Where", "Equal":
		return broadcastAll(in)
	case "Constant":
		return inf.constant(n)
	case "MatMul":
		return matmulShape(in[0], in[1])
	case "Gemm":
		a, b := in[0], in[1]
		m, nn := a[0], b[1]
		if attrInt(n, "transA", 0) == 1 {
			m = a[1]
		}
		if attrInt(n, "transB", 0) == 1 {
			nn = b[0]
		}
		return one([]int64{m, nn})
	case "Conv", "MaxPool", "AveragePool":
		return poolShape(n, in)
	case "GlobalAveragePool":
		s := slices.Clone(in[0])
		for i := 2; i < len(s); i++ {
			s[i] = 1
		}
		return one(s)
	case "Flatten":
		axis := attrInt(n, "axis", 1)
		return one([]int64{elements(in[0][:axis]), elements(in[0][axis:])})
	case "Reshape":
		return inf.reshape(n, in[0])
	case "Transpose":
		return one(transposeShape(n, in[0]))
	case "ReduceMean", "ReduceSum", "ReduceMax":
		return inf.reduce(n, in)
	case "Concat":
		return concatShape(n, in)
	case "Pad":
		return inf.pad(n, in)
	case "Gather":
		axis := attrInt(n, "axis", 0)
		d, idx := in[0], in[1]
		s := append(append(slices.Clone(d[:axis]), idx...), d[axis+1:]...)
		return one(s)
	}
	return nil, fmt.Errorf("the planner cannot infer shapes of operator %s", n.OpType)
}

func broadcastAll(in [][]int64) ([][]int64, error) {
	out := slices.Clone(in[0])
	for _, s := range in[1:] {
		b, err := broadcast(out, s)
		if err != nil {
			return nil, err
		}
		out = b
	}
	return [][]int64{out}, nil
}

func broadcast(a, b []int64) ([]int64, error) {
	n := max(len(a), len(b))
	out := make([]int64, n)
	for i := 0; i < n; i++ {
		x, y := dimFromEnd(a, n-1-i), dimFromEnd(b, n-1-i)
		switch {
		case x == y || y == 1:
			out[i] = x
		case x == 1:
			out[i] = y
		default:
			return nil, fmt.Errorf("shapes %v and %v do not broadcast", a, b)
		}
	}
	return out, nil
}

func dimFromEnd(s []int64, fromEnd int) int64 {
	if i := len(s) - 1 - fromEnd; i >= 0 {
		return s[i]
	}
	return 1
}

func matmulShape(a, b []int64) ([][]int64, error) {
	if len(a) < 2 || len(b) < 2 || a[len(a)-1] != b[len(b)-2] {
		return nil, fmt.Errorf("shapes %v and %v do not multiply", a, b)
	}
	batch, err := broadcast(a[:len(a)-2], b[:len(b)-2])
	if err != nil {
		return nil, err
	}
	return [][]int64{append(batch, a[len(a)-2], b[len(b)-1])}, nil
}

func poolShape(n *onnx.Node, in [][]int64) ([][]int64, error) {
	x := in[0]
	spatial := len(x) - 2
	kernel := attrInts(n, "kernel_shape", nil)
	channels := x[1]
	if n.OpType == "Conv" {
		w := in[1]
		kernel, channels = w[2:], w[0]
	}
	strides := attrInts(n, "strides", ones(spatial))
	pads := attrInts(n, "pads", make([]int64, 2*spatial))
	dil := attrInts(n, "dilations", ones(spatial))
	ceil := attrInt(n, "ceil_mode", 0) == 1
	if a := n.Attr("auto_pad"); a != nil && a.S != "" && a.S != "NOTSET" {
		return nil, fmt.Errorf("auto_pad %s is not supported", a.S)
	}
	out := []int64{x[0], channels}
	for i := 0; i < spatial; i++ {
		eff := dil[i]*(kernel[i]-1) + 1
		span := x[2+i] + pads[i] + pads[i+spatial] - eff
		d := span/strides[i] + 1
		if ceil && span%strides[i] != 0 {
			d++
		}
		out = append(out, d)
	}
	return [][]int64{out}, nil
}

func ones(n int) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = 1
	}
	return s
}

func attrInts(n *onnx.Node, name string, def []int64) []int64 {
	if a := n.Attr(name); a != nil {
		return a.Ints
	}
	return def
}

func (inf *inference) constant(n *onnx.Node) ([][]int64, error) {
	a := n.Attr("value")
	if a == nil || a.T == nil {
		return nil, fmt.Errorf("a Constant without a tensor value")
	}
	if a.T.DataType == onnx.Int64 || a.T.DataType == onnx.Int32 {
		if v, err := a.T.Float64s(); err == nil {
			inf.consts[n.Outputs[0]] = toInts(v)
		}
	}
	return [][]int64{slices.Clone(a.T.Dims)}, nil
}

// reshape resolves the target shape: 0 copies the input's dimension, −1
// takes what is left. A target whose dimension 0 is the exported batch (1)
// while the input's is the batch becomes the batch.
func (inf *inference) reshape(n *onnx.Node, x []int64) ([][]int64, error) {
	target, ok := inf.consts[n.Inputs[1]]
	if !ok {
		return nil, fmt.Errorf("the target shape %s of a Reshape is not a constant", n.Inputs[1])
	}
	out := slices.Clone(target)
	if inf.g.batched[n.Inputs[0]] && len(out) > 0 && out[0] == 1 && len(x) > 0 && x[0] != 1 {
		out[0] = x[0]
	}
	unknown := -1
	known := int64(1)
	for i, d := range out {
		switch {
		case d == 0:
			out[i] = x[i]
		case d == -1:
			unknown = i
			continue
		}
		known *= out[i]
	}
	if unknown >= 0 {
		if known == 0 {
			return nil, fmt.Errorf("cannot reshape %v to %v", x, target)
		}
		out[unknown] = elements(x) / known
	}
	if elements(out) != elements(x) {
		return nil, fmt.Errorf("cannot reshape %v to %v", x, target)
	}
	return [][]int64{out}, nil
}

func transposeShape(n *onnx.Node, x []int64) []int64 {
	perm := attrInts(n, "perm", nil)
	out := make([]int64, len(x))
	for i := range x {
		if perm == nil {
			out[i] = x[len(x)-1-i]
		} else {
			out[i] = x[perm[i]]
		}
	}
	return out
}

func (inf *inference) reduce(n *onnx.Node, in [][]int64) ([][]int64, error) {
	axes := attrInts(n, "axes", nil)
	if len(n.Inputs) > 1 {
		axes = inf.consts[n.Inputs[1]]
	}
	x := in[0]
	keep := attrInt(n, "keepdims", 1) == 1
	var out []int64
	for i, d := range x {
		reduced := axes == nil
		for _, a := range axes {
			if a == int64(i) || a+int64(len(x)) == int64(i) {
				reduced = true
			}
		}
		switch {
		case !reduced:
			out = append(out, d)
		case keep:
			out = append(out, 1)
		}
	}
	return [][]int64{out}, nil
}

func concatShape(n *onnx.Node, in [][]int64) ([][]int64, error) {
	axis := attrInt(n, "axis", 0)
	out := slices.Clone(in[0])
	if axis < 0 {
		axis += int64(len(out))
	}
	for _, s := range in[1:] {
		out[axis] += s[axis]
	}
	return [][]int64{out}, nil
}

func (inf *inference) pad(n *onnx.Node, in [][]int64) ([][]int64, error) {
	pads := attrInts(n, "pads", nil)
	if len(n.Inputs) > 1 {
		pads = inf.consts[n.Inputs[1]]
	}
	out := slices.Clone(in[0])
	if len(pads) != 2*len(out) {
		return nil, fmt.Errorf("pads %v for rank %d", pads, len(out))
	}
	for i := range out {
		out[i] += pads[i] + pads[i+len(out)]
	}
	return [][]int64{out}, nil
}
