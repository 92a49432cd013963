package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"rulebook/internal/testfiles"
	"rulebook/onnx"
	"rulebook/optimizer"
	"rulebook/runtime"
	"rulebook/store"
)

// TestOptimizeCommand optimizes a model of halved products (a halving
// the rules fold into the next product's weight) with a released version
// from the store and with its exported bundle: both write the same model
// and the same costs. The run from the store is recorded for 'rulebook
// usage'; measured costs are timed, stored and then found again; a
// version edited in the database is refused.
func TestOptimizeCommand(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	model := filepath.Join(dir, "halved.onnx")
	writeHalvedModel(t, model)
	db, bundle := filepath.Join(dir, "r.db"), filepath.Join(dir, "v1.json")
	for _, args := range [][]string{
		{"generate", "--max-ops", "2", "--ops", "matmul,smul", "--no-progress"},
		{"verify", "../../axioms", "--no-progress"},
		{"release", "v1"},
		{"export", "--version", "v1", "--format", "json", "-o", bundle},
	} {
		if out, err := run(ctx, append(args, "--db", db)...); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	optimize := func(rules, out string, extra ...string) *optimizer.Report {
		t.Helper()
		args := append([]string{"optimize", model, "--rules", rules, "--budget", "10", "-o", out, "--db", db}, extra...)
		if text, err := run(ctx, args...); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, text)
		}
		var r optimizer.Report
		data, err := os.ReadFile(strings.TrimSuffix(out, ".onnx") + ".json")
		must(t, err)
		must(t, json.Unmarshal(data, &r))
		return &r
	}
	fromStore := optimize("v1", filepath.Join(dir, "store.onnx"))
	fromBundle := optimize(bundle, filepath.Join(dir, "bundle.onnx"))
	if fileHash(t, filepath.Join(dir, "store.onnx")) != fileHash(t, filepath.Join(dir, "bundle.onnx")) ||
		fromStore.After != fromBundle.After || fromStore.Rules.Hash != fromBundle.Rules.Hash {
		t.Errorf("store and bundle differ: %.4f vs %.4f ms", fromStore.After, fromBundle.After)
	}
	for i, a := range fromStore.Applied {
		b := fromBundle.Applied[i]
		if a.ID == 0 || b.ID != 0 || a.Index != b.Index || a.Hash != b.Hash || a.Rule != b.Rule || a.Count != b.Count {
			t.Errorf("applied rule %d: store %+v, bundle %+v", i, a, b)
		}
	}
	if fromStore.After >= fromStore.Before || len(fromStore.Applied) == 0 || fromStore.Opaque["Softmax"] != 1 || len(fromStore.Search.Trace) < 2 {
		t.Errorf("report: cost %.4f -> %.4f, applied %v, opaque %v, trace %v",
			fromStore.Before, fromStore.After, fromStore.Applied, fromStore.Opaque, fromStore.Search.Trace)
	}
	var before, after float64
	for _, c := range fromStore.ByOperator {
		before, after = before+c.Before, after+c.After
	}
	if math.Abs(before-fromStore.Before) > 1e-9 || math.Abs(after-fromStore.After) > 1e-9 {
		t.Errorf("cost by operator adds up to %.6f -> %.6f ms, not %.6f -> %.6f: %+v", before, after, fromStore.Before, fromStore.After, fromStore.ByOperator)
	}
	if out, err := run(ctx, "usage", "--db", db, "--format", "csv"); err != nil || !strings.Contains(out, "halved.onnx") {
		t.Errorf("usage after optimize (err %v):\n%s", err, out)
	}

	measured := optimize("v1", filepath.Join(dir, "measured.onnx"), "--cost", "measured", "--compare", "2")
	if measured.CostModel != "measured" || measured.Before <= 0 || measured.Measured == nil || measured.Measured.MaxRelDiff > 1e-4 {
		t.Errorf("measured report: %+v", measured)
	}
	s, err := store.Open(ctx, db)
	must(t, err)
	costs, err := s.Costs(ctx, measured.Device)
	s.Close()
	must(t, err)
	if len(costs) == 0 {
		t.Fatal("no operator costs stored by --cost measured")
	}
	// Stored costs are read back, not timed again (a confirmation would
	// time the rewrite's operators afresh and store them).
	text, err := run(ctx, "optimize", model, "--rules", "v1", "--budget", "1", "-o", filepath.Join(dir, "again.onnx"), "--db", db, "--cost", "measured", "--confirm", "0")
	if err != nil || strings.Contains(text, "operator costs measured") {
		t.Errorf("a second measured run timed operators again (err %v):\n%s", err, text)
	}

	execSQL(t, db, "UPDATE rules SET dst = '(concat 0 ?a ?a)' WHERE id = (SELECT min(rule_id) FROM version_rules)")
	if _, err := run(ctx, "optimize", model, "--rules", "v1", "-o", filepath.Join(dir, "x.onnx"), "--db", db); err == nil || !strings.Contains(err.Error(), "hash") {
		t.Errorf("a tampered version: %v", err)
	}
	if _, err := run(ctx, "plan", "mlp", "--batch", "1536", "--rules", "v1", "--db", db); err == nil || !strings.Contains(err.Error(), "hash") {
		t.Errorf("plan on a tampered version: %v", err)
	}
}

// Mistakes in optimize's arguments are refused before the search, with a
// message that says what to do.
func TestOptimizeRefusesBadArguments(t *testing.T) {
	ctx := context.Background()
	model := testfiles.Shared(t, "models", "squeezenet1_1.onnx")
	dir := t.TempDir()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--rules", filepath.Join(dir, "missing.json")}, "no such bundle file"},
		{[]string{"--rules", "v1", "--alpha", "0.5"}, "--alpha must be at least 1"},
		{[]string{"--rules", "v1", "--budget", "0"}, "--budget must be at least 1"},
		{[]string{"--rules", "v1", "--cost", "guessed"}, "--cost must be analytic or measured"},
		{[]string{"--rules", "v1", "--device", "tpu"}, "--device must be cpu or cuda"},
		{[]string{"--rules", "v1", "--device", "CUDA"}, "--device must be cpu or cuda"},
		{[]string{"--rules", "v1", "--device", ""}, "--device must be cpu or cuda"},
		{[]string{"--rules", "v1", "--compare-on", "tpu"}, "--backend must be cpu, cuda or ort"},
		{[]string{"--rules", "v1", "--confirm", "-1"}, "--confirm and --threads must not be negative"},
		{[]string{"--rules", "v1", "-o", filepath.Join(dir, "m.json")}, "the report would overwrite the model"},
		{[]string{"--rules", "v1", "-o", filepath.Join(dir, "no", "such", "dir", "m.onnx")}, "cannot write"},
	}
	for _, c := range cases {
		args := append([]string{"optimize", model, "--db", filepath.Join(dir, "r.db")}, c.args...)
		if _, err := run(ctx, args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "r.db")); err == nil {
		t.Error("a refused command created the database")
	}
}

// writeHalvedModel writes y = softmax(relu(x·0.5·w1)·0.5·w2) for x of
// shape (64, 256): the rules of products and scalar multiples fold each
// halving into the next product's weight, and the Softmax stays opaque.
func writeHalvedModel(t *testing.T, path string) {
	t.Helper()
	info := func(name string) *onnx.ValueInfo {
		return &onnx.ValueInfo{Name: name, IsTensor: true, ElemType: onnx.Float, HasShape: true,
			Shape: []onnx.Dim{{Value: 64, HasValue: true}, {Value: 256, HasValue: true}}}
	}
	tensor := func(name string, dims ...int64) *onnx.Tensor {
		n := int64(1)
		for _, d := range dims {
			n *= d
		}
		data := make([]float32, n)
		for i := range data {
			data[i] = float32(i%7-3) / 16
		}
		return &onnx.Tensor{Name: name, Dims: dims, DataType: onnx.Float, FloatData: data}
	}
	half := tensor("half")
	half.FloatData[0] = 0.5
	g := &onnx.Graph{Name: "halved", Inputs: []*onnx.ValueInfo{info("x")}, Outputs: []*onnx.ValueInfo{info("y")},
		Initializers: []*onnx.Tensor{half, tensor("w1", 256, 256), tensor("w2", 256, 256)},
		Nodes: []*onnx.Node{
			{Name: "h1", OpType: "Mul", Inputs: []string{"x", "half"}, Outputs: []string{"h1"}},
			{Name: "p1", OpType: "MatMul", Inputs: []string{"h1", "w1"}, Outputs: []string{"p1"}},
			{Name: "r", OpType: "Relu", Inputs: []string{"p1"}, Outputs: []string{"r"}},
			{Name: "h2", OpType: "Mul", Inputs: []string{"r", "half"}, Outputs: []string{"h2"}},
			{Name: "p2", OpType: "MatMul", Inputs: []string{"h2", "w2"}, Outputs: []string{"p2"}},
			{Name: "s", OpType: "Softmax", Inputs: []string{"p2"}, Outputs: []string{"y"}},
		}}
	must(t, onnx.WriteModel(path, &onnx.Model{IRVersion: 8, OpsetImports: []onnx.OperatorSetID{{Version: 13}}, Graph: g}))
}

// writeBatchModel writes y = relu(x·w1)·w2 for x of shape (batch, 16),
// batch a symbolic dimension.
func writeBatchModel(t *testing.T, path string) {
	t.Helper()
	info := func(name string) *onnx.ValueInfo {
		return &onnx.ValueInfo{Name: name, IsTensor: true, ElemType: onnx.Float, HasShape: true,
			Shape: []onnx.Dim{{Param: "batch"}, {Value: 16, HasValue: true}}}
	}
	weight := func(name string) *onnx.Tensor {
		return &onnx.Tensor{Name: name, Dims: []int64{16, 16}, DataType: onnx.Float, RawData: make([]byte, 4*16*16), HasRawData: true}
	}
	g := &onnx.Graph{Name: "batch", Inputs: []*onnx.ValueInfo{info("x")}, Outputs: []*onnx.ValueInfo{info("y")},
		Initializers: []*onnx.Tensor{weight("w1"), weight("w2")},
		Nodes: []*onnx.Node{
			{Name: "p1", OpType: "MatMul", Inputs: []string{"x", "w1"}, Outputs: []string{"p1"}},
			{Name: "r", OpType: "Relu", Inputs: []string{"p1"}, Outputs: []string{"r"}},
			{Name: "p2", OpType: "MatMul", Inputs: []string{"r", "w2"}, Outputs: []string{"y"}},
		}}
	must(t, onnx.WriteModel(path, &onnx.Model{IRVersion: 8, OpsetImports: []onnx.OperatorSetID{{Version: 13}}, Graph: g}))
}

// --dim gives symbolic input dimensions their values, as for run and
// bench-ops; the rewritten model is for those values and says so in its
// input and output shapes. Without it, the error names the dimension and
// the flag.
func TestOptimizeDim(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	model, out := filepath.Join(dir, "batch.onnx"), filepath.Join(dir, "out.onnx")
	writeBatchModel(t, model)
	bundle := "../../optimizer/testdata/rules-3ops.json"
	if _, err := run(ctx, "optimize", model, "--rules", bundle, "-o", out); err == nil || !strings.Contains(err.Error(), `"batch"`) || !strings.Contains(err.Error(), "--dim") {
		t.Errorf("without --dim: %v, want an error naming batch and --dim", err)
	}
	if _, err := run(ctx, "optimize", model, "--rules", bundle, "-o", out, "--dim", "batch"); err == nil || !strings.Contains(err.Error(), "--dim") {
		t.Errorf("--dim batch: %v, want NAME=N asked for", err)
	}
	if text, err := run(ctx, "optimize", model, "--rules", bundle, "-o", out, "--dim", "batch=4", "--budget", "5"); err != nil {
		t.Fatalf("--dim batch=4: %v\n%s", err, text)
	}
	m, err := onnx.ReadModel(out)
	must(t, err)
	for _, vi := range append(m.Graph.Inputs, m.Graph.Outputs...) {
		if got := fmt.Sprint(vi.Shape); got != "[4 16]" {
			t.Errorf("%s has shape %s in the rewritten model, want [4 16]", vi.Name, got)
		}
	}
	if _, _, err := runtime.Load(out, runtime.LoadOptions{}); err != nil {
		t.Errorf("the rewritten model does not load without dims: %v", err)
	}
}

// optimize records its run where its help says: with a bundle, in the
// database --db names (created if need be), else in ./rulebook.db when it
// exists, else nowhere.
func TestOptimizeRecordsWhereHelpSays(t *testing.T) {
	ctx := context.Background()
	model := testfiles.Shared(t, "models", "squeezenet1_1.onnx")
	bundle, err := filepath.Abs("../../optimizer/testdata/rules-3ops.json")
	must(t, err)
	t.Setenv("RULEBOOK_DB", "")
	t.Chdir(t.TempDir())
	optimize := func(extra ...string) {
		t.Helper()
		if out, err := run(ctx, append([]string{"optimize", model, "--rules", bundle, "--budget", "1", "--no-progress"}, extra...)...); err != nil {
			t.Fatalf("%v: %v\n%s", extra, err, out)
		}
	}
	recorded := func(db string) (n int) {
		t.Helper()
		s, err := store.Open(ctx, db)
		must(t, err)
		defer s.Close()
		runs, err := s.Runs(ctx)
		must(t, err)
		for _, r := range runs {
			if r.Command == "optimize" && r.Status == store.RunDone {
				n++
			}
		}
		return n
	}
	optimize()
	if _, err := os.Stat(defaultDB); err == nil {
		t.Fatalf("a bundle without --db created %s", defaultDB)
	}
	optimize("--db", "named.db")
	if n := recorded("named.db"); n != 1 {
		t.Errorf("--db named.db recorded %d runs, want 1", n)
	}
	optimize("--db", defaultDB)
	optimize()
	if n := recorded(defaultDB); n != 2 {
		t.Errorf("./%s recorded %d runs, want 2: the one naming it and the one finding it", defaultDB, n)
	}
}

// optimize on a model where no rule applies claims no speed-up, however
// the two runs of the same model happen to differ (issue 25: bert_base
// with applied: [] was reported 1.09x faster), and reports the spread.
func TestOptimizeNoRuleAppliedClaimsNoSpeedup(t *testing.T) {
	dir := t.TempDir()
	model, out := filepath.Join(dir, "relu.onnx"), filepath.Join(dir, "out.onnx")
	x := &onnx.ValueInfo{Name: "x", IsTensor: true, ElemType: onnx.Float, HasShape: true,
		Shape: []onnx.Dim{{Value: 64, HasValue: true}, {Value: 64, HasValue: true}}}
	y := &onnx.ValueInfo{Name: "y", IsTensor: true, ElemType: onnx.Float}
	g := &onnx.Graph{Name: "relu", Inputs: []*onnx.ValueInfo{x}, Outputs: []*onnx.ValueInfo{y},
		Nodes: []*onnx.Node{{Name: "r", OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"y"}}}}
	must(t, onnx.WriteModel(model, &onnx.Model{IRVersion: 8, OpsetImports: []onnx.OperatorSetID{{Version: 13}}, Graph: g}))
	text, err := run(context.Background(), "optimize", model, "--rules", "../../optimizer/testdata/rules-3ops.json", "--budget", "5",
		"--compare", "3", "--threads", "1", "-o", out, "--no-progress")
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	measured := regexp.MustCompile(`(?m)^measured .*$`).FindString(text)
	if regexp.MustCompile(`[0-9]\.[0-9]+x`).MatchString(measured) || !strings.Contains(measured, "spread") || !strings.Contains(measured, "no rule applied") {
		t.Errorf("the output claims a speed-up or leaves out the spread:\n%s", text)
	}
}
