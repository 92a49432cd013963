package training

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"rulebook/onnx"
	"rulebook/runtime"
)

// exportAttention exports PyTorch's own attention modules with
// torch.onnx's TorchScript exporter (dynamo=False; the default exporter
// needs onnxscript): argv is the output folder, then one
// "file module batch_first traced_batch dynamic" group per file. The
// batch is dimension 0 with batch_first, else dimension 1.
const exportAttention = `
import sys, torch, torch.nn as nn
out, specs = sys.argv[1], sys.argv[2:]
seq, d, heads = 8, 64, 4
for i in range(0, len(specs), 5):
    name, kind, bf, batch, dyn = specs[i], specs[i+1], specs[i+2] == "1", int(specs[i+3]), specs[i+4] == "1"
    torch.manual_seed(0)
    if kind == "layer":
        inner = nn.TransformerEncoderLayer(d, heads, dim_feedforward=128, dropout=0.0, batch_first=bf)
        # Tracing the layer with its default is_causal fails in torch 2.x.
        call = lambda m, x: m(x, src_mask=None, is_causal=False)
    else:
        inner = nn.MultiheadAttention(d, heads, batch_first=bf)
        call = lambda m, x: m(x, x, x, need_weights=False)[0]
    class Wrap(nn.Module):
        def __init__(self, m, f):
            super().__init__()
            self.m, self.f = m, f
        def forward(self, x):
            return self.f(self.m, x)
    model = Wrap(inner, call).train(kind == "layer")
    x = torch.randn(batch, seq, d) if bf else torch.randn(seq, batch, d)
    kw = dict(input_names=["x"], output_names=["y"], dynamo=False)
    if dyn:
        axis = 0 if bf else 1
        kw["dynamic_axes"] = {"x": {axis: "batch"}, "y": {axis: "batch"}}
    torch.onnx.export(model, (x,), out + "/" + name, **kw)
`

// signature lists the shapes of a graph's products and softmaxes, in
// order, the attentions found (their heads), and its output's shape: what two exports of one module at one batch
// must agree on, whatever their value names.
func signature(g *Graph) []string {
	var sig []string
	for _, op := range g.Ops {
		switch op.Type {
		case "MatMul", "Gemm", "Softmax":
			sig = append(sig, fmt.Sprint(op.Type, g.ValueShape(op.Outputs[0])))
		}
	}
	for _, a := range g.Attentions() {
		sig = append(sig, fmt.Sprintf("attention batch %d heads %d seq %d×%d head %d", a.Batch, a.Heads, a.SeqQ, a.SeqK, a.HeadDim))
	}
	return append(sig, fmt.Sprint("y", g.ValueShape("y")))
}

// TestTorchAttentionExports: torch.onnx exports of nn.MultiheadAttention
// and nn.TransformerEncoderLayer, traced at one batch with constant
// Reshape targets or exported with it dynamic, infer at other batches
// the shapes that an export traced at those batches has, whichever axis
// the batch is (batch_first or not: the planner finds it). An export
// whose batch of 1 is merged with the heads cannot be re-derived and is
// refused with a RetraceError. At one batch, both layouts have the same
// forward and backward FLOPs.
func TestTorchAttentionExports(t *testing.T) {
	if err := exec.Command("python3", "-c", "import torch").Run(); err != nil {
		t.Skipf("python3 cannot import torch (pip install -r scripts/requirements-bridge.txt): %v", err)
	}
	dir := t.TempDir()
	batches := []int64{4, 16}
	type export struct {
		module  string
		bf      bool
		traced  int64
		dynamic bool
		refused bool // at the batches above, with a RetraceError
		// misfit: the export holds a constant traced at the dynamic
		// dimension 0, which its declared shapes do not tell.
		misfit bool
	}
	var cases []export
	for _, module := range []string{"mha", "layer"} {
		for _, bf := range []bool{true, false} {
			cases = append(cases,
				export{module, bf, 2, false, false, false},
				export{module, bf, 1, false, true, false},
				export{module, bf, 2, true, false, false})
		}
	}
	file := func(module string, bf bool, batch int64, dynamic bool) string {
		return fmt.Sprintf("%s_bf%v_%d_dyn%v.onnx", module, bf, batch, dynamic)
	}
	args := []string{"-W", "ignore", "-c", exportAttention, dir}
	flag := func(b bool) string { return map[bool]string{true: "1", false: "0"}[b] }
	add := func(module string, bf bool, batch int64, dynamic bool) {
		args = append(args, file(module, bf, batch, dynamic), module, flag(bf), fmt.Sprint(batch), flag(dynamic))
	}
	for _, c := range cases {
		add(c.module, c.bf, c.traced, c.dynamic)
	}
	for _, module := range []string{"mha", "layer"} {
		for _, bf := range []bool{true, false} {
			for _, b := range batches {
				add(module, bf, b, false)
			}
		}
	}
	if out, err := exec.Command("python3", args...).CombinedOutput(); err != nil {
		t.Fatalf("exporting with torch: %v\n%s", err, out)
	}
	load := func(t *testing.T, name string, batch int64) (*Graph, error) {
		t.Helper()
		m, err := onnx.ReadModel(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return FromONNX(m, name, batch)
	}
	for _, c := range cases {
		name := file(c.module, c.bf, c.traced, c.dynamic)
		t.Run(name, func(t *testing.T) {
			for _, b := range batches {
				g, err := load(t, name, b)
				if c.refused {
					if _, ok := errors.AsType[*runtime.RetraceError](err); !ok {
						t.Errorf("at %d: %v; want a RetraceError", b, err)
					}
					continue
				}
				if c.misfit {
					if err == nil || !errors.Is(err, ErrInvalid) {
						t.Errorf("at %d: %v; want the model refused", b, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("at %d: %v", b, err)
				}
				truth, err := load(t, file(c.module, c.bf, b, false), b)
				if err != nil {
					t.Fatalf("the export traced at %d: %v", b, err)
				}
				if len(g.Attentions()) != 1 {
					t.Errorf("at %d: %d attentions found, want 1", b, len(g.Attentions()))
				}
				if got, want := signature(g), signature(truth); !slices.Equal(got, want) {
					t.Errorf("at %d:\n got %v\nwant %v", b, got, want)
				}
			}
		})
	}
	for _, module := range []string{"mha", "layer"} {
		for _, b := range batches {
			t.Run(fmt.Sprintf("%s_flops_at_%d", module, b), func(t *testing.T) {
				var work [2]float64
				for i, bf := range []bool{true, false} {
					g, err := load(t, file(module, bf, 2, false), b)
					if err != nil {
						t.Fatal(err)
					}
					if want := map[bool]int{true: 0, false: 1}[bf]; g.BatchAxis != want {
						t.Errorf("batch_first=%v: batch axis %d, want %d", bf, g.BatchAxis, want)
					}
					work[i] = stepFLOPs(g)
				}
				if work[0] != work[1] {
					t.Errorf("FLOPs at batch %d: %g with batch_first, %g without", b, work[0], work[1])
				}
			})
		}
	}
}

// stepFLOPs is a graph's forward and backward FLOPs, less its
// transposes: batch_first=True wraps the same computation in two
// transposes to and from [seq, batch, embed].
func stepFLOPs(g *Graph) float64 {
	var f float64
	for _, op := range g.Ops {
		if op.Type != "Transpose" {
			f += op.Forward.FLOPs + op.Backward.FLOPs
		}
	}
	return f
}
