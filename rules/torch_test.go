package rules_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os/exec"
	"testing"

	"rulebook/rules"
)

// torchKernels computes, in float64, PyTorch's batch normalisation in
// training (affine=False) and the softmax weights of its
// scaled_dot_product_attention, for the inputs on stdin.
const torchKernels = `
import json, sys, torch
import torch.nn.functional as F
a = json.load(sys.stdin)
t = lambda v: torch.tensor(v["data"], dtype=torch.float64).reshape(v["shape"])
x, q, k = t(a["x"]), t(a["q"]), t(a["k"])
bn = F.batch_norm(x, None, None, training=True, eps=1e-5)
# The weights: SDPA's output with the identity as values.
eye = torch.eye(k.shape[2], dtype=torch.float64).expand(q.shape[0], q.shape[1], -1, -1)
w = F.scaled_dot_product_attention(q, k, eye)
json.dump({"bn": bn.flatten().tolist(), "attn": w.flatten().tolist()}, sys.stdout)
`

// TestFloatKernelsAgainstTorch holds the float kernels that stand for
// PyTorch's operators to PyTorch's own: batchnorm to F.batch_norm in
// training, attn_softmax to scaled_dot_product_attention's weights.
func TestFloatKernelsAgainstTorch(t *testing.T) {
	if err := exec.Command("python3", "-c", "import torch").Run(); err != nil {
		t.Skipf("python3 cannot import torch (pip install -r scripts/requirements-bridge.txt): %v", err)
	}
	r := rand.New(rand.NewPCG(9, 10))
	x := randomTensor(r, "3x4x2x3")
	q, k := randomTensor(r, "2x3x4x5"), randomTensor(r, "2x3x6x5")
	for i := range q.Data {
		q.Data[i] *= 4 // scores large enough that the softmax is far from uniform
	}
	type tensor struct {
		Shape []int     `json:"shape"`
		Data  []float64 `json:"data"`
	}
	as := func(x *rules.FloatTensor) tensor { return tensor{x.Shape.DimList(), x.Data} }
	in, err := json.Marshal(map[string]tensor{"x": as(x), "q": as(q), "k": as(k)})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", "-c", torchKernels)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	var want struct{ BN, Attn []float64 }
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatalf("reading torch's output: %v", err)
	}
	bn, err := evalFloat(t, "(batchnorm ?a)", []*rules.FloatTensor{x})
	if err != nil {
		t.Fatal(err)
	}
	attn, err := evalFloat(t, "(attn_softmax ?a ?b)", []*rules.FloatTensor{q, k})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want []float64
	}{{"batchnorm", bn.Data, want.BN}, {"attn_softmax", attn.Data, want.Attn}} {
		if len(c.got) != len(c.want) {
			t.Fatalf("%s: %d values, torch %d", c.name, len(c.got), len(c.want))
		}
		if d := maxDiff(c.got, c.want); d > 1e-12 {
			t.Errorf("%s differs from torch's by up to %g", c.name, d)
		}
		if lo, hi := spread(c.want); hi-lo < 0.1 {
			t.Errorf("%s: torch's values span only [%g, %g], no reference", c.name, lo, hi)
		}
	}
}

func spread(v []float64) (lo, hi float64) {
	lo, hi = v[0], v[0]
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}
