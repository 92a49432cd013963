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
