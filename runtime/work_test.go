package runtime_test

import (
	"fmt"
	"slices"
	"testing"

	"rulebook/onnx"
	"rulebook/rules"
	"rulebook/runtime"
)

func ints(name string, v ...int64) *onnx.Attribute {
	return &onnx.Attribute{Name: name, Type: onnx.AttrInts, Ints: v}
}

func integer(name string, v int64) *onnx.Attribute {
	return &onnx.Attribute{Name: name, Type: onnx.AttrInt, I: v}
}

// TestNodeWorkAgreesWithRegistry holds the ONNX count and the registry's
// cost fact together on the nodes that map onto registry operators: the
// optimizer prices the mapped graph with one, the planner the ONNX graph
// with the other.
func TestNodeWorkAgreesWithRegistry(t *testing.T) {
	for _, c := range []struct {
		name   string
		node   *onnx.Node
		in     [][]int64
		out    []int64
		op     string
		params []int
	}{
		{"Conv", &onnx.Node{OpType: "Conv", Attributes: []*onnx.Attribute{ints("kernel_shape", 3, 3), ints("pads", 1, 1, 1, 1)}},
			[][]int64{{1, 8, 10, 10}, {16, 8, 3, 3}}, []int64{1, 16, 10, 10},
			rules.NameConv2D, rules.ConvAttrs{Stride: 1, Padding: rules.PadSame, Groups: 1}.Params()},
		{"grouped Conv", &onnx.Node{OpType: "Conv", Attributes: []*onnx.Attribute{ints("kernel_shape", 3, 3), ints("strides", 2, 2), ints("pads", 1, 1, 1, 1), integer("group", 4)}},
			[][]int64{{2, 8, 9, 9}, {8, 2, 3, 3}}, []int64{2, 8, 5, 5},
			rules.NameConv2D, rules.ConvAttrs{Stride: 2, Padding: rules.PadSym, Groups: 4}.Params()},
		{"MatMul", &onnx.Node{OpType: "MatMul"},
			[][]int64{{2, 6, 5}, {2, 5, 7}}, []int64{2, 6, 7}, rules.NameMatmul, nil},
		{"Gemm", &onnx.Node{OpType: "Gemm"},
			[][]int64{{6, 5}, {5, 7}}, []int64{6, 7}, rules.NameMatmul, nil},
		{"MaxPool", &onnx.Node{OpType: "MaxPool", Attributes: []*onnx.Attribute{ints("kernel_shape", 3, 3), ints("strides", 2, 2), ints("pads", 1, 1, 1, 1)}},
			[][]int64{{1, 4, 9, 9}}, []int64{1, 4, 5, 5},
			rules.NamePoolMax, rules.WindowAttrs{Kernel: 3, Stride: 2, Padding: rules.PadSym}.Params()},
		{"AveragePool", &onnx.Node{OpType: "AveragePool", Attributes: []*onnx.Attribute{ints("kernel_shape", 2, 2), ints("strides", 2, 2)}},
			[][]int64{{1, 4, 8, 8}}, []int64{1, 4, 4, 4},
			rules.NamePoolAvg, rules.WindowAttrs{Kernel: 2, Stride: 2, Padding: rules.PadValid}.Params()},
		{"Add", &onnx.Node{OpType: "Add"},
			[][]int64{{2, 3, 4, 5}, {2, 3, 4, 5}}, []int64{2, 3, 4, 5}, rules.NameEwadd, nil},
		{"Relu", &onnx.Node{OpType: "Relu"},
			[][]int64{{2, 3, 4, 5}}, []int64{2, 3, 4, 5}, rules.NameRelu, nil},
		{"Concat", &onnx.Node{OpType: "Concat", Attributes: []*onnx.Attribute{integer("axis", 1)}},
			[][]int64{{1, 2, 3, 3}, {1, 4, 3, 3}}, []int64{1, 6, 3, 3},
			rules.NameConcat, rules.AxisAttrs{Axis: 1}.Params()},
	} {
		t.Run(c.name, func(t *testing.T) {
			op, ok := rules.All().Lookup(c.op)
			if !ok {
				t.Fatalf("the registry has no %s", c.op)
			}
			in := make([]rules.Shape, len(c.in))
			for i, s := range c.in {
				c.node.Inputs = append(c.node.Inputs, fmt.Sprint("x", i))
				in[i] = rules.NewShape(dims(s)...)
			}
			c.node.Outputs = []string{"y"}
			out, err := op.Shape(c.params, in)
			if err != nil {
				t.Fatal(err)
			}
			if got := out[0].DimList(); !slices.Equal(got, dims(c.out)) {
				t.Fatalf("the registry's %s gives shape %v, the ONNX node %v", c.op, got, c.out)
			}
			want := op.Work(c.params, in, out)
			got := runtime.NodeWork(c.node, c.in, [][]int64{c.out})
			if got.FLOPs != want.FLOPs || got.Bytes != want.Bytes {
				t.Errorf("ONNX count %+v, registry %+v", got, want)
			}
			if got.FLOPs == 0 || got.Bytes == 0 {
				t.Errorf("ONNX count %+v counts nothing", got)
			}
		})
	}
}

func dims(s []int64) []int {
	out := make([]int, len(s))
	for i, d := range s {
		out[i] = int(d)
	}
	return out
}

// TestNodeWork checks the count on operators the registry lacks.
func TestNodeWork(t *testing.T) {
	for _, c := range []struct {
		name string
		node *onnx.Node
		in   [][]int64
		out  [][]int64
		want rules.Work
	}{
		{"a view costs nothing", &onnx.Node{OpType: "Reshape", Inputs: []string{"x", "s"}, Outputs: []string{"y"}},
			[][]int64{{4, 6}, {2}}, [][]int64{{24}}, rules.Work{}},
		{"Gemm transposed", &onnx.Node{OpType: "Gemm", Inputs: []string{"a", "b", "c"}, Outputs: []string{"y"},
			Attributes: []*onnx.Attribute{integer("transA", 1), integer("transB", 1)}},
			[][]int64{{5, 6}, {7, 5}, {7}}, [][]int64{{6, 7}}, rules.Work{FLOPs: 2 * 42 * 5, Bytes: 4 * (30 + 35 + 7 + 42)}},
		{"an omitted input is not read", &onnx.Node{OpType: "Conv", Inputs: []string{"x", "w", ""}, Outputs: []string{"y"}},
			[][]int64{{1, 2, 3, 3}, {4, 2, 1, 1}, nil}, [][]int64{{1, 4, 3, 3}}, rules.Work{FLOPs: 2 * 36 * 2, Bytes: 4 * (18 + 8 + 36)}},
		{"Softmax reads its input five times", &onnx.Node{OpType: "Softmax", Inputs: []string{"x"}, Outputs: []string{"y"}},
			[][]int64{{3, 10}}, [][]int64{{3, 10}}, rules.Work{FLOPs: 150, Bytes: 4 * 60}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := runtime.NodeWork(c.node, c.in, c.out); got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}
