package plan

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rulebook/internal/checked"
	"rulebook/onnx"
	"rulebook/runtime"
	"rulebook/training"
)

// machineFile writes a machine JSON with the given counts and rates.
func machineFile(t *testing.T, dir, name, nodes, perNode, flops, bandwidth string) string {
	t.Helper()
	path := filepath.Join(dir, name+".json")
	text := `{"name": "` + name + `", "nodes": ` + nodes + `, "devices_per_node": ` + perNode + `,
 "device": {"name": "X", "peak_flops": ` + flops + `, "memory_bandwidth": 1e11, "memory_bytes": 16e9},
 "intra_node": {"bandwidth": ` + bandwidth + `, "latency": 1e-6},
 "inter_node": {"bandwidth": 1e9, "latency": 1e-5}}`
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestHostileNumbers: machine files and flags whose counts overflow, whose
// rates are not sane, or that ask for more tasks than the simulator
// holds, are refused with checked.ErrRange or checked.ErrOverflow, and
// nothing is written. On the old planner these divided by zero, indexed
// at −2^63, chose a +Inf plan, accepted NaN, ran out of memory, printed a
// 13 ms plan from an overflowed shape, or searched for minutes.
func TestHostileNumbers(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "plan.json")
	for _, c := range []struct {
		name string
		req  Request
		want error
	}{
		{"nodes × devices_per_node overflows", Request{Model: "mlp", Batch: 64, Machine: machineFile(t, dir, "overflow", "4611686018427387904", "4", "1e12", "1e10")}, checked.ErrRange},
		{"2^31 × 2^31 devices", Request{Model: "mlp", Batch: 64, Machine: machineFile(t, dir, "huge", "2147483648", "2147483648", "1e12", "1e10")}, checked.ErrRange},
		{"peak_flops 1e-300", Request{Model: "mlp", Batch: 64, Strategy: "pp", Machine: machineFile(t, dir, "flops", "1", "4", "1e-300", "1e10")}, checked.ErrRange},
		{"bandwidth 1e-300", Request{Model: "mlp", Batch: 64, Machine: machineFile(t, dir, "bandwidth", "1", "4", "1e12", "1e-300")}, checked.ErrRange},
		{"--memory-limit NaN", Request{Model: "mlp", Batch: 64, Machine: "summit:1", MemoryLimit: math.NaN()}, checked.ErrRange},
		{"--memory-limit +Inf", Request{Model: "mlp", Batch: 64, Machine: "summit:1", MemoryLimit: math.Inf(1)}, checked.ErrRange},
		{"--microbatches 2^63−1", Request{Model: "mlp", Batch: 64, Machine: "summit:1", Strategy: "pp", Microbatches: math.MaxInt64}, checked.ErrRange},
		{"--batch 2^62 on bert-large", Request{Model: "bert-large", Batch: 1 << 62, Machine: "summit:1"}, checked.ErrOverflow},
		{"--batch 2^62 per device", Request{Model: "mlp", Batch: 1 << 62, PerDevice: true, Machine: "summit:1"}, checked.ErrOverflow},
	} {
		c.req.Out = out
		_, err := Run(context.Background(), c.req)
		if !errors.Is(err, c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v; want one line wrapping %v", c.name, err, c.want)
		}
		if entries, _ := filepath.Glob(filepath.Join(dir, "plan*")); len(entries) > 0 {
			t.Errorf("%s wrote %v", c.name, entries)
		}
	}
}

// TestTooManyTasks: a micro-batch count the batch allows but whose task
// graph would exceed MaxTasks leaves the pipeline unpriced, with the
// reason, instead of allocating it; the other families are still priced.
func TestTooManyTasks(t *testing.T) {
	g, err := training.FromONNX(training.MLP(training.MLPConfig{Layers: 4, Width: 64}), "mlp", 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Choose(context.Background(), g, []Kind{DataParallel, Pipeline}, Options{Machine: machine(2), Microbatches: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	pp := c.Results[1]
	if !errors.Is(pp.Err, checked.ErrRange) || c.Chosen.Strategy.Kind != DataParallel {
		t.Errorf("pipeline: %v; chosen %s", pp.Err, c.Chosen.Strategy)
	}
}

// TestCancelled: a cancelled search stops with the context's error.
func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Choose(ctx, smallEncoder(t), Kinds, Options{Machine: machine(4)})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// badModel is one node over an input x of shape [N, 3, 8, 8].
func badModel(n *onnx.Node, inits ...*onnx.Tensor) *onnx.Model {
	x := &onnx.ValueInfo{Name: "x", IsTensor: true, ElemType: onnx.Float, HasShape: true,
		Shape: []onnx.Dim{{Param: "N"}, {Value: 3, HasValue: true}, {Value: 8, HasValue: true}, {Value: 8, HasValue: true}}}
	y := &onnx.ValueInfo{Name: "y", IsTensor: true, ElemType: onnx.Float}
	n.Name, n.Outputs = "bad", []string{"y"}
	return &onnx.Model{IRVersion: 8, OpsetImports: []onnx.OperatorSetID{{Version: 17}},
		Graph: &onnx.Graph{Name: "bad", Nodes: []*onnx.Node{n}, Inputs: []*onnx.ValueInfo{x}, Outputs: []*onnx.ValueInfo{y}, Initializers: inits}}
}

func ints(name string, v ...int64) *onnx.Attribute {
	return &onnx.Attribute{Name: name, Type: onnx.AttrInts, Ints: v}
}

func intAttr(name string, v int64) *onnx.Attribute {
	return &onnx.Attribute{Name: name, Type: onnx.AttrInt, I: v}
}

// TestBadModels: models that the runtime (and so run and optimize)
// refuses, plan refuses too, with training.ErrInvalid and one line,
// instead of panicking. Each model is checked against the runtime as
// well, so the two stay in step.
func TestBadModels(t *testing.T) {
	w := &onnx.Tensor{Name: "w", Dims: []int64{4, 3, 3, 3}, DataType: onnx.Float, FloatData: make([]float32, 108)}
	w5 := &onnx.Tensor{Name: "w", Dims: []int64{4, 3, 3}, DataType: onnx.Float, FloatData: make([]float32, 36)}
	shape := func(v ...int64) *onnx.Tensor {
		return &onnx.Tensor{Name: "s", Dims: []int64{int64(len(v))}, DataType: onnx.Int64, Int64Data: v}
	}
	dir := t.TempDir()
	for name, m := range map[string]*onnx.Model{
		"conv strides [0 0]":       badModel(&onnx.Node{OpType: "Conv", Inputs: []string{"x", "w"}, Attributes: []*onnx.Attribute{ints("strides", 0, 0)}}, w),
		"conv dilations [-1 1]":    badModel(&onnx.Node{OpType: "Conv", Inputs: []string{"x", "w"}, Attributes: []*onnx.Attribute{ints("dilations", -1, 1)}}, w),
		"conv weight of rank 3":    badModel(&onnx.Node{OpType: "Conv", Inputs: []string{"x", "w"}}, w5),
		"conv kernel past input":   badModel(&onnx.Node{OpType: "Conv", Inputs: []string{"x", "w"}, Attributes: []*onnx.Attribute{ints("dilations", 9, 9)}}, w),
		"maxpool without kernel":   badModel(&onnx.Node{OpType: "MaxPool", Inputs: []string{"x"}}),
		"reshape to [-1 -1 0]":     badModel(&onnx.Node{OpType: "Reshape", Inputs: []string{"x", "s"}}, shape(-1, -1, 0)),
		"reshape to [0 0 0 0 0]":   badModel(&onnx.Node{OpType: "Reshape", Inputs: []string{"x", "s"}}, shape(0, 0, 0, 0, 0)),
		"reshape to [-1 0 0 0 0]":  badModel(&onnx.Node{OpType: "Reshape", Inputs: []string{"x", "s"}}, shape(-1, 3, 0, 8, 0)),
		"reshape to [-2 -1]":       badModel(&onnx.Node{OpType: "Reshape", Inputs: []string{"x", "s"}}, shape(-2, -1)),
		"concat on axis 7":         badModel(&onnx.Node{OpType: "Concat", Inputs: []string{"x", "x"}, Attributes: []*onnx.Attribute{intAttr("axis", 7)}}),
		"concat on axis -5":        badModel(&onnx.Node{OpType: "Concat", Inputs: []string{"x", "x"}, Attributes: []*onnx.Attribute{intAttr("axis", -5)}}),
		"flatten on axis 9":        badModel(&onnx.Node{OpType: "Flatten", Inputs: []string{"x"}, Attributes: []*onnx.Attribute{intAttr("axis", 9)}}),
		"transpose perm [0 0 1 2]": badModel(&onnx.Node{OpType: "Transpose", Inputs: []string{"x"}, Attributes: []*onnx.Attribute{ints("perm", 0, 0, 1, 2)}}),
		"transpose perm [9]":       badModel(&onnx.Node{OpType: "Transpose", Inputs: []string{"x"}, Attributes: []*onnx.Attribute{ints("perm", 9)}}),
		"gather on axis 4":         badModel(&onnx.Node{OpType: "Gather", Inputs: []string{"x", "s"}, Attributes: []*onnx.Attribute{intAttr("axis", 4)}}, shape(0)),
		"matmul with one input":    badModel(&onnx.Node{OpType: "MatMul", Inputs: []string{"x"}}),
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".onnx")
		if err := onnx.WriteModel(path, m); err != nil {
			t.Fatal(err)
		}
		if _, _, err := runtime.FromONNX(m, dir, runtime.LoadOptions{Dims: map[string]int{"N": 6}}); err == nil {
			t.Errorf("%s: the runtime accepts it; the case is not a bad model", name)
		}
		_, err := Run(context.Background(), Request{Model: path, Machine: "summit:1", Batch: 6})
		if !errors.Is(err, training.ErrInvalid) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v; want one line wrapping training.ErrInvalid", name, err)
		}
	}
}

// TestPipelineWithoutWork: a graph whose operators do no work (views
// only) is still cut into pipeline stages; the old planner divided zero
// by zero and indexed at −2^63.
func TestPipelineWithoutWork(t *testing.T) {
	m := badModel(&onnx.Node{OpType: "Identity", Inputs: []string{"x"}})
	g, err := training.FromONNX(m, "views", 6)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Choose(context.Background(), g, []Kind{Pipeline}, Options{Machine: machine(2), Microbatches: 2})
	if err != nil || c.Chosen == nil || c.Chosen.Strategy.PP != 2 {
		t.Errorf("views only: %+v, %v", c, err)
	}
}
