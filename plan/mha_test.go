package plan

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"rulebook/onnx"
	"rulebook/training"
)

// exportEncoderLayer exports nn.TransformerEncoderLayer (d_model 64, 4
// heads, sequence 8, batch_first) with torch.onnx (dynamo=False), traced
// at batch 2 with constant reshape targets, to argv[1].
const exportEncoderLayer = `
import sys, torch, torch.nn as nn
torch.manual_seed(0)
layer = nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.0, batch_first=True)
class Wrap(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = layer
    def forward(self, x):
        # Tracing the layer with its default is_causal fails in torch 2.x.
        return self.l(x, src_mask=None, is_causal=False)
torch.onnx.export(Wrap(), (torch.randn(2, 8, 64),), sys.argv[1], input_names=["x"], output_names=["y"], dynamo=False)
`

// TestTorchEncoderLayerTP: PyTorch's own encoder layer, whose attention
// projects q, k and v with one packed Linear (in_proj), plans at tp2 at a
// batch it was not traced at. The feed-forward pair is Megatron's
// (linear1 by columns, linear2 by rows). A column cut of the packed
// in_proj would give each device a mix of q, k and v, not heads, so the
// plan gathers it before the heads are split out: no product or softmax
// of the attention is cut.
func TestTorchEncoderLayerTP(t *testing.T) {
	needPython(t, "torch")
	path := filepath.Join(t.TempDir(), "layer.onnx")
	if out, err := exec.Command("python3", "-W", "ignore", "-c", exportEncoderLayer, path).CombinedOutput(); err != nil {
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
	s := Strategy{Kind: Grid, DP: 1, TP: 2, PP: 1, Microbatches: 1}
	r, err := Price(context.Background(), g, s, Options{Machine: machine(2)})
	if err != nil || r.Err != nil {
		t.Fatal(err, r.Err)
	}
	want := map[string]Style{"/l/linear1/MatMul": Colwise, "/l/linear2/MatMul": Rowwise}
	outProj := false // past the attention's out_proj, which may be cut
	for i, op := range g.Ops {
		l := r.Layouts[i]
		if st, ok := want[op.Name]; ok && l.Style != st {
			t.Errorf("%s: %s, want %s", op.Name, l.Style, st)
		}
		if !strings.HasPrefix(op.Name, "/l/self_attn/") {
			continue
		}
		outProj = outProj || op.Type == "Gemm"
		heads := op.Product == nil && (op.Type == "MatMul" || op.Type == "Softmax" || op.Type == "Reshape")
		if !outProj && heads && l.sliced() {
			t.Errorf("%s (%s) is cut (%s) behind the packed in_proj", op.Name, op.Type, l.Style)
		}
	}
}
