package runtime

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"rulebook/internal/budget"
	"rulebook/internal/testfiles"
	"rulebook/onnx"
)

// fuzzMaxGenerated bounds the elements of generated weights per fuzz input:
// a mutated header can claim terabytes of external weights, and filling
// them would exhaust memory without finding a bug.
const fuzzMaxGenerated = 1 << 22

// FuzzFromONNXBytes decodes and loads arbitrary bytes: errors are fine,
// panics are not.
func FuzzFromONNXBytes(f *testing.F) {
	f.Add(reluModel(13, 2, 3))
	f.Add(pbModel(13, pbGraph(
		[][]byte{
			pbNode("Conv", []string{"x", "w"}, []string{"c"}, pbAttrInts("pads", 1, 1, 1, 1), pbAttrInt("group", 1)),
			pbNode("Reshape", []string{"c", "shape"}, []string{"r"}),
			pbNode("Softmax", []string{"r"}, []string{"y"}),
		},
		[][]byte{pbFloatTensor("w", []int64{2, 1, 3, 3}, make([]float32, 18)), pbInt64Tensor("shape", []int64{2}, []int64{2, -1})},
		[][]byte{pbValueInfo("x", 1, 1, 4, 4)}, [][]byte{pbValueInfo("y")})))
	// Only constants: every node is folded at load, so kernels run too.
	f.Add(pipelineModel(true, nil))
	for _, seed := range []string{"squeezenet1_1.onnx"} {
		if b, err := os.ReadFile(filepath.Join(testfiles.SharedDir(), "models", seed)); err == nil {
			f.Add(b)
		}
	}
	if root, _ := testfiles.FindONNXNodeTests(); root != "" {
		for _, c := range []string{"test_constant_pad", "test_conv_with_strides_padding", "test_gemm_all_attributes", "test_mvn_expanded", "test_reshape_negative_dim", "test_split_variable_parts_2d"} {
			if b, err := os.ReadFile(filepath.Join(root, c, "model.onnx")); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := onnx.DecodeModel(b)
		if err != nil || generatedElements(m) > fuzzMaxGenerated {
			return
		}
		FromONNX(m, t.TempDir(), LoadOptions{Weights: WeightsRandom, Dims: map[string]int{"N": 1}, Memory: fuzzMemory(t)})
	})
}

// fuzzMaxInputElements bounds the graph inputs a run of FuzzRunModel
// fills: the test, not the runtime, allocates them.
const fuzzMaxInputElements = 1 << 20

// FuzzRunModel decodes, loads and runs a model once on random inputs, as
// 'rulebook run' does, with weights generated where the model's files are
// absent: under the memory cap of .ci/run, a size the model declares that
// the runtime allocates unchecked (ConstantOfShape, absent external
// weights, planned buffers) fails the run.
func FuzzRunModel(f *testing.F) {
	f.Add(reluModel(13, 2, 3))
	f.Add(pipelineModel(false, nil))
	// ConstantOfShape of a constant shape, into a product with a weight
	// whose external file is missing (so it is generated).
	f.Add(pbModel(13, pbGraph(
		[][]byte{
			pbNode("ConstantOfShape", []string{"shape"}, []string{"c"}),
			pbNode("MatMul", []string{"c", "w"}, []string{"m"}),
			pbNode("Add", []string{"m", "x"}, []string{"y"}),
		},
		[][]byte{pbInt64Tensor("shape", []int64{2}, []int64{2, 3}), pbExternalTensor("w", []int64{3, 4}, "w.bin", 0, 48)},
		[][]byte{pbValueInfo("x", "N", 4)}, [][]byte{pbValueInfo("y")})))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := onnx.DecodeModel(b)
		if err != nil {
			return
		}
		rt, _, err := FromONNX(m, t.TempDir(), LoadOptions{Dims: map[string]int{"N": 2}, Memory: fuzzMemory(t)})
		if err != nil {
			return
		}
		n := 0
		for _, in := range rt.Inputs() {
			n += elementsOf(in.Shape)
			if n > fuzzMaxInputElements || n < 0 {
				return
			}
		}
		s, err := rt.NewSession(SessionOptions{Threads: 1})
		if err != nil {
			return
		}
		outs, err := s.Run(context.Background(), rt.RandomInputs(1))
		if err != nil {
			return
		}
		for name, o := range outs {
			if len(o.Data) != elementsOf(o.Shape) {
				t.Fatalf("output %s of shape %v holds %d values", name, o.Shape, len(o.Data))
			}
		}
	})
}

// elementsOf is a shape's element count, -1 past 2^40.
func elementsOf(shape []int) int {
	n := 1
	for _, d := range shape {
		if d < 0 || (d > 0 && n > (1<<40)/d) {
			return -1
		}
		n *= d
	}
	return n
}

// generatedElements counts the elements that random weights would fill.
func generatedElements(m *onnx.Model) int64 {
	if m.Graph == nil {
		return 0
	}
	total := int64(0)
	for _, t := range m.Graph.Initializers {
		if t.DataLocation != onnx.LocationExternal {
			continue
		}
		n, err := t.NumElements()
		if err != nil {
			continue // rejected at load
		}
		total += int64(n)
	}
	return total
}

// pipelineModel chains several operators over x [1 2 6 6]: with constX, x
// is an initializer (holding xData, zeros if nil) and the whole graph folds
// at load; otherwise x is a graph input.
func pipelineModel(constX bool, xData []float32) []byte {
	if xData == nil {
		xData = make([]float32, 72)
	}
	inits := [][]byte{
		pbFloatTensor("w", []int64{3, 2, 2, 2}, []float32{1, -2, 3, 0.5, -1, 2, 0.25, 1, 2, 1, -1, 0, 3, -0.5, 1, 1, -2, 0, 1, 2, 0.5, 1, -1, 1}),
		pbInt64Tensor("pads", []int64{8}, []int64{0, 0, 1, 1, 0, 0, 1, 0}),
	}
	var inputs [][]byte
	if constX {
		inits = append(inits, pbFloatTensor("x", []int64{1, 2, 6, 6}, xData))
	} else {
		inputs = [][]byte{pbValueInfo("x", 1, 2, 6, 6)}
	}
	return pbModel(13, pbGraph(
		[][]byte{
			pbNode("Conv", []string{"x", "w"}, []string{"c"}, pbAttrInts("strides", 2, 1), pbAttrInts("dilations", 1, 2)),
			pbNode("Pad", []string{"c", "pads"}, []string{"p"}, pbAttrString("mode", "reflect")),
			pbNode("MaxPool", []string{"p"}, []string{"m"}, pbAttrInts("kernel_shape", 2, 2), pbAttrInt("ceil_mode", 1)),
			pbNode("Transpose", []string{"m"}, []string{"t"}, pbAttrInts("perm", 0, 3, 2, 1)),
			pbNode("Split", []string{"t"}, []string{"s1", "s2"}, pbAttrInt("axis", 1)),
			pbNode("Concat", []string{"s2", "s1"}, []string{"k"}, pbAttrInt("axis", -1)),
			pbNode("Softmax", []string{"k"}, []string{"q"}, pbAttrInt("axis", 2)),
			pbNode("ReduceMean", []string{"q"}, []string{"y"}, pbAttrInts("axes", 1)),
		},
		inits, inputs, [][]byte{pbValueInfo("y")}))
}

// fuzzMemory is the memory budget of a fuzzed model: well below the
// address-space cap .ci/run runs fuzz targets under, so that a size the
// budget allows cannot crash the run.
func fuzzMemory(t *testing.T) budget.Budget {
	b, err := budget.Parse("512MiB")
	if err != nil {
		t.Fatal(err)
	}
	return b
}
