package training

// This file checks a node against what shapes.go's inference reads of it,
// before it is read: a model is a file from anywhere, and a node with too
// few inputs, an axis out of range or a zero stride must be refused with
// a line saying so, not crash the planner.

import (
	"fmt"
	"math"
	"slices"

	"rulebook/onnx"
)

// minInputs is how many leading inputs each operator must name (the
// operators not listed read one).
var minInputs = map[string]int{"Constant": 0, "Add": 2, "Sub": 2, "Mul": 2, "Div": 2, "Pow": 2, "Equal": 2,
	"Where": 3, "MatMul": 2, "Gemm": 2, "Conv": 2, "Reshape": 2, "Gather": 2}

// checkNode refuses a node whose inputs or attributes the inference for
// its operator cannot read.
func (inf *inference) checkNode(n *onnx.Node, in [][]int64) error {
	if len(n.Outputs) == 0 || n.Outputs[0] == "" {
		return fmt.Errorf("the node names no output")
	}
	need, listed := minInputs[n.OpType]
	if !listed {
		need = 1
	}
	if len(n.Inputs) < need || slices.Contains(n.Inputs[:need], "") {
		return fmt.Errorf("the operator reads %d inputs; the node names %q", need, n.Inputs)
	}
	switch n.OpType {
	case "Gemm":
		if len(in[0]) != 2 || len(in[1]) != 2 {
			return fmt.Errorf("shapes %v and %v; want two matrices", in[0], in[1])
		}
	case "Conv", "MaxPool", "AveragePool":
		return checkWindow(n, in)
	case "Flatten":
		if axis := attrInt(n, "axis", 1); axis < 0 || axis > int64(len(in[0])) {
			return fmt.Errorf("axis %d of a shape of rank %d; want 0 to %d", axis, len(in[0]), len(in[0]))
		}
	case "Gather":
		if axis := attrInt(n, "axis", 0); axis < 0 || axis >= int64(len(in[0])) {
			return fmt.Errorf("axis %d of a shape of rank %d; want 0 to %d", axis, len(in[0]), len(in[0])-1)
		}
	case "Transpose":
		if perm := attrInts(n, "perm", nil); perm != nil && !isPermutation(perm, len(in[0])) {
			return fmt.Errorf("perm %v of a shape of rank %d; want a permutation of 0 to %d", perm, len(in[0]), len(in[0])-1)
		}
	case "Concat":
		return checkConcat(n, in)
	case "Reshape":
		return inf.checkReshape(n, in[0])
	}
	return nil
}

// checkWindow checks a convolution's or pooling's ranks and attributes.
func checkWindow(n *onnx.Node, in [][]int64) error {
	x := in[0]
	if len(x) < 3 {
		return fmt.Errorf("a shape %v of rank %d; want rank 3 or more", x, len(x))
	}
	spatial := len(x) - 2
	kernel := attrInts(n, "kernel_shape", nil)
	if n.OpType == "Conv" {
		if len(in[1]) != len(x) {
			return fmt.Errorf("input %v and kernel %v of another rank", x, in[1])
		}
		kernel = in[1][2:]
	}
	lengths := []struct {
		name string
		v    []int64
		want int
	}{
		{"kernel_shape", kernel, spatial}, {"strides", attrInts(n, "strides", ones(spatial)), spatial},
		{"dilations", attrInts(n, "dilations", ones(spatial)), spatial},
		{"pads", attrInts(n, "pads", make([]int64, 2*spatial)), 2 * spatial},
	}
	for _, l := range lengths {
		if len(l.v) != l.want {
			return fmt.Errorf("%s %v for %d spatial dimensions; want %d values", l.name, l.v, spatial, l.want)
		}
		if l.name != "pads" && slices.ContainsFunc(l.v, func(d int64) bool { return d < 1 }) {
			return fmt.Errorf("%s %v; want positive values", l.name, l.v)
		}
	}
	return nil
}

// checkConcat checks that every input has the first's rank and the axis is
// one of its axes.
func checkConcat(n *onnx.Node, in [][]int64) error {
	r := int64(len(in[0]))
	if axis := attrInt(n, "axis", 0); axis < -r || axis >= r {
		return fmt.Errorf("axis %d of shapes of rank %d; want %d to %d", axis, r, -r, r-1)
	}
	for i, s := range in {
		if n.Inputs[i] == "" || len(s) != int(r) {
			return fmt.Errorf("shapes %v and %v of other ranks", in[0], s)
		}
	}
	return nil
}

// checkReshape checks a Reshape's constant target against its input: 0
// copies a dimension the input has, and at most one −1 is inferred from
// dimensions that are not zero.
func (inf *inference) checkReshape(n *onnx.Node, x []int64) error {
	target, ok := inf.consts[n.Inputs[1]]
	if !ok {
		return nil // reshape says so
	}
	inferred, known := 0, int64(1)
	for i, d := range target {
		switch {
		case d < -1 || (d == 0 && i >= len(x)):
			return fmt.Errorf("%v to %v: dimension %d cannot be %d", x, target, i, d)
		case d == -1:
			inferred++
		case d == 0:
			known *= x[i]
		default:
			known *= d
		}
	}
	if inferred > 1 || (inferred == 1 && known == 0) {
		return fmt.Errorf("%v to %v: want at most one -1, beside dimensions that are not zero", x, target)
	}
	return nil
}

func isPermutation(perm []int64, n int) bool {
	if len(perm) != n {
		return false
	}
	seen := make([]bool, n)
	for _, p := range perm {
		if p < 0 || p >= int64(n) || seen[p] {
			return false
		}
		seen[p] = true
	}
	return true
}

// checkShape refuses an inferred shape with a negative dimension or more
// elements than an int64 counts.
func checkShape(v string, s []int64) error {
	n := int64(1)
	for _, d := range s {
		if d < 0 {
			return fmt.Errorf("value %s would have shape %v", v, s)
		}
		if d > 0 && n > math.MaxInt64/4/d {
			return fmt.Errorf("value %s of shape %v has too many elements to count in bytes", v, s)
		}
		n *= d
	}
	return nil
}
