package training

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"rulebook/internal/testfiles"
	"rulebook/onnx"
)

// nodeTestSeeds are ONNX node tests of operators the inference knows.
var nodeTestSeeds = []string{"test_conv_with_strides_padding", "test_reshape_negative_dim", "test_reshape_zero_dim",
	"test_concat_3d_axis_1", "test_gemm_all_attributes", "test_matmul_2d", "test_maxpool_2d_pads",
	"test_averagepool_2d_strides", "test_globalaveragepool", "test_transpose_default", "test_flatten_axis0",
	"test_gather_0", "test_reduce_mean_default_axes_keepdims_example", "test_constant_pad",
	"test_layer_normalization_2d_axis0", "test_where_example"}

// FuzzTrainingFromONNX decodes a model and infers its training step's shapes and
// work, as 'rulebook plan' does: a model is refused or gives shapes of no
// negative extent and work that is finite and not negative.
func FuzzTrainingFromONNX(f *testing.F) {
	for _, m := range []*onnx.Model{
		MLP(MLPConfig{Layers: 2, Width: 8}),
		Transformer(TransformerConfig{Layers: 1, Hidden: 8, Heads: 2, FFN: 16, Seq: 4}),
		DLRM(DLRMConfig{Dense: 3, Bottom: []int64{4, 2}, Top: []int64{4, 1}, Tables: 2, Rows: 10, Dim: 2}),
	} {
		f.Add(onnx.EncodeModel(m), uint16(8))
	}
	if root, _ := testfiles.FindONNXNodeTests(); root != "" {
		for _, c := range nodeTestSeeds {
			if b, err := os.ReadFile(filepath.Join(root, c, "model.onnx")); err == nil {
				f.Add(b, uint16(2))
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, batch uint16) {
		m, err := onnx.DecodeModel(b)
		if err != nil {
			return
		}
		g, err := FromONNX(m, "fuzz", int64(batch))
		if err != nil {
			return
		}
		checkGraph(t, g)
	})
}

// checkGraph holds what an inferred graph promises a planner.
func checkGraph(t *testing.T, g *Graph) {
	for _, op := range g.Ops {
		for _, v := range op.Outputs {
			for _, d := range g.ValueShape(v) {
				if d < 0 {
					t.Fatalf("%s (%s): output %s has shape %v", op.Name, op.Type, v, g.ValueShape(v))
				}
			}
		}
		for _, x := range []float64{op.Forward.FLOPs, op.Forward.Bytes, op.Backward.FLOPs, op.Backward.Bytes,
			op.ParamBytes, op.ActivationBytes, op.OutputBytes} {
			if x < 0 || math.IsNaN(x) || math.IsInf(x, 0) {
				t.Fatalf("%s (%s): work %+v %+v, params %g, saved %g, output %g bytes", op.Name, op.Type,
					op.Forward, op.Backward, op.ParamBytes, op.ActivationBytes, op.OutputBytes)
			}
		}
		if p := op.Product; p != nil && (p.M < 0 || p.K < 0 || p.N < 0) {
			t.Fatalf("%s (%s): product %+v", op.Name, op.Type, *p)
		}
	}
}

// TestBadNodes: nodes the inference cannot read are refused with an error,
// and a Conv by no kernels gives no product, where they crashed the planner (found by FuzzTrainingFromONNX, and the
// issue's Conv, Reshape and Concat).
func TestBadNodes(t *testing.T) {
	ints := func(name string, v ...int64) *onnx.Attribute {
		return &onnx.Attribute{Name: name, Type: onnx.AttrInts, Ints: v}
	}
	one := func(name string, v int64) *onnx.Attribute {
		return &onnx.Attribute{Name: name, Type: onnx.AttrInt, I: v}
	}
	kernel := &onnx.Tensor{Name: "w", Dims: []int64{4, 3, 3, 3}, DataType: onnx.Float, FloatData: make([]float32, 108)}
	empty := &onnx.Tensor{Name: "w", Dims: []int64{0, 3, 3, 3}, DataType: onnx.Float}
	shape := func(v ...int64) *onnx.Tensor {
		return &onnx.Tensor{Name: "s", Dims: []int64{int64(len(v))}, DataType: onnx.Int64, Int64Data: v}
	}
	cases := []struct {
		name  string
		node  *onnx.Node
		inits []*onnx.Tensor
		ok    bool // a valid node, which crashed the planner all the same
	}{
		{"Flatten without inputs", &onnx.Node{OpType: "Flatten", Outputs: []string{"y"}}, nil, false},
		{"Concat without inputs", &onnx.Node{OpType: "Concat", Outputs: []string{"y"}}, nil, false},
		{"Relu without outputs", &onnx.Node{OpType: "Relu", Inputs: []string{"x"}}, nil, false},
		{"Flatten at axis 89", &onnx.Node{OpType: "Flatten", Inputs: []string{"x"}, Outputs: []string{"y"}, Attributes: []*onnx.Attribute{one("axis", 89)}}, nil, false},
		{"AveragePool of a vector", &onnx.Node{OpType: "AveragePool", Inputs: []string{"v"}, Outputs: []string{"y"}, Attributes: []*onnx.Attribute{ints("kernel_shape", 2)}}, nil, false},
		{"AveragePool without kernel_shape", &onnx.Node{OpType: "AveragePool", Inputs: []string{"x"}, Outputs: []string{"y"}}, nil, false},
		{"AveragePool kernel past the input", &onnx.Node{OpType: "AveragePool", Inputs: []string{"x"}, Outputs: []string{"y"}, Attributes: []*onnx.Attribute{ints("kernel_shape", 20, 20)}}, nil, false},
		{"Conv strides 0", &onnx.Node{OpType: "Conv", Inputs: []string{"x", "w"}, Outputs: []string{"y"}, Attributes: []*onnx.Attribute{ints("strides", 0, 0)}}, []*onnx.Tensor{kernel}, false},
		{"Conv pads of rank 1", &onnx.Node{OpType: "Conv", Inputs: []string{"x", "w"}, Outputs: []string{"y"}, Attributes: []*onnx.Attribute{ints("pads", 1, 1)}}, []*onnx.Tensor{kernel}, false},
		{"Conv by no kernels", &onnx.Node{OpType: "Conv", Inputs: []string{"x", "w"}, Outputs: []string{"y"}}, []*onnx.Tensor{empty}, true},
		{"Reshape to [-1 -1 0]", &onnx.Node{OpType: "Reshape", Inputs: []string{"x", "s"}, Outputs: []string{"y"}}, []*onnx.Tensor{shape(-1, -1, 0)}, false},
		{"Reshape to [0 0 0 0 0]", &onnx.Node{OpType: "Reshape", Inputs: []string{"x", "s"}, Outputs: []string{"y"}}, []*onnx.Tensor{shape(0, 0, 0, 0, 0)}, false},
		{"Reshape to [2 0 -1] of a zero", &onnx.Node{OpType: "Reshape", Inputs: []string{"z", "s"}, Outputs: []string{"y"}}, []*onnx.Tensor{shape(2, 0, -1)}, false},
		{"Concat on axis 7", &onnx.Node{OpType: "Concat", Inputs: []string{"x", "x"}, Outputs: []string{"y"}, Attributes: []*onnx.Attribute{one("axis", 7)}}, nil, false},
		{"Concat of other ranks", &onnx.Node{OpType: "Concat", Inputs: []string{"x", "v"}, Outputs: []string{"y"}, Attributes: []*onnx.Attribute{one("axis", 0)}}, nil, false},
		{"Gather on axis 5", &onnx.Node{OpType: "Gather", Inputs: []string{"x", "v"}, Outputs: []string{"y"}, Attributes: []*onnx.Attribute{one("axis", 5)}}, nil, false},
		{"Transpose by [0 0 1 2]", &onnx.Node{OpType: "Transpose", Inputs: []string{"x"}, Outputs: []string{"y"}, Attributes: []*onnx.Attribute{ints("perm", 0, 0, 1, 2)}}, nil, false},
		{"Gemm of vectors", &onnx.Node{OpType: "Gemm", Inputs: []string{"v", "v"}, Outputs: []string{"y"}}, nil, false},
		{"MatMul of one input", &onnx.Node{OpType: "MatMul", Inputs: []string{"x"}, Outputs: []string{"y"}}, nil, false},
	}
	dims := func(v ...int64) []onnx.Dim {
		var out []onnx.Dim
		for _, d := range v {
			out = append(out, onnx.Dim{Value: d, HasValue: true})
		}
		return out
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := &onnx.Model{Graph: &onnx.Graph{Nodes: []*onnx.Node{c.node}, Initializers: c.inits,
				Inputs: []*onnx.ValueInfo{
					{Name: "x", IsTensor: true, ElemType: onnx.Float, HasShape: true, Shape: dims(1, 3, 8, 8)},
					{Name: "v", IsTensor: true, ElemType: onnx.Float, HasShape: true, Shape: dims(8)},
					{Name: "z", IsTensor: true, ElemType: onnx.Float, HasShape: true, Shape: dims(2, 0, 4)},
				}}}
			g, err := FromONNX(m, "bad", 2)
			if c.ok && err != nil {
				t.Errorf("refused: %v", err)
			}
			if !c.ok && err == nil {
				t.Errorf("accepted: %+v", g.Ops)
			}
		})
	}
}
