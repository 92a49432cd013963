package runtime

import (
	"errors"
	"slices"
	"testing"

	"rulebook/internal/testfiles"
	"rulebook/onnx"
)

// TestInferShapesAgreesWithLoad: on the shared models, the shapes alone
// are the shapes a full load infers, value for value.
func TestInferShapesAgreesWithLoad(t *testing.T) {
	models := []string{"squeezenet1_1.onnx"}
	if !testing.Short() {
		models = append(models, "resnet50.onnx", "inception_v3.onnx")
	}
	for _, name := range models {
		t.Run(name, func(t *testing.T) {
			path := testfiles.Shared(t, "models", name)
			m, err := onnx.ReadModel(path)
			if err != nil {
				t.Fatal(err)
			}
			inputs, dims := map[string][]int{}, map[string]int{}
			for _, vi := range m.Graph.Inputs {
				if m.Graph.Initializer(vi.Name) != nil {
					continue
				}
				shape := make([]int, len(vi.Shape))
				for i, d := range vi.Shape {
					shape[i] = int(d.Value)
					if !d.HasValue {
						shape[i], dims[d.Param] = 2, 2
					}
				}
				inputs[vi.Name] = shape
			}
			shapes, err := InferShapes(m, ShapeOptions{Inputs: inputs})
			if err != nil {
				t.Fatal(err)
			}
			loaded, _, err := Load(path, LoadOptions{Weights: WeightsRandom, Dims: dims})
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range loaded.values {
				got, ok := shapes.Shape(v.name)
				if !ok || !slices.Equal(got, v.shape) {
					t.Errorf("%s: InferShapes %v (%v), Load %v", v.name, got, ok, v.shape)
				}
			}
		})
	}
}

// shapeModel is a graph of the given nodes over inputs and initializers,
// at opset 17.
func shapeModel(nodes []*onnx.Node, inputs []*onnx.ValueInfo, inits ...*onnx.Tensor) *onnx.Model {
	return &onnx.Model{IRVersion: 8, OpsetImports: []onnx.OperatorSetID{{Version: 17}},
		Graph: &onnx.Graph{Name: "shapes", Nodes: nodes, Inputs: inputs, Initializers: inits}}
}

func floatInput(name string, ndim int) *onnx.ValueInfo {
	return &onnx.ValueInfo{Name: name, IsTensor: true, ElemType: onnx.Float, HasShape: true, Shape: make([]onnx.Dim, ndim)}
}

func int64s(name string, v ...int64) *onnx.Tensor {
	return &onnx.Tensor{Name: name, Dims: []int64{int64(len(v))}, DataType: onnx.Int64, Int64Data: v}
}

// TestInferShapes: what the shapes-only pass adds to the load's
// inference: given input shapes past what a load allocates, run-time
// indices, the batch carried and retraced, and integer chains folded.
func TestInferShapes(t *testing.T) {
	node := func(op string, in []string, out string, attrs ...*onnx.Attribute) *onnx.Node {
		return &onnx.Node{OpType: op, Name: out, Inputs: in, Outputs: []string{out}, Attributes: attrs}
	}
	axis0 := &onnx.Attribute{Name: "axis", Type: onnx.AttrInt, I: 0}
	// Shape → Gather → Unsqueeze → Concat gives Reshape's target [N, -1].
	flatten := []*onnx.Node{
		node("Shape", []string{"x"}, "s"),
		node("Gather", []string{"s", "zero"}, "n", axis0),
		node("Unsqueeze", []string{"n", "zero1"}, "n1"),
		node("Concat", []string{"n1", "minus1"}, "target", axis0),
		node("Reshape", []string{"x", "target"}, "y"),
	}
	scalar0 := &onnx.Tensor{Name: "zero", DataType: onnx.Int64, Int64Data: []int64{0}}
	weight := &onnx.Tensor{Name: "w", Dims: []int64{10, 3}, DataType: onnx.Float}
	ids := &onnx.ValueInfo{Name: "ids", IsTensor: true, ElemType: onnx.Int64, HasShape: true, Shape: make([]onnx.Dim, 2)}
	cases := []struct {
		name    string
		model   *onnx.Model
		inputs  map[string][]int
		retrace bool
		want    map[string][]int
		batched []string // of the values in want
	}{
		{"a folded integer chain", shapeModel(flatten, []*onnx.ValueInfo{floatInput("x", 3)}, scalar0, int64s("zero1", 0), int64s("minus1", -1)),
			map[string][]int{"x": {4, 2, 3}}, false, map[string][]int{"s": {3}, "target": {2}, "y": {4, 6}}, []string{"y"}},
		{"a Reshape traced at batch 1", shapeModel([]*onnx.Node{node("Reshape", []string{"x", "t"}, "y")}, []*onnx.ValueInfo{floatInput("x", 2)}, int64s("t", 1, 2, 3)),
			map[string][]int{"x": {8, 6}}, true, map[string][]int{"y": {8, 2, 3}}, []string{"y"}},
		{"indices at run time", shapeModel([]*onnx.Node{node("Gather", []string{"w", "ids"}, "e", axis0)}, []*onnx.ValueInfo{ids}, weight),
			map[string][]int{"ids": {5, 2}}, false, map[string][]int{"w": {10, 3}, "e": {5, 2, 3}}, []string{"e"}},
		{"past what a load allocates", shapeModel([]*onnx.Node{node("Relu", []string{"x"}, "y")}, []*onnx.ValueInfo{floatInput("x", 2)}),
			map[string][]int{"x": {1 << 40, 8}}, false, map[string][]int{"y": {1 << 40, 8}}, []string{"y"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			batched := map[string]bool{}
			for name := range c.inputs {
				batched[name] = true
			}
			s, err := InferShapes(c.model, ShapeOptions{Inputs: c.inputs, Batched: batched, RetraceBatch: c.retrace})
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range c.want {
				if got, ok := s.Shape(name); !ok || !slices.Equal(got, want) {
					t.Errorf("%s: %v (%v), want %v", name, got, ok, want)
				}
				if got, want := s.Batched(name), slices.Contains(c.batched, name); got != want {
					t.Errorf("%s: batched %v, want %v", name, got, want)
				}
			}
		})
	}
}

// TestInferShapesRefuses: the pass refuses what the load refuses, and
// says when an operator is missing rather than the model wrong.
func TestInferShapesRefuses(t *testing.T) {
	x := []*onnx.ValueInfo{floatInput("x", 2)}
	reshape := []*onnx.Node{{OpType: "Reshape", Inputs: []string{"x", "t"}, Outputs: []string{"y"}}}
	cases := []struct {
		name        string
		model       *onnx.Model
		retrace     bool
		unsupported bool
	}{
		{"a Reshape traced at batch 1, not retraced", shapeModel(reshape, x, int64s("t", 1, 2, 3)), false, false},
		{"a Reshape with two -1", shapeModel(reshape, x, int64s("t", -1, -1)), true, false},
		{"an operator the runtime lacks", shapeModel([]*onnx.Node{{OpType: "NoSuchOp", Inputs: []string{"x"}, Outputs: []string{"y"}}}, x), false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opt := ShapeOptions{Inputs: map[string][]int{"x": {8, 6}}, Batched: map[string]bool{"x": true}, RetraceBatch: c.retrace}
			_, err := InferShapes(c.model, opt)
			var missing *UnsupportedOpsError
			if err == nil || errors.As(err, &missing) != c.unsupported {
				t.Errorf("got %v; want an error, unsupported operators %v", err, c.unsupported)
			}
		})
	}
}
