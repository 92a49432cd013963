package runtime

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"rulebook/onnx"
)

// An input file must hold the model input's type (issue 25: run --input
// turned INT64 and DOUBLE tensors into float without a word): FLOAT is
// read, INT64 and DOUBLE are refused with ErrInputType.
func TestReadInputsRefusesOtherTypes(t *testing.T) {
	x := &onnx.ValueInfo{Name: "x", IsTensor: true, ElemType: onnx.Float, HasShape: true,
		Shape: []onnx.Dim{{Value: 2, HasValue: true}, {Value: 2, HasValue: true}}}
	y := &onnx.ValueInfo{Name: "y", IsTensor: true, ElemType: onnx.Float}
	g := &onnx.Graph{Name: "relu", Inputs: []*onnx.ValueInfo{x}, Outputs: []*onnx.ValueInfo{y},
		Nodes: []*onnx.Node{{Name: "r", OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"y"}}}}
	m, _, err := FromONNX(&onnx.Model{IRVersion: 8, OpsetImports: []onnx.OperatorSetID{{Version: 13}}, Graph: g}, "", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dims := []int64{2, 2}
	cases := []struct {
		name    string
		tensor  *onnx.Tensor
		refused bool
	}{
		{"float", &onnx.Tensor{Dims: dims, DataType: onnx.Float, FloatData: []float32{1, -2, 3, -4}}, false},
		{"int64", &onnx.Tensor{Dims: dims, DataType: onnx.Int64, Int64Data: []int64{1, -2, 1 << 40, -4}}, true},
		{"double", &onnx.Tensor{Dims: dims, DataType: onnx.Double, DoubleData: []float64{1, -2, 1e-300, -4}}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "input_0.pb")
			if err := os.WriteFile(path, onnx.EncodeTensor(c.tensor), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := m.ReadInputs([]string{path})
			if refused := errors.Is(err, ErrInputType); refused != c.refused || !c.refused && err != nil {
				t.Errorf("err %v, want refused %v", err, c.refused)
			}
		})
	}
}
