package runtime

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sharedModelCases are the real exports in shared/models, with the shapes
// they declare and the weights file they name.
var sharedModelCases = []struct {
	file        string
	input       []int
	output      []int
	weightsFile string // "" when the weights are inline
}{
	{"resnet50.onnx", []int{1, 3, 224, 224}, []int{1, 1000}, "resnet50.weights"},
	{"inception_v3.onnx", []int{1, 3, 299, 299}, []int{1, 1000}, "inception_v3.weights"},
	{"squeezenet1_1.onnx", []int{1, 3, 224, 224}, []int{1, 1000}, "squeezenet1_1.weights"},
	{"bert_base.onnx", []int{1, 64, 768}, []int{1, 64, 768}, "bert_base.weights"},
	{"squeezenet1_1-full.onnx", []int{1, 3, 224, 224}, []int{1, 1000}, ""},
}

// TestSharedModels loads every shared model (generating the weights whose
// file is absent, which the report must say) and runs it: the outputs must
// have the declared shapes and be finite.
func TestSharedModels(t *testing.T) {
	for _, tc := range sharedModelCases {
		t.Run(tc.file, func(t *testing.T) {
			path := sharedModel(t, tc.file)
			m, report, err := Load(path, LoadOptions{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			checkWeightsReport(t, report, filepath.Dir(path), tc.weightsFile)
			if report.Opset != 13 {
				t.Errorf("report.Opset = %d, want 13", report.Opset)
			}
			if in := m.Inputs(); len(in) != 1 || !slices.Equal(in[0].Shape, tc.input) {
				t.Fatalf("inputs %v, want one of shape %v", in, tc.input)
			}
			out := m.Outputs()
			if len(out) != 1 || !slices.Equal(out[0].Shape, tc.output) {
				t.Fatalf("outputs %v, want one of shape %v", out, tc.output)
			}
			s, err := m.NewSession(SessionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Run(context.Background(), m.RandomInputs(2))
			if err != nil {
				t.Fatal(err)
			}
			y := got[out[0].Name]
			if y == nil || !slices.Equal(y.Shape, tc.output) {
				t.Fatalf("Run returned %v, want %s of shape %v", got, out[0].Name, tc.output)
			}
			if i := firstNonFinite(y.Data); i >= 0 {
				t.Fatalf("output element %d is %v", i, y.Data[i])
			}
			if slices.Max(y.Data) == slices.Min(y.Data) {
				t.Errorf("output is constant (%v)", y.Data[0])
			}
		})
	}
}

// checkWeightsReport checks that the report says where the weights came
// from: the named file when it is present, generated data otherwise.
func checkWeightsReport(t *testing.T, r *LoadReport, dir, weightsFile string) {
	t.Helper()
	if weightsFile == "" {
		if len(r.RandomWeights) != 0 || r.WeightsFile != "" {
			t.Errorf("inline weights, but the report says random %v, file %q", r.RandomWeights, r.WeightsFile)
		}
		return
	}
	if _, err := os.Stat(filepath.Join(dir, weightsFile)); err == nil {
		if r.WeightsFile != filepath.Join(dir, weightsFile) || len(r.RandomWeights) != 0 {
			t.Errorf("weights file present, but the report says random %d, file %q", len(r.RandomWeights), r.WeightsFile)
		}
		return
	}
	if len(r.RandomWeights) == 0 || r.WeightsFile != "" {
		t.Errorf("%s is absent, but the report says random %v, file %q", weightsFile, r.RandomWeights, r.WeightsFile)
	}
}

// TestSqueezenetReference compares squeezenet1_1-full (inline weights) with
// PyTorch's output on the shipped input: max|got−want| / max|want| must be
// below 1e-4.
func TestSqueezenetReference(t *testing.T) {
	path := sharedModel(t, "squeezenet1_1-full.onnx")
	set := filepath.Join(filepath.Dir(path), "squeezenet1_1-full_test_data_set_0")
	m, _, err := Load(path, LoadOptions{Weights: WeightsFile})
	if err != nil {
		t.Fatal(err)
	}
	for _, threads := range []int{1, 2, 3} {
		s, err := m.NewSession(SessionOptions{Threads: threads})
		if err != nil {
			t.Fatal(err)
		}
		x := readTensorFile(t, filepath.Join(set, "input_0.pb"))
		want := readTensorFile(t, filepath.Join(set, "output_0.pb"))
		got, err := s.Run(context.Background(), map[string]*Tensor{m.Inputs()[0].Name: x})
		if err != nil {
			t.Fatal(err)
		}
		y := got[m.Outputs()[0].Name]
		if !slices.Equal(y.Shape, want.Shape) {
			t.Fatalf("shape %v, want %v", y.Shape, want.Shape)
		}
		maxDiff, maxRef := 0.0, 0.0
		for i := range y.Data {
			maxDiff = math.Max(maxDiff, math.Abs(float64(y.Data[i]-want.Data[i])))
			maxRef = math.Max(maxRef, math.Abs(float64(want.Data[i])))
		}
		rel := maxDiff / maxRef
		t.Logf("threads %d: max |got-want| %.3g, max |want| %.3g, relative %.3g", threads, maxDiff, maxRef, rel)
		if !(rel < 1e-4) {
			t.Errorf("threads %d: relative error %g, want < 1e-4", threads, rel)
		}
	}
}

// TestRandomWeightsDeterministic: the same seed gives the same weights and
// outputs, another seed other ones.
func TestRandomWeightsDeterministic(t *testing.T) {
	path := sharedModel(t, "squeezenet1_1.onnx")
	run := func(seed uint64) []float32 {
		m, report, err := Load(path, LoadOptions{Weights: WeightsRandom, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		if len(report.RandomWeights) == 0 {
			t.Fatal("random mode generated nothing")
		}
		s, err := m.NewSession(SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.Run(context.Background(), m.RandomInputs(7))
		if err != nil {
			t.Fatal(err)
		}
		return out[m.Outputs()[0].Name].Data
	}
	a, b, c := run(1), run(1), run(2)
	if !slices.Equal(a, b) {
		t.Error("seed 1 gave different outputs on two loads")
	}
	if slices.Equal(a, c) {
		t.Error("seeds 1 and 2 gave the same outputs")
	}
}

// TestExternalWeights writes an external data file for a hand-built model:
// read when present, reported; a file shorter than offset+length is an
// error naming the range; WeightsFile without the file is an error.
func TestExternalWeights(t *testing.T) {
	dir := t.TempDir()
	// y = x · W, W 2×3 stored at offset 8 of w.bin.
	model := pbModel(13, pbGraph(
		[][]byte{pbNode("MatMul", []string{"x", "W"}, []string{"y"})},
		[][]byte{pbExternalTensor("W", []int64{2, 3}, "w.bin", 8, 24)},
		[][]byte{pbValueInfo("x", 1, 2)},
		[][]byte{pbValueInfo("y", 1, 3)}))
	path := filepath.Join(dir, "m.onnx")
	if err := os.WriteFile(path, model, 0o644); err != nil {
		t.Fatal(err)
	}
	w := []float32{1, 2, 3, 4, 5, 6}
	raw := make([]byte, 8, 8+24)
	for _, x := range w {
		raw = append(raw, byte(math.Float32bits(x)), byte(math.Float32bits(x)>>8), byte(math.Float32bits(x)>>16), byte(math.Float32bits(x)>>24))
	}

	t.Run("missing file, mode file", func(t *testing.T) {
		_, _, err := Load(path, LoadOptions{Weights: WeightsFile})
		if err == nil || !strings.Contains(err.Error(), "w.bin") {
			t.Fatalf("error %v, want one naming w.bin", err)
		}
	})
	t.Run("missing file, mode auto", func(t *testing.T) {
		_, r, err := Load(path, LoadOptions{})
		if err != nil || !slices.Equal(r.RandomWeights, []string{"W"}) || r.WeightsFile != "" {
			t.Fatalf("err %v, report %+v; want W generated", err, r)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "w.bin"), raw[:20], 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("short file", func(t *testing.T) {
		_, _, err := Load(path, LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), "exceeds") || !strings.Contains(err.Error(), "m.onnx") {
			t.Fatalf("error %v, want one naming the model and the range that exceeds w.bin", err)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "w.bin"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("present", func(t *testing.T) {
		m, r, err := Load(path, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.RandomWeights) != 0 || r.WeightsFile != filepath.Join(dir, "w.bin") {
			t.Fatalf("report %+v, want w.bin read", r)
		}
		s, _ := m.NewSession(SessionOptions{})
		out, err := s.Run(context.Background(), map[string]*Tensor{"x": {Shape: []int{1, 2}, Data: []float32{1, 10}}})
		if err != nil {
			t.Fatal(err)
		}
		if want := []float32{41, 52, 63}; !slices.Equal(out["y"].Data, want) {
			t.Fatalf("y = %v, want %v", out["y"].Data, want)
		}
	})
	t.Run("present, mode random", func(t *testing.T) {
		_, r, err := Load(path, LoadOptions{Weights: WeightsRandom})
		if err != nil || !slices.Equal(r.RandomWeights, []string{"W"}) {
			t.Fatalf("err %v, report %+v; want W generated", err, r)
		}
	})
}

// TestNodes checks the cost-table view of resnet50: Identity elided, Conv
// parameters rendered canonically.
func TestNodes(t *testing.T) {
	m, _, err := Load(sharedModel(t, "resnet50.onnx"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodes := m.Nodes()
	counts := map[string]int{}
	for i, n := range nodes {
		counts[n.Op]++
		if n.Index != i {
			t.Errorf("node %d has Index %d", i, n.Index)
		}
	}
	want := map[string]int{"Conv": 53, "Relu": 49, "Add": 16, "MaxPool": 1, "GlobalAveragePool": 1, "Flatten": 1, "Gemm": 1}
	for op, n := range want {
		if counts[op] != n {
			t.Errorf("%d %s nodes, want %d", counts[op], op, n)
		}
	}
	if counts["Identity"] != 0 {
		t.Errorf("%d Identity nodes remain", counts["Identity"])
	}
	first := nodes[0]
	if first.Op != "Conv" || first.Params != "dilations=1,1 group=1 kernel=7x7 pads=3,3,3,3 strides=2,2" ||
		!slices.Equal(first.Inputs[0], []int{1, 3, 224, 224}) || !slices.Equal(first.Outputs[0], []int{1, 64, 112, 112}) {
		t.Errorf("first node %+v", first)
	}
}
