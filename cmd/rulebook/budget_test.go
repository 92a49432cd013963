package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rulebook/enumerate"
	"rulebook/internal/budget"
	"rulebook/onnx"
)

// writeBudgetModels writes the models of issue 25 whose declared sizes
// need tens of gigabytes: a ConstantOfShape of [2^16 2^17], an absent
// external initializer of [2^17 2^16], an input of [65536 65536] and an
// input [N] to be given N = 2^30.
func writeBudgetModels(t *testing.T, dir string) map[string]string {
	t.Helper()
	dim := func(v int64) onnx.Dim { return onnx.Dim{Value: v, HasValue: true} }
	input := func(dims ...onnx.Dim) []*onnx.ValueInfo {
		return []*onnx.ValueInfo{{Name: "x", IsTensor: true, ElemType: onnx.Float, HasShape: true, Shape: dims}}
	}
	out := []*onnx.ValueInfo{{Name: "y", IsTensor: true, ElemType: onnx.Float}}
	relu := []*onnx.Node{{Name: "r", OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"y"}}}
	graphs := map[string]*onnx.Graph{
		"const.onnx": {Inputs: input(dim(1)), Outputs: out,
			Initializers: []*onnx.Tensor{{Name: "shape", Dims: []int64{2}, DataType: onnx.Int64, Int64Data: []int64{1 << 16, 1 << 17}}},
			Nodes: []*onnx.Node{{Name: "c", OpType: "ConstantOfShape", Inputs: []string{"shape"}, Outputs: []string{"big"}},
				{Name: "a", OpType: "Add", Inputs: []string{"x", "big"}, Outputs: []string{"y"}}}},
		"absent.onnx": {Inputs: input(dim(1), dim(1<<17)), Outputs: out,
			Initializers: []*onnx.Tensor{{Name: "w", Dims: []int64{1 << 17, 1 << 16}, DataType: onnx.Float, DataLocation: onnx.LocationExternal,
				ExternalData: []onnx.StringStringEntry{{Key: "location", Value: "absent.bin"}}}},
			Nodes: []*onnx.Node{{Name: "m", OpType: "MatMul", Inputs: []string{"x", "w"}, Outputs: []string{"y"}}}},
		"input.onnx":    {Inputs: input(dim(65536), dim(65536)), Outputs: out, Nodes: relu},
		"symbolic.onnx": {Inputs: input(onnx.Dim{Param: "N"}), Outputs: out, Nodes: relu},
	}
	paths := map[string]string{}
	for name, g := range graphs {
		paths[name] = filepath.Join(dir, name)
		must(t, onnx.WriteModel(paths[name], &onnx.Model{IRVersion: 8, OpsetImports: []onnx.OperatorSetID{{Version: 13}}, Graph: g}))
	}
	return paths
}

// TestMemoryBudgetRefusals runs each command of issue 25 that ran out of
// memory under a budget of 1 GiB: each is refused before it allocates,
// with one line naming the file or flag and the size.
func TestMemoryBudgetRefusals(t *testing.T) {
	dir := t.TempDir()
	m := writeBudgetModels(t, dir)
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"run ConstantOfShape", []string{"run", m["const.onnx"]}, []string{m["const.onnx"], "ConstantOfShape", "[65536 131072]", "32 GiB"}},
		{"optimize ConstantOfShape", []string{"optimize", m["const.onnx"], "--rules", "../../optimizer/testdata/rules-3ops.json", "-o", filepath.Join(dir, "o.onnx")}, []string{m["const.onnx"], "[65536 131072]", "32 GiB"}},
		{"run absent weights", []string{"run", m["absent.onnx"]}, []string{m["absent.onnx"], `initializer "w"`, "32 GiB"}},
		{"run input", []string{"run", m["input.onnx"]}, []string{m["input.onnx"], `input "x"`, "16 GiB"}},
		{"run --dim", []string{"run", m["symbolic.onnx"], "--dim", "N=1073741824"}, []string{m["symbolic.onnx"], `input "x"`, "[1073741824]", "4 GiB"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(context.Background(), append(tc.args, "--memory-budget", "1GiB")...)
			if !errors.Is(err, budget.ErrExceeded) {
				t.Fatalf("got %v (output %q), want a refusal over the memory budget", err, out)
			}
			msg := err.Error()
			for _, w := range append(tc.want, "memory budget of 1 GiB") {
				if !strings.Contains(msg, w) {
					t.Errorf("%q does not name %q", msg, w)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("the refusal is more than one line: %q", msg)
			}
		})
	}
}

// TestMemoryBudgetFlag refuses budgets that are not sizes, naming the flag.
func TestMemoryBudgetFlag(t *testing.T) {
	m := writeBudgetModels(t, t.TempDir())
	for _, v := range []string{"8 parsecs", "-1GiB", "12"} {
		_, err := run(context.Background(), "run", m["input.onnx"], "--memory-budget", v)
		if err == nil || !strings.Contains(err.Error(), "--memory-budget") {
			t.Errorf("--memory-budget %q: got %v, want an error naming the flag", v, err)
		}
	}
}

// TestGenerationBudget refuses, before the database is created, the
// generations of issue 25 that ran out of memory: a million workers, and
// degrees whose input pool alone passes the budget (1024 at any budget
// this machine has; 64 under 64 MiB).
func TestGenerationBudget(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		flag string
		is   error
	}{
		{"generate --workers 1000000", []string{"generate", "--max-ops", "1", "--workers", "1000000"}, "--workers", enumerate.ErrWorkers},
		{"build --workers 1000000", []string{"build", "--max-ops", "1", "--workers", "1000000"}, "--workers", enumerate.ErrWorkers},
		{"generate --degrees 1024", []string{"generate", "--ops", "parallel", "--degrees", "1024", "--max-ops", "1", "--memory-budget", "64GiB"}, "--degrees", budget.ErrExceeded},
		{"build --degrees 64", []string{"build", "--ops", "parallel", "--degrees", "64", "--max-ops", "2", "--memory-budget", "64MiB"}, "--degrees", budget.ErrExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "r.db")
			_, err := run(context.Background(), append(tc.args, "--db", db, "--no-progress")...)
			if !errors.Is(err, tc.is) || !strings.HasPrefix(err.Error(), tc.flag+": ") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v, want one line naming %s", err, tc.flag)
			}
			if _, err := os.Stat(db); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the database was created: %v", err)
			}
		})
	}
}
