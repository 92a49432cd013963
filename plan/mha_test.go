package plan

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rulebook/onnx"
	"rulebook/training"
)

// exportTorchLayer exports the bridge's twin of nn.TransformerEncoderLayer
// (scripts/torch_models.py's torch_layer: d_model 64, 4 heads, sequence
// 8, batch_first, module path l) with torch.onnx (dynamo=False), traced at
// batch 2 with constant reshape targets, to argv[1].
const exportTorchLayer = `
import sys, torch
sys.path.insert(0, "../scripts")
from torch_models import SMALL
make, inputs = SMALL["torch_layer"]
torch.manual_seed(0)
torch.onnx.export(make().eval(), (inputs(2),), sys.argv[1], input_names=["x"], output_names=["y"], dynamo=False)
`

// torchLayer exports and reads the twin at batch 8, a batch it was not
// traced at.
func torchLayer(t *testing.T) (*onnx.Model, *training.Graph) {
	t.Helper()
	needPython(t, "torch, onnx")
	path := filepath.Join(t.TempDir(), "layer.onnx")
	if out, err := exec.Command("python3", "-W", "ignore", "-c", exportTorchLayer, path).CombinedOutput(); err != nil {
		t.Fatalf("exporting with torch: %v\n%s", err, out)
	}
	m, err := onnx.ReadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := training.FromONNX(m, "layer", 8)
	if err != nil {
		t.Fatal(err)
	}
	return m, g
}

// TestTorchEncoderLayerTP: PyTorch's own encoder layer, whose attention
// projects q, k and v with one packed Linear (in_proj, [64, 192]), is cut
// by heads at tp 2 and 4: the packed product by columns within each of
// its three blocks (Groups 3, so that a device holds block i of q, of k
// and of v, not all of q and part of k), the heads followed through
// torch.onnx's unflatten, Gathers and [seq, batch·heads, head] reshapes
// to the scores' heads axis, out_proj by rows; the feed-forward pair is
// Megatron's. Nothing is gathered. The IR 11 annotations say the same,
// the packed weight's axis as 3 whole blocks each cut tp ways, and q's
// heads merged with the batch ([batch·heads, s, head]) as the batch cut dp
// ways, each batch's heads tp ways; onnx.checker accepts them.
func TestTorchEncoderLayerTP(t *testing.T) {
	model, g := torchLayer(t)
	for _, c := range []struct{ dp, tp int }{{1, 2}, {1, 4}, {2, 2}} {
		dp, tp := c.dp, c.tp
		s := Strategy{Kind: Grid, DP: dp, TP: tp, PP: 1, Microbatches: 1}
		r, err := Price(context.Background(), g, s, Options{Machine: machine(dp * tp)})
		if err != nil || r.Err != nil {
			t.Fatal(err, r.Err)
		}
		want := map[string]OpLayout{
			"/l/self_attn/MatMul":   {Style: Colwise, Axis: 2, Groups: 3, BackwardAllReduce: true},
			"/l/self_attn/Add":      {Style: Sharded, Axis: 2, Groups: 3},
			"/l/self_attn/MatMul_1": {Style: Sharded, Axis: 1}, // scores [b, heads, s, s]
			"/l/self_attn/Softmax":  {Style: Sharded, Axis: 1},
			"/l/self_attn/MatMul_2": {Style: Sharded, Axis: 1},
			"/l/self_attn/Gemm":     {Style: Rowwise, ForwardAllReduce: true},
			"/l/linear1/MatMul":     {Style: Colwise, Axis: 2, BackwardAllReduce: true},
			"/l/linear2/MatMul":     {Style: Rowwise, ForwardAllReduce: true},
		}
		var packedWeight string
		for i, op := range g.Ops {
			l := r.Layouts[i]
			if l.GatherInputs {
				t.Errorf("tp%d: %s (%s) gathers its input", tp, op.Name, op.Type)
			}
			if w, ok := want[op.Name]; ok {
				if l != w {
					t.Errorf("tp%d: %s is %+v, want %+v", tp, op.Name, l, w)
				}
				delete(want, op.Name)
			}
			if op.Name == "/l/self_attn/MatMul" {
				packedWeight = op.Product.Weight
			}
		}
		if len(want) != 0 {
			t.Errorf("tp%d: operators not in the export: %v", tp, want)
		}
		packedAnnotated(t, model, g, r, packedWeight, dp, tp)
	}
}

// packedAnnotated checks the packed in_proj weight's IR 11 sharding: axis
// 1 of [64, 192] as 3 whole blocks, each of 64 cut tp ways (on every
// data-parallel replica); q's heads merged with the batch, [8·4, 8, 16],
// as the 8 batches cut dp ways and each one's 4 heads tp ways; and that
// onnx.checker and ONNX Runtime accept the annotated model
// (scripts/check_sharding.py).
func packedAnnotated(t *testing.T, model *onnx.Model, g *training.Graph, r *Result, weight string, dp, tp int) {
	t.Helper()
	sharded, err := (&Choice{Model: g.Model, Chosen: r}).Sharded(model, g)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]onnx.ShardedDim{
		weight:                              {Axis: 1, DimValue: 64, NumShards: int64(tp), Outer: []onnx.SimpleShardedDim{{DimValue: 3, NumShards: 1}}},
		"/l/self_attn/Transpose_2_output_0": {Axis: 0, DimValue: 4, NumShards: int64(tp), Outer: []onnx.SimpleShardedDim{{DimValue: 8, NumShards: int64(dp)}}},
	}
	for _, n := range sharded.Graph.Nodes {
		for _, spec := range n.DeviceConfigurations[0].Shardings {
			w, ok := want[spec.TensorName]
			if !ok {
				continue
			}
			delete(want, spec.TensorName)
			shards := w.NumShards * w.Outer[0].NumShards // one device or group each
			if d := spec.ShardedDims; len(d) != 1 || !slices.Equal(d[0].Outer, w.Outer) || d[0].Axis != w.Axis || d[0].DimValue != w.DimValue || d[0].NumShards != w.NumShards || int64(len(spec.Devices)) != shards {
				t.Errorf("dp%d×tp%d: %s annotated %+v on %v, want %+v in %d shards", dp, tp, spec.TensorName, d, spec.Devices, w, shards)
			}
		}
	}
	if len(want) != 0 {
		t.Errorf("dp%d×tp%d: not annotated: %v", dp, tp, want)
	}
	path := filepath.Join(t.TempDir(), "layer.sharded.onnx")
	if err := onnx.WriteModel(path, sharded); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("python3", "../scripts/check_sharding.py", path).CombinedOutput(); err != nil {
		t.Errorf("dp%d×tp%d: check_sharding: %v\n%s", dp, tp, err, strings.TrimSpace(string(out)))
	}
}

// exportEncoderLayer exports nn.TransformerEncoderLayer (d_model 64, 4
// heads, sequence 8) with torch.onnx (dynamo=False), traced at batch 2
// with constant reshape targets, to argv[1]: batch_first unless argv[2]
// is "seq_first", where the input is [seq, batch, embed].
const exportEncoderLayer = `
import sys, torch, torch.nn as nn
torch.manual_seed(0)
bf = sys.argv[2] != "seq_first"
layer = nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.0, batch_first=bf)
class Wrap(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = layer
    def forward(self, x):
        # Tracing the layer with its default is_causal fails in torch 2.x.
        return self.l(x, src_mask=None, is_causal=False)
x = torch.randn(2, 8, 64) if bf else torch.randn(8, 2, 64)
torch.onnx.export(Wrap(), (x,), sys.argv[1], input_names=["x"], output_names=["y"], dynamo=False)
`

// TestSeqFirstBatchCut: an encoder layer exported with batch_first=False
// ([seq, batch, embed]) is planned at its batch: dp cuts axis 1 of its
// input and output, in plan.json's degrees and in the IR-11 annotations,
// and the step's compute matches the batch_first export's (within 5%:
// batch_first wraps the same layer in two transposes).
func TestSeqFirstBatchCut(t *testing.T) {
	needPython(t, "torch")
	dir := t.TempDir()
	compute := map[string]float64{}
	for _, layout := range []string{"batch_first", "seq_first"} {
		path := filepath.Join(dir, layout+".onnx")
		if out, err := exec.Command("python3", "-W", "ignore", "-c", exportEncoderLayer, path, layout).CombinedOutput(); err != nil {
			t.Fatalf("exporting with torch: %v\n%s", err, out)
		}
		req := Request{Model: path, Machine: "h100:1x2", Batch: 8, Strategy: "dp", Precision: "fp32", Profile: NoProfile}
		out, err := Run(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		compute[layout] = out.Choice.Chosen.Time.Compute
		if layout != "seq_first" {
			continue
		}
		f := out.Choice.NewFile(out.Graph)
		for _, op := range f.Operators {
			if op.Name == out.Graph.Ops[len(out.Graph.Ops)-1].Name && (len(op.Degrees) != 3 || op.Degrees[1] != 2 || op.Degrees[0] != 1) {
				t.Errorf("%s: output degrees %v, want [1 2 1]", op.Name, op.Degrees)
			}
		}
		if k := out.Graph.BatchAxisOf("x"); k != 1 {
			t.Errorf("input x: batch axis %d, want 1", k)
		}
	}
	if a, b := compute["batch_first"], compute["seq_first"]; b > a || a-b > 0.05*a {
		t.Errorf("simulated compute at batch 8: %g s batch_first, %g s seq_first", a, b)
	}
}
