package runtime

import (
	"slices"
	"testing"

	"rulebook/onnx"
)

// TestShapeMath folds the shape checks exporters write (vision
// transformers assert that an image divides into patches) exactly on
// integers, and refuses them over values computed at run time, naming
// the node.
func TestShapeMath(t *testing.T) {
	ints := func(name string, v ...int64) *onnx.Tensor {
		return &onnx.Tensor{Name: name, Dims: []int64{int64(len(v))}, DataType: onnx.Int64, Int64Data: v}
	}
	attr := func(name string, v int64) *onnx.Attribute {
		return &onnx.Attribute{Name: name, Type: onnx.AttrInt, I: v}
	}
	node := func(op string, in []string, out string, attrs ...*onnx.Attribute) *onnx.Node {
		return &onnx.Node{Name: op, OpType: op, Inputs: in, Outputs: []string{out}, Attributes: attrs}
	}
	g := &onnx.Graph{
		Initializers: []*onnx.Tensor{ints("side", 224, -7), ints("patch", 16, 2), ints("shape", 2, 3),
			{Name: "zero", DataType: onnx.Int64, Int64Data: []int64{0}}, {Name: "five", DataType: onnx.Int64, Int64Data: []int64{5}},
			{Name: "two", DataType: onnx.Int64, Int64Data: []int64{2}}, {Name: "at", Dims: []int64{2, 1}, DataType: onnx.Int64, Int64Data: []int64{2, 0}}},
		Nodes: []*onnx.Node{
			node("Mod", []string{"side", "patch"}, "rest"),
			node("Equal", []string{"rest", "side"}, "same"),
			node("ConstantOfShape", []string{"shape"}, "ones", &onnx.Attribute{Name: "value", Type: onnx.AttrTensor, T: ints("", 1)}),
			node("Where", []string{"same", "patch", "rest"}, "pick"),
			node("Cast", []string{"pick"}, "y", attr("to", int64(onnx.Float))),
			node("Cast", []string{"x"}, "z", attr("to", int64(onnx.Float))),
			node("Range", []string{"zero", "five", "two"}, "evens"),
			node("ScatterND", []string{"evens", "at", "patch"}, "scattered"),
			node("Not", []string{"same"}, "differ"),
		},
		Inputs: []*onnx.ValueInfo{{Name: "x", IsTensor: true, ElemType: onnx.Float, HasShape: true, Shape: []onnx.Dim{{Value: 2, HasValue: true}}}},
		Outputs: []*onnx.ValueInfo{{Name: "y", IsTensor: true, ElemType: onnx.Float}, {Name: "ones", IsTensor: true, ElemType: onnx.Int64}, {Name: "z", IsTensor: true, ElemType: onnx.Float},
			{Name: "scattered", IsTensor: true, ElemType: onnx.Int64}, {Name: "differ", IsTensor: true, ElemType: onnx.Bool}},
	}
	m, _, err := FromONNX(&onnx.Model{IRVersion: 8, OpsetImports: []onnx.OperatorSetID{{Version: 17}}, Graph: g}, "", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Mod(224, 16) = 0, Mod(-7, 2) = 1 (the divisor's sign); Equal with
	// side is false twice; Where picks rest.
	if v := m.values[m.outputs[0]]; !slices.Equal(v.konst.Data, []float32{0, 1}) || v.ints != nil {
		t.Errorf("y = %v (ints %v), want float [0 1]", v.konst.Data, v.ints)
	}
	if v := m.values[m.outputs[1]]; !slices.Equal(v.ints, []int64{1, 1, 1, 1, 1, 1}) || !slices.Equal(v.shape, []int{2, 3}) {
		t.Errorf("ones = %v %v", v.ints, v.shape)
	}
	// Range(0, 5, 2) = [0 2 4]; ScatterND writes 16 at 2 and 2 at 0.
	if v := m.values[m.outputs[3]]; !slices.Equal(v.ints, []int64{2, 2, 16}) {
		t.Errorf("scattered = %v, want [2 2 16]", v.ints)
	}
	if v := m.values[m.outputs[4]]; !slices.Equal(v.ints, []int64{1, 1}) {
		t.Errorf("differ = %v, want [1 1]", v.ints)
	}
	g.Nodes = append(g.Nodes, node("Equal", []string{"x", "x"}, "bad"))
	g.Outputs = append(g.Outputs, &onnx.ValueInfo{Name: "bad", IsTensor: true, ElemType: onnx.Bool})
	_, _, err = FromONNX(&onnx.Model{IRVersion: 8, OpsetImports: []onnx.OperatorSetID{{Version: 17}}, Graph: g}, "", LoadOptions{})
	if err == nil || err.Error() != `runtime: node 9 (Equal "Equal"): input 0 ("x") is computed at run time; the runtime folds Equal only over constants (shape arithmetic)` {
		t.Errorf("Equal over an input: %v", err)
	}
}
