package plan

import (
	"context"
	"errors"
	"fmt"
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

// exportSmall writes PyTorch's own torch.onnx export of the bridge's
// small modules (scripts/torch_models.py: an MLP of 4 layers, an encoder
// of 2 layers whose attention reshapes q, k and v to heads, a CNN of two
// convolutions, a global average pool and a Linear) into dir, at
// batch 1 (the planner takes a reshape traced at batch 1 to its batch),
// and again with a dynamic batch (NAME_dynamic.onnx), whose reshapes to
// heads take shapes computed from Shape.
func exportSmall(t *testing.T, dir string) {
	t.Helper()
	script := `import sys, torch
sys.path.insert(0, "../scripts")
from torch_models import SMALL
for name, (make, inputs) in SMALL.items():
    torch.onnx.export(make().eval(), (inputs(1),), sys.argv[1] + "/" + name + ".onnx", opset_version=17, dynamo=False)
    # a dynamic batch keeps the shape arithmetic (Shape, Gather, Concat)
    torch.onnx.export(make().eval(), (inputs(1),), sys.argv[1] + "/" + name + "_dynamic.onnx", opset_version=17, dynamo=False,
                      input_names=["x"], dynamic_axes={"x": {0: "batch"}})
`
	if out, err := exec.Command("python3", "-W", "ignore", "-c", script, dir).CombinedOutput(); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
}

// writeTorchPlan writes tp for the bridge's module named model.
func writeTorchPlan(t *testing.T, tp *TorchPlan, model string) string {
	t.Helper()
	tp.Model = model
	path := filepath.Join(t.TempDir(), "plan.torch.json")
	if err := outfile.Write(path, tp.Write); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTorchPlansRun: the planner's tensor-parallel plans run under
// DTensor on 2 and 4 gloo processes, with outputs and gradients matching
// the unsharded modules within 1e-4 (scripts/torch_plan_run.py, which
// runs the plans of one world size on one set of processes). The models:
//   - PyTorch's own torch.onnx exports of an MLP and of an encoder whose
//     heads are cut through its constant reshapes (Megatron's plan: q, k,
//     v, f1 by columns, o, f2 by rows), at tp 2 and 4 and a 2 × 2 grid,
//     and the encoder exported with a dynamic batch;
//   - the Go builder's encoder;
//   - the shared bert_base (a 12-layer export), on the bridge's encoder
//     of its architecture at width 64;
//   - the built-in mlp (16 layers of width 8192), planned by Run with
//     --emit torch, on its twin at width 64; the bridge used to refuse
//     it ("module layers.10 is not in the mlp model");
//   - PyTorch's own nn.TransformerEncoderLayer (torch_layer, exported with
//     a dynamic batch), whose packed in_proj is cut by heads (the bridge's
//     heads style; plan.TestTorchEncoderLayerTP), at tp 2 and 4 and a
//     2 × 2 grid;
//   - the joint search's plans on the shipped parallel version, for the
//     exported MLP (tp 2), encoder (2 × 2) and CNN (dp 2 and 4: data
//     parallel, no module cut; at tp 2 the search replicates every
//     operator of so small a CNN, and DTensor's styles would take its
//     Linear only).
func TestTorchPlansRun(t *testing.T) {
	needPython(t, "torch, onnx")
	dir := t.TempDir()
	exportSmall(t, dir)
	models := map[string]*onnx.Model{
		"built block": training.Transformer(training.TransformerConfig{Layers: 2, Hidden: 64, Heads: 4, FFN: 256, Seq: 8}),
	}
	for _, name := range []string{"mlp", "block", "block_dynamic", "torch_layer_dynamic", "cnn"} {
		m, err := onnx.ReadModel(filepath.Join(dir, name+".onnx"))
		if err != nil {
			t.Fatal(err)
		}
		models["exported "+name] = m
	}
	bert, err := onnx.ReadModel(testfiles.Shared(t, "models", "bert_base.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	models["shared bert_base"] = bert
	var plans []string
	for _, c := range []struct {
		source, model string
		dp, tp        int
		want          map[string]string
		twin          string // the bridge's module it runs on
		joint         bool   // the joint search's plan, on the shipped parallel version
	}{
		{"exported", "mlp", 1, 2, alternating(4), "mlp", false},
		{"exported", "mlp", 1, 4, alternating(4), "mlp", false},
		{"exported", "block", 1, 2, megatron(2), "block", false},
		{"exported", "block", 1, 4, megatron(2), "block", false},
		{"exported", "block", 2, 2, megatron(2), "block", false},
		{"exported", "block_dynamic", 1, 2, megatron(2), "block", false},
		{"built", "block", 1, 2, megatron(2), "block", false},
		{"shared", "bert_base", 1, 2, megatron(12), "block", false},
		{"exported", "torch_layer_dynamic", 1, 2, headsLayer, "torch_layer", false},
		{"exported", "torch_layer_dynamic", 1, 4, headsLayer, "torch_layer", false},
		{"exported", "torch_layer_dynamic", 2, 2, headsLayer, "torch_layer", false},
		{"exported", "mlp", 1, 2, alternating(4), "mlp", true},
		{"exported", "mlp", 1, 4, alternating(4), "mlp", true},
		{"exported", "block", 1, 2, megatron(2), "block", true},
		{"exported", "block", 2, 2, megatron(2), "block", true},
		{"exported", "cnn", 2, 1, map[string]string{}, "cnn", true},
		{"exported", "cnn", 4, 1, map[string]string{}, "cnn", true},
	} {
		name := c.source + " " + c.model
		g, err := training.FromONNX(models[name], c.model, 8)
		if err != nil {
			t.Fatal(err)
		}
		tp, err := torchPlan(t, g, c.dp, c.tp)
		if c.joint {
			name += " (joint)"
			tp, err = jointTorchPlan(t, g, c.dp, c.tp)
		}
		if err != nil {
			t.Fatalf("%s dp%d×tp%d: %v", name, c.dp, c.tp, err)
		}
		if err := sameModules(tp.Modules, c.want); err != nil {
			t.Errorf("%s dp%d×tp%d: %v", name, c.dp, c.tp, err)
		}
		plans = append(plans, writeTorchPlan(t, tp, c.twin))
	}
	if err := cnnJointCutsNothing(t, models["exported cnn"]); err != nil {
		t.Error(err)
	}
	for _, devices := range []string{"2", "4"} {
		plans = append(plans, builtinMLPPlan(t, devices))
	}
	start := time.Now()
	out, err := exec.Command("python3", append([]string{"../scripts/torch_plan_run.py"}, plans...)...).CombinedOutput()
	text := strings.TrimSpace(string(out))
	if err != nil || strings.Count(text, "outputs and gradients match") != len(plans) {
		t.Fatalf("%d plans: %v\n%s", len(plans), err, text)
	}
	t.Logf("%d plans (%.1f s):\n%s", len(plans), time.Since(start).Seconds(), text)
}

// cnnJointCutsNothing checks that the CNN's joint plan is data parallel
// only: at tp 2 the joint search on the shipped version cuts no operator
// (the version proves its convolutions' channel cuts, but at 16 and 32
// channels the gathers cost more than the cut saves), so the degree is
// refused.
func cnnJointCutsNothing(t *testing.T, m *onnx.Model) error {
	t.Helper()
	g, err := training.FromONNX(m, "cnn", 8)
	if err != nil {
		return err
	}
	if _, err := jointTorchPlan(t, g, 1, 2); !errors.Is(err, ErrCutsNothing) {
		return fmt.Errorf("cnn joint tp2: %v, want %v", err, ErrCutsNothing)
	}
	return nil
}

// headsLayer is the torch plan of nn.TransformerEncoderLayer: its
// attention cut by heads, its feed-forward pair Megatron's.
var headsLayer = map[string]string{"l.self_attn": HeadsStyle, "l.linear1": "colwise", "l.linear2": "rowwise"}

// builtinMLPPlan plans the built-in mlp on one node of the given devices
// with Run, --strategy tp and --emit torch, and returns the torch plan.
func builtinMLPPlan(t *testing.T, devices string) string {
	t.Helper()
	dir := t.TempDir()
	machine := machineFile(t, dir, "node", "1", devices, "1e12", "1e10")
	path := filepath.Join(dir, "mlp.json")
	out, err := Run(context.Background(), Request{Model: "mlp", Machine: machine, Batch: 8, Strategy: "tp", Out: path, Emit: "torch"})
	if err != nil {
		t.Fatal(err)
	}
	torch := strings.TrimSuffix(path, ".json") + ".torch.json"
	if len(out.Written) != 4 || out.Written[3] != torch {
		t.Fatalf("wrote %v", out.Written)
	}
	return torch
}

// TestTorchPlanRefused: a plan naming a module the model lacks, an
// unknown style, or more processes than a runner starts (a plan for a
// cluster) fails with one line, before any process starts.
func TestTorchPlanRefused(t *testing.T) {
	needPython(t, "torch")
	for text, want := range map[string]string{
		`{"format":"rulebook.torch-plan/1","world_size":2,"mesh":{"shape":[1,2],"dim_names":["dp","tp"]},"modules":{"layers.9":"colwise"}}`:  "module layers.9 is not in the mlp model",
		`{"format":"rulebook.torch-plan/1","world_size":2,"mesh":{"shape":[1,2],"dim_names":["dp","tp"]},"modules":{"layers.0":"diagonal"}}`: "unknown style 'diagonal'",
		`{"format":"rulebook.torch-plan/1","world_size":96,"mesh":{"shape":[1,96],"dim_names":["dp","tp"]},"modules":{}}`:                    "world_size 96, want 1 to 16 processes",
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
	exportSmall(t, dir)
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
