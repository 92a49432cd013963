package plan

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rulebook/cluster"
	"rulebook/internal/outfile"
	"rulebook/onnx"
	"rulebook/training"

	"rulebook/internal/testfiles"
)

// needPython skips unless python3 imports the bridge's packages
// (scripts/requirements-bridge.txt; .ci/run installs them).
func needPython(t *testing.T, modules string) {
	t.Helper()
	if err := exec.Command("python3", "-c", "import "+modules).Run(); err != nil {
		t.Skipf("python3 cannot import %s (pip install -r scripts/requirements-bridge.txt): %v", modules, err)
	}
}

// machine is n devices in one node, V100s as on summit.
func machine(n int) cluster.Machine {
	m, _ := cluster.Preset("summit", 1)
	m.DevicesPerNode, m.Name = n, "test"
	return m
}

// TestTorchPlansRun: tensor-parallel plans the planner writes for the
// small MLP and encoder run under DTensor on 2 and 4 gloo processes,
// and a data × tensor grid on 4, with outputs and gradients matching the
// unsharded modules within 1e-4 (scripts/torch_plan_run.py).
func TestTorchPlansRun(t *testing.T) {
	needPython(t, "torch")
	models := map[string]*onnx.Model{
		"mlp":   training.MLP(training.MLPConfig{Layers: 4, Width: 64}),
		"block": training.Transformer(training.TransformerConfig{Layers: 2, Hidden: 64, Heads: 4, FFN: 256, Seq: 8}),
	}
	for _, c := range []struct {
		model   string
		dp, tp  int
		modules int
	}{{"mlp", 1, 2, 4}, {"mlp", 1, 4, 4}, {"block", 1, 2, 12}, {"block", 1, 4, 12}, {"block", 2, 2, 12}} {
		g, err := training.FromONNX(models[c.model], c.model, 8)
		if err != nil {
			t.Fatal(err)
		}
		s := Strategy{Kind: Grid, DP: c.dp, TP: c.tp, PP: 1, Microbatches: 1}
		r, err := Price(context.Background(), g, s, Options{Machine: machine(c.dp * c.tp)})
		if err != nil {
			t.Fatal(err)
		}
		tp, err := (&Choice{Model: c.model, Chosen: r}).Torch(g)
		if err != nil {
			t.Fatal(err)
		}
		if len(tp.Modules) != c.modules {
			t.Errorf("%s %s: %d modules cut, want %d: %v", c.model, s, len(tp.Modules), c.modules, tp.Modules)
		}
		path := filepath.Join(t.TempDir(), "plan.torch.json")
		if err := outfile.Write(path, tp.Write); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		out, err := exec.Command("python3", "../scripts/torch_plan_run.py", path, "--model", c.model).CombinedOutput()
		if err != nil {
			t.Errorf("%s %s: %v\n%s", c.model, s, err, out)
			continue
		}
		t.Logf("%s %s: %s (%.1f s)", c.model, s, strings.TrimSpace(string(out)), time.Since(start).Seconds())
	}
}

// TestTorchPlanRefused: a plan naming a module the model lacks, or an
// unknown style, fails with one line.
func TestTorchPlanRefused(t *testing.T) {
	needPython(t, "torch")
	for text, want := range map[string]string{
		`{"format":"rulebook.torch-plan/1","world_size":2,"mesh":{"shape":[1,2],"dim_names":["dp","tp"]},"modules":{"layers.9":"colwise"}}`:  "module layers.9 is not in the mlp model",
		`{"format":"rulebook.torch-plan/1","world_size":2,"mesh":{"shape":[1,2],"dim_names":["dp","tp"]},"modules":{"layers.0":"diagonal"}}`: "unknown style 'diagonal'",
	} {
		path := filepath.Join(t.TempDir(), "bad.json")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("python3", "../scripts/torch_plan_run.py", path, "--model", "mlp").CombinedOutput()
		if err == nil || !strings.Contains(string(out), want) || strings.Count(strings.TrimSpace(string(out)), "\n") > 0 {
			t.Errorf("%s: %v, %q; want one line with %q", text, err, out, want)
		}
	}
}

// TestShardedONNXChecks: the IR-11 sharded export of a real model passes
// onnx.checker and loads in ONNX Runtime (scripts/check_sharding.py).
func TestShardedONNXChecks(t *testing.T) {
	needPython(t, "onnx, onnxruntime")
	path := filepath.Join(t.TempDir(), "squeeze.json")
	out, err := Run(context.Background(), Request{Model: testfiles.Shared(t, "models", "squeezenet1_1-full.onnx"), Machine: "summit:1", Batch: 6, Strategy: "grid", Out: path})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Written) != 3 {
		t.Fatalf("wrote %v", out.Written)
	}
	check, err := exec.Command("python3", "../scripts/check_sharding.py", strings.TrimSuffix(path, ".json")+".sharded.onnx").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, check)
	}
	t.Log(strings.TrimSpace(string(check)))
}

// TestExportedModulePaths: PyTorch's own export of the reference modules
// (scripts/torch_models.py) names its nodes so that the module paths the
// planner reads from them are the ones it writes into torch plans for the
// Go-built workloads.
func TestExportedModulePaths(t *testing.T) {
	needPython(t, "torch, onnx")
	dir := t.TempDir()
	script := `import sys, torch
sys.path.insert(0, "../scripts")
from torch_models import SMALL
for name, (make, inputs) in SMALL.items():
    torch.onnx.export(make().eval(), (inputs(2),), sys.argv[1] + "/" + name + ".onnx", opset_version=17, dynamo=False)
`
	if out, err := exec.Command("python3", "-W", "ignore", "-c", script, dir).CombinedOutput(); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	built := map[string]*onnx.Model{
		"mlp":   training.MLP(training.MLPConfig{Layers: 4, Width: 64}),
		"block": training.Transformer(training.TransformerConfig{Layers: 2, Hidden: 64, Heads: 4, FFN: 256, Seq: 8}),
	}
	for name, m := range built {
		exported, err := onnx.ReadModel(filepath.Join(dir, name+".onnx"))
		if err != nil {
			t.Fatal(err)
		}
		modules := map[string]bool{}
		for _, n := range exported.Graph.Nodes {
			modules[training.ModulePath(n.Name)] = true
		}
		g, err := training.FromONNX(m, name, 8)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range g.Ops {
			if op.Product != nil && !modules[op.Module] {
				t.Errorf("%s: the Go builder's module %s (node %s) is not a module of PyTorch's export", name, op.Module, op.Name)
			}
		}
	}
}

// TestBuiltinMLPPlanRuns: a tensor-parallel plan of the built-in mlp (16
// layers) runs in the bridge, which builds its small MLP at the plan's
// depth; it used to refuse "module layers.10 is not in the mlp model".
func TestBuiltinMLPPlanRuns(t *testing.T) {
	dir := t.TempDir()
	machine := machineFile(t, dir, "two", "1", "2", "1e12", "1e10")
	path := filepath.Join(dir, "mlp.json")
	out, err := Run(context.Background(), Request{Model: "mlp", Machine: machine, Batch: 8, Strategy: "tp", Out: path, EmitTorch: true})
	if err != nil {
		t.Fatal(err)
	}
	torch := strings.TrimSuffix(path, ".json") + ".torch.json"
	if len(out.Written) != 4 || out.Written[3] != torch {
		t.Fatalf("wrote %v", out.Written)
	}
	needPython(t, "torch")
	run, err := exec.Command("python3", "../scripts/torch_plan_run.py", torch, "--model", "mlp").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, run)
	}
	t.Log(strings.TrimSpace(string(run)))
}
