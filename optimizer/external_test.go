package optimizer

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"rulebook/internal/testfiles"
	"rulebook/onnx"
	"rulebook/rules"
	"rulebook/runtime"
	"rulebook/version"
)

// runJob optimizes the model file at path with opt into dir and returns
// the report and the written model.
func runJob(t *testing.T, path string, rs *version.Set, opt Options, dir string) (*Report, *onnx.Model) {
	t.Helper()
	rt, g, _, err := LoadModel(path, runtime.LoadOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	job := Job{Path: path, Runtime: rt, Graph: g, Rules: rs, Options: opt, CostModel: "analytic",
		Output: filepath.Join(dir, "out.onnx"), Report: filepath.Join(dir, "out.json")}
	rep, err := job.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	written, err := onnx.ReadModel(job.Output)
	if err != nil {
		t.Fatal(err)
	}
	return rep, written
}

// resnet50's weights file is absent: the rewritten model refers to it for
// every weight it writes unchanged, as the input does, instead of
// embedding the generated weights (30 KB, not 102 MB), and the report says
// the file is absent. Loaded again with weights generated from the same
// seed, it computes what the original does.
func TestKeepsExternalWeights(t *testing.T) {
	path := testfiles.Shared(t, "models", "resnet50.onnx")
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), "resnet50.weights")); err == nil {
		t.Skip("resnet50.weights is present: this test is about an absent weights file")
	}
	rs, err := version.LoadBundle(bundle3Ops)
	if err != nil {
		t.Fatal(err)
	}
	opt := DefaultOptions()
	opt.Budget = 5
	dir := t.TempDir()
	rep, written := runJob(t, path, rs, opt, dir)
	input, err := onnx.ReadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, "out.onnx")); err != nil || st.Size() > 100<<10 {
		t.Fatalf("the rewritten resnet50 is %d bytes (err %v), want under 100 KB: weights embedded", st.Size(), err)
	}
	kept := 0
	for _, w := range written.Graph.Initializers {
		orig := input.Graph.Initializer(w.Name)
		if orig == nil || orig.DataLocation != onnx.LocationExternal {
			continue
		}
		if w.DataLocation != onnx.LocationExternal || !slices.Equal(w.ExternalData, orig.ExternalData) || !slices.Equal(w.Dims, orig.Dims) {
			t.Errorf("initializer %q: location %d %v, want the input's %v", w.Name, w.DataLocation, w.ExternalData, orig.ExternalData)
		}
		kept++
	}
	if want := input.Graph.ExternalLocations()["resnet50.weights"]; kept != want {
		t.Errorf("%d references to resnet50.weights kept, want all %d", kept, want)
	}
	if want := []ExternalData{{Location: "resnet50.weights", Initializers: kept}}; !slices.Equal(rep.ExternalData, want) {
		t.Errorf("report's external data %+v, want %+v", rep.ExternalData, want)
	}
	if notes := rep.WeightNotes("out.onnx"); len(notes) != 1 || !strings.Contains(notes[0], "resnet50.weights") || !strings.Contains(notes[0], "absent") {
		t.Errorf("notes %q, want one saying resnet50.weights is absent", notes)
	}
	orig, _, err := runtime.Load(path, runtime.LoadOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	again, loaded, err := runtime.Load(filepath.Join(dir, "out.onnx"), runtime.LoadOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded.RandomWeights) != kept {
		t.Errorf("%d weights generated on reload, want the %d references", len(loaded.RandomWeights), kept)
	}
	assertSameOutputs(t, orig, again)
}

// externalWeightsModel writes m.onnx computing y = relu(x·w1 + x·w2)·w3
// with its three weights in w.bin beside it, and returns its path.
func externalWeightsModel(t *testing.T, dir string) string {
	t.Helper()
	var raw []byte
	var inits []*onnx.Tensor
	for k, name := range []string{"w1", "w2", "w3"} {
		offset := len(raw)
		for i := range 16 {
			raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(float32((i*7+k*3)%11)/5-1))
		}
		inits = append(inits, &onnx.Tensor{Name: name, Dims: []int64{4, 4}, DataType: onnx.Float, DataLocation: onnx.LocationExternal,
			ExternalData: []onnx.StringStringEntry{{Key: "location", Value: "w.bin"}, {Key: "offset", Value: strconv.Itoa(offset)}, {Key: "length", Value: "64"}}})
	}
	m := &onnx.Model{IRVersion: 8, OpsetImports: []onnx.OperatorSetID{{Version: 13}}, Graph: &onnx.Graph{
		Name: "external", Inputs: []*onnx.ValueInfo{valueInfo("x", []int{2, 4})}, Initializers: inits,
		Nodes: []*onnx.Node{
			{Name: "p1", OpType: "MatMul", Inputs: []string{"x", "w1"}, Outputs: []string{"p1"}},
			{Name: "p2", OpType: "MatMul", Inputs: []string{"x", "w2"}, Outputs: []string{"p2"}},
			{Name: "sum", OpType: "Add", Inputs: []string{"p1", "p2"}, Outputs: []string{"s"}},
			{Name: "relu", OpType: "Relu", Inputs: []string{"s"}, Outputs: []string{"r"}},
			{Name: "p3", OpType: "MatMul", Inputs: []string{"r", "w3"}, Outputs: []string{"y"}},
		},
		Outputs: []*onnx.ValueInfo{valueInfo("y", []int{2, 4})},
	}}
	path := filepath.Join(dir, "m.onnx")
	if err := onnx.WriteModel(path, m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "w.bin"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// With its weights file present, a rewritten model refers to the weights
// it keeps unchanged (w3) and embeds the one it folded (w1+w2); the report
// says the file is beside the input, not beside the output, and with the
// file copied there the model computes what the original does from the
// real weights.
func TestExternalWeightsBesideTheOutput(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	path := externalWeightsModel(t, in)
	text, err := rules.ParseText(rules.Default(), "(ewadd (matmul ?a ?b) (matmul ?a ?c)) => (matmul ?a (ewadd ?b ?c))", "?a:2x4 ?b:4x4 ?c:4x4", "")
	if err != nil {
		t.Fatal(err)
	}
	rs := &version.Set{Tag: "test", Rules: []*rules.Rule{text.Rule()}, Texts: []string{text.String()}, RuleHashes: []string{"h"}}
	rep, written := runJob(t, path, rs, DefaultOptions(), out)
	if len(rep.Applied) != 1 {
		t.Fatalf("applied %+v, want distributivity once", rep.Applied)
	}
	var external, inline []string
	for _, w := range written.Graph.Initializers {
		if w.DataLocation == onnx.LocationExternal {
			external = append(external, w.Name)
		} else {
			inline = append(inline, w.Name)
		}
	}
	if !slices.Equal(external, []string{"w3"}) || len(inline) != 1 {
		t.Fatalf("external %v, inline %v: want w3 referred to and the folded sum inline", external, inline)
	}
	if want := []ExternalData{{Location: "w.bin", Initializers: 1, BesideInput: true}}; !slices.Equal(rep.ExternalData, want) {
		t.Errorf("report's external data %+v, want %+v", rep.ExternalData, want)
	}
	if notes := rep.WeightNotes("out.onnx"); len(notes) != 1 || !strings.Contains(notes[0], "copy or link") {
		t.Errorf("notes %q, want one saying to copy w.bin", notes)
	}
	data, err := os.ReadFile(filepath.Join(in, "w.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "w.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	orig, _, err := runtime.Load(path, runtime.LoadOptions{Weights: runtime.WeightsFile})
	if err != nil {
		t.Fatal(err)
	}
	rewritten, _, err := runtime.Load(filepath.Join(out, "out.onnx"), runtime.LoadOptions{Weights: runtime.WeightsFile})
	if err != nil {
		t.Fatal(err)
	}
	assertSameOutputs(t, orig, rewritten)
}
