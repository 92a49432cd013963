package optimizer_test

import (
	"context"
	"fmt"

	"rulebook/onnx"
	"rulebook/optimizer"
	"rulebook/rules"
	"rulebook/runtime"
	"rulebook/version"
)

// Optimize rewrites a model with a rule set. Here the model multiplies its
// input by two weight matrices and adds the products; one proved rule
// (distributivity, found with a 2×4 activation and 4×4 weights) turns that
// into one product by the sum of the weights, which writing the model folds
// into a single weight.
func ExampleOptimize() {
	m := &onnx.Model{IRVersion: 8, OpsetImports: []onnx.OperatorSetID{{Version: 13}}, Graph: &onnx.Graph{
		Name:   "two-products",
		Inputs: []*onnx.ValueInfo{floatInfo("x", 8, 16)},
		Initializers: []*onnx.Tensor{
			weight("w1", 16, 16), weight("w2", 16, 16),
		},
		Nodes: []*onnx.Node{
			{Name: "p1", OpType: "MatMul", Inputs: []string{"x", "w1"}, Outputs: []string{"p1"}},
			{Name: "p2", OpType: "MatMul", Inputs: []string{"x", "w2"}, Outputs: []string{"p2"}},
			{Name: "sum", OpType: "Add", Inputs: []string{"p1", "p2"}, Outputs: []string{"y"}},
		},
		Outputs: []*onnx.ValueInfo{floatInfo("y", 8, 16)},
	}}
	rt, _, err := runtime.FromONNX(m, "", runtime.LoadOptions{Weights: runtime.WeightsFile})
	if err != nil {
		fmt.Println(err)
		return
	}
	g, err := optimizer.FromONNX(m, rt)
	if err != nil {
		fmt.Println(err)
		return
	}

	// A released version comes from LoadVersion or LoadBundle; one rule
	// with the shapes it was found with stands in for it here.
	text, err := rules.ParseText(rules.Default(),
		"(ewadd (matmul ?a ?b) (matmul ?a ?c)) => (matmul ?a (ewadd ?b ?c))", "?a:2x4 ?b:4x4 ?c:4x4", "")
	if err != nil {
		fmt.Println(err)
		return
	}
	rs := &version.Set{Tag: "example", Rules: []*rules.Rule{text.Rule()}, Texts: []string{text.String()}}

	res, err := optimizer.Optimize(context.Background(), g, rs, optimizer.DefaultOptions())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("cost %.4f ms -> %.4f ms, stopped: %s\n", res.Before, res.After, res.Stopped)
	for i, text := range rs.Texts {
		if n := res.Applied[i]; n > 0 {
			fmt.Printf("applied %d×: %s\n", n, text)
		}
	}
	out, err := res.Graph.ToONNX()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, n := range out.Graph.Nodes {
		fmt.Println(n.OpType, n.Inputs, "->", n.Outputs)
	}
	// Output:
	// cost 0.0093 ms -> 0.0031 ms, stopped: queue empty
	// applied 1×: (ewadd (matmul ?a ?b) (matmul ?a ?c)) => (matmul ?a (ewadd ?b ?c))
	// MatMul [x rb.fold.0.0] -> [y]
}

func floatInfo(name string, dims ...int64) *onnx.ValueInfo {
	shape := make([]onnx.Dim, len(dims))
	for i, d := range dims {
		shape[i] = onnx.Dim{Value: d, HasValue: true}
	}
	return &onnx.ValueInfo{Name: name, IsTensor: true, ElemType: onnx.Float, HasShape: true, Shape: shape}
}

// weight is a rows×cols matrix with values in [0, 1).
func weight(name string, rows, cols int64) *onnx.Tensor {
	data := make([]float32, rows*cols)
	for i := range data {
		data[i] = float32(i%7) / 7
	}
	return &onnx.Tensor{Name: name, Dims: []int64{rows, cols}, DataType: onnx.Float, FloatData: data}
}
