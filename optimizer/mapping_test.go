package optimizer

import (
	"testing"

	"rulebook/onnx"
)

// TestMappedForms maps the forms real exports are made of onto registry
// operators (or keeps them opaque where no registry operator computes
// them), and checks that the model written back from the mapping computes
// what the original does.
func TestMappedForms(t *testing.T) {
	ints := func(name string, v ...int64) *onnx.Attribute {
		return &onnx.Attribute{Name: name, Type: onnx.AttrInts, Ints: v}
	}
	conv := func(w string, kernel []int64, pads ...int64) *onnx.Node {
		return &onnx.Node{Name: "conv", OpType: "Conv", Inputs: []string{"x", w}, Outputs: []string{"c"},
			Attributes: []*onnx.Attribute{ints("kernel_shape", kernel...), ints("pads", pads...)}}
	}
	scalar := func(name string, v float32) *onnx.Node {
		return &onnx.Node{Name: name, OpType: "Constant", Outputs: []string{name}, Attributes: []*onnx.Attribute{
			{Name: "value", Type: onnx.AttrTensor, T: &onnx.Tensor{DataType: onnx.Float, FloatData: []float32{v}}}}}
	}
	axes := func(name string, v int64) *onnx.Node {
		return &onnx.Node{Name: name, OpType: "Constant", Outputs: []string{name}, Attributes: []*onnx.Attribute{
			{Name: "value", Type: onnx.AttrTensor, T: &onnx.Tensor{DataType: onnx.Int64, Dims: []int64{1}, Int64Data: []int64{v}}}}}
	}
	bn := &onnx.Node{Name: "bn", OpType: "BatchNormalization", Inputs: []string{"c", "s", "b", "m", "v"}, Outputs: []string{"y"}}
	channels := map[string][]int{"w": {4, 3, 3, 3}, "s": {4}, "b": {4}, "m": {4}, "v": {4}}
	cases := []struct {
		name    string
		weights map[string][]int
		nodes   []*onnx.Node
		opaque  int
		// uncovered opaque nodes are of operators the registry lacks.
		uncovered int
	}{
		{"conv then batch norm", channels, []*onnx.Node{conv("w", []int64{3, 3}, 1, 1, 1, 1), bn}, 0, 0},
		{"batch norm of an input", map[string][]int{"s": {3}, "b": {3}, "m": {3}, "v": {3}},
			[]*onnx.Node{{Name: "bn", OpType: "BatchNormalization", Inputs: []string{"x", "s", "b", "m", "v"}, Outputs: []string{"y"}}}, 0, 0},
		{"1×7 kernel", map[string][]int{"w": {4, 3, 1, 7}}, []*onnx.Node{conv("w", []int64{1, 7}, 0, 3, 0, 3),
			{Name: "id", OpType: "Identity", Inputs: []string{"c"}, Outputs: []string{"y"}}}, 0, 0},
		{"7×1 kernel", map[string][]int{"w": {4, 3, 7, 1}}, []*onnx.Node{conv("w", []int64{7, 1}, 3, 0, 3, 0),
			{Name: "id", OpType: "Identity", Inputs: []string{"c"}, Outputs: []string{"y"}}}, 0, 0},
		{"Clip at zero is relu", nil, []*onnx.Node{scalar("lo", 0), {Name: "clip", OpType: "Clip", Inputs: []string{"x", "lo"}, Outputs: []string{"y"}}}, 0, 0},
		{"Clip(0, 6) is relu6, which the registry lacks", nil,
			[]*onnx.Node{scalar("lo", 0), scalar("hi", 6), {Name: "clip", OpType: "Clip", Inputs: []string{"x", "lo", "hi"}, Outputs: []string{"y"}}}, 1, 1},
		{"symmetric stride-2 pads", map[string][]int{"w": {4, 3, 3, 3}}, []*onnx.Node{
			{Name: "conv", OpType: "Conv", Inputs: []string{"x", "w"}, Outputs: []string{"y"},
				Attributes: []*onnx.Attribute{ints("kernel_shape", 3, 3), ints("strides", 2, 2), ints("pads", 1, 1, 1, 1)}}}, 0, 0},
		{"symmetric stride-2 max pool", nil, []*onnx.Node{
			{Name: "pool", OpType: "MaxPool", Inputs: []string{"x"}, Outputs: []string{"y"},
				Attributes: []*onnx.Attribute{ints("kernel_shape", 3, 3), ints("strides", 2, 2), ints("pads", 1, 1, 1, 1)}}}, 0, 0},
		{"a rank-5 weight stays with the opaque nodes that read it", map[string][]int{"w": {1, 1, 3, 8, 8}}, []*onnx.Node{axes("ax", 1),
			{Name: "up", OpType: "Unsqueeze", Inputs: []string{"x", "ax"}, Outputs: []string{"u"}},
			{Name: "add", OpType: "Add", Inputs: []string{"u", "w"}, Outputs: []string{"s"}},
			{Name: "down", OpType: "Squeeze", Inputs: []string{"s", "ax"}, Outputs: []string{"y"}}}, 3, 2},
		{"pads on one side only stay opaque", map[string][]int{"w": {4, 3, 3, 3}}, []*onnx.Node{
			{Name: "conv", OpType: "Conv", Inputs: []string{"x", "w"}, Outputs: []string{"y"},
				Attributes: []*onnx.Attribute{ints("kernel_shape", 3, 3), ints("strides", 2, 2), ints("pads", 2, 2, 0, 0)}}}, 1, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, rt := tinyModel(t, []int{1, 3, 8, 8}, c.weights, []string{"y"}, c.nodes...)
			g, err := FromONNX(m, rt)
			if err != nil {
				t.Fatal(err)
			}
			share := g.OpaqueShare()
			if share.Opaque != c.opaque || share.Uncovered != c.uncovered || share.Nodes != computing(c.nodes) {
				t.Fatalf("opaque share %+v, want %d opaque, %d uncovered of %d nodes (reasons %v)", share, c.opaque, c.uncovered, len(c.nodes), g.OpaqueReasons())
			}
			_, rt2 := written(t, g)
			assertSameOutputs(t, rt, rt2)
		})
	}
}

// computing counts the nodes that are not Constants.
func computing(nodes []*onnx.Node) int {
	n := 0
	for _, node := range nodes {
		if node.OpType != "Constant" {
			n++
		}
	}
	return n
}
