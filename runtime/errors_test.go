package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rulebook/internal/testfiles"
	"rulebook/onnx"
)

// wantErr fails unless err is non-nil and contains every fragment.
func wantErr(t *testing.T, err error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", fragments)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not contain %q", err, f)
		}
	}
}

// TestTruncatedModel cuts resnet50.onnx at several offsets: the error names
// the file and the byte offset where decoding failed.
func TestTruncatedModel(t *testing.T) {
	data, err := os.ReadFile(sharedModel(t, "resnet50.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, cut := range []int{1, 100, 1000, len(data) / 2, len(data) - 3} {
		path := filepath.Join(dir, "cut.onnx")
		if err := os.WriteFile(path, data[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := Load(path, LoadOptions{})
		wantErr(t, err, path, "byte")
	}
}

// fromBytes decodes and loads a hand-built model.
func fromBytes(b []byte, opt LoadOptions) (*Model, *LoadReport, error) {
	m, err := onnx.DecodeModel(b)
	if err != nil {
		return nil, nil, err
	}
	return FromONNX(m, "", opt)
}

// reluModel is y = Relu(x) for x of the given dims.
func reluModel(opset int64, dims ...any) []byte {
	return pbModel(opset, pbGraph(
		[][]byte{pbNode("Relu", []string{"x"}, []string{"y"})}, nil,
		[][]byte{pbValueInfo("x", dims...)}, [][]byte{pbValueInfo("y")}))
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name      string
		model     []byte
		opt       LoadOptions
		fragments []string
	}{
		{"unsupported operators, all listed with counts",
			pbModel(13, pbGraph([][]byte{
				pbNode("LRN", []string{"x"}, []string{"a"}),
				pbNode("FooBar", []string{"a"}, []string{"b"}),
				pbNode("FooBar", []string{"b"}, []string{"y"}),
			}, nil, [][]byte{pbValueInfo("x", 1, 2)}, [][]byte{pbValueInfo("y")})),
			LoadOptions{}, []string{"3 nodes", "FooBar ×2", "LRN ×1"}},
		{"opset below the range", reluModel(6, 2), LoadOptions{}, []string{"opset 6", "7..21"}},
		{"opset above the range", reluModel(22, 2), LoadOptions{}, []string{"opset 22", "7..21"}},
		{"missing initializer",
			pbModel(13, pbGraph([][]byte{pbNode("Conv", []string{"x", "conv.weight"}, []string{"y"})}, nil,
				[][]byte{pbValueInfo("x", 1, 1, 4, 4)}, [][]byte{pbValueInfo("y")})),
			LoadOptions{}, []string{`"conv.weight"`, "Conv"}},
		{"symbolic dimensions without values",
			reluModel(13, "batch", 3, "seq"), LoadOptions{Dims: map[string]int{"other": 1}},
			[]string{`"batch"`, `"seq"`, "LoadOptions.Dims"}},
		{"shape mismatch between operands",
			pbModel(13, pbGraph([][]byte{pbNode("Add", []string{"x", "z"}, []string{"y"})}, nil,
				[][]byte{pbValueInfo("x", 2, 3), pbValueInfo("z", 4)}, [][]byte{pbValueInfo("y")})),
			LoadOptions{}, []string{"Add", "[2 3]", "[4]", "broadcast"}},
		{"reshape to a shape computed at run time",
			pbModel(13, pbGraph([][]byte{pbNode("Reshape", []string{"x", "x"}, []string{"y"})}, nil,
				[][]byte{pbValueInfo("x", 2)}, [][]byte{pbValueInfo("y")})),
			LoadOptions{}, []string{"Reshape", "must be a constant"}},
		{"declared output shape differs",
			pbModel(13, pbGraph([][]byte{pbNode("Relu", []string{"x"}, []string{"y"})}, nil,
				[][]byte{pbValueInfo("x", 2, 3)}, [][]byte{pbValueInfo("y", 3, 2)})),
			LoadOptions{}, []string{`output "y"`, "[2 3]", "[3 2]"}},
		{"cycle",
			pbModel(13, pbGraph([][]byte{
				pbNode("Relu", []string{"b"}, []string{"a"}),
				pbNode("Relu", []string{"a"}, []string{"b"}),
			}, nil, nil, [][]byte{pbValueInfo("b")})),
			LoadOptions{}, []string{"cycle"}},
		{"bad weights mode", reluModel(13, 2), LoadOptions{Weights: "sometimes"}, []string{`"sometimes"`}},
		{"conv channels do not match",
			pbModel(13, pbGraph([][]byte{pbNode("Conv", []string{"x", "w"}, []string{"y"}, pbAttrInt("group", 2))},
				[][]byte{pbFloatTensor("w", []int64{4, 3, 1, 1}, make([]float32, 12))},
				[][]byte{pbValueInfo("x", 1, 4, 5, 5)}, [][]byte{pbValueInfo("y")})),
			LoadOptions{}, []string{"Conv", "group 2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := fromBytes(tc.model, tc.opt)
			wantErr(t, err, tc.fragments...)
			t.Log(err)
		})
	}
}

// TestUnsupportedOperatorFromTestData loads ONNX's LRN node test, an
// operator the runtime lacks.
func TestUnsupportedOperatorFromTestData(t *testing.T) {
	root := testfiles.ONNXNodeTests(t)
	path := filepath.Join(root, "test_lrn", "model.onnx")
	_, _, err := Load(path, LoadOptions{})
	wantErr(t, err, path, "LRN ×1")
}

func TestSymbolicDims(t *testing.T) {
	m, _, err := fromBytes(reluModel(13, "batch", 3), LoadOptions{Dims: map[string]int{"batch": 2}})
	if err != nil {
		t.Fatal(err)
	}
	if in := m.Inputs(); len(in) != 1 || in[0].Shape[0] != 2 || in[0].Shape[1] != 3 {
		t.Fatalf("inputs %v, want x [2 3]", in)
	}
}

func TestRunErrors(t *testing.T) {
	m, _, err := fromBytes(reluModel(13, 2, 3), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.NewSession(SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tests := []struct {
		name      string
		inputs    map[string]*Tensor
		fragments []string
	}{
		{"wrong shape", map[string]*Tensor{"x": NewTensor(3, 2)}, []string{`"x"`, "[3 2]", "[2 3]"}},
		{"missing", map[string]*Tensor{}, []string{`"x"`, "missing"}},
		{"unknown", map[string]*Tensor{"x": NewTensor(2, 3), "q": NewTensor(1)}, []string{`"q"`, `"x"`}},
		{"short data", map[string]*Tensor{"x": {Shape: []int{2, 3}, Data: make([]float32, 5)}}, []string{`"x"`, "6 elements", "5"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Run(ctx, tc.inputs)
			wantErr(t, err, tc.fragments...)
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := s.Run(cctx, map[string]*Tensor{"x": NewTensor(2, 3)})
		wantErr(t, err, "canceled")
	})
	t.Run("TimeNode out of range", func(t *testing.T) {
		_, err := s.TimeNode(ctx, 5, 1)
		wantErr(t, err, "node 5")
	})
}

// TestMissingInitializerInRealModel drops one initializer from
// squeezenet1_1-full: the error names it.
func TestMissingInitializerInRealModel(t *testing.T) {
	m, err := onnx.ReadModel(sharedModel(t, "squeezenet1_1-full.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	dropped := m.Graph.Initializers[3].Name
	m.Graph.Initializers = append(m.Graph.Initializers[:3:3], m.Graph.Initializers[4:]...)
	_, _, err = FromONNX(m, "", LoadOptions{})
	wantErr(t, err, `"`+dropped+`"`, "not a graph input, an initializer")
}
