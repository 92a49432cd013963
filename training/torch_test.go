package training

import (
	"encoding/json"
	"math"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"rulebook/onnx"
)

// TestSavedAgainstPyTorch: the saved activations counted for BERT-Large's
// encoder layer (hidden 1024, 16 heads, FFN 4096, sequence 512) are within
// 10% of what PyTorch's saved-tensor hooks see on its twin
// (scripts/saved_tensors.py), with attention as written and fused, for the
// Go-built layer and for torch.onnx's export of the twin (whose attention
// and GELU the planner must find as written there).
func TestSavedAgainstPyTorch(t *testing.T) {
	if err := exec.Command("python3", "-c", "import torch").Run(); err != nil {
		t.Skipf("python3 cannot import torch (pip install -r scripts/requirements-bridge.txt): %v", err)
	}
	cfg := TransformerConfig{Layers: 1, Hidden: 1024, Heads: 16, FFN: 4096, Seq: 512}
	const batch = 1
	export := filepath.Join(t.TempDir(), "block.onnx")
	args := []string{"-W", "ignore", "../scripts/saved_tensors.py", "--export", export}
	for _, a := range []struct {
		name string
		v    int64
	}{{"hidden", cfg.Hidden}, {"heads", cfg.Heads}, {"ffn", cfg.FFN}, {"seq", cfg.Seq}, {"batch", batch}} {
		args = append(args, "--"+a.name, strconv.FormatInt(a.v, 10))
	}
	out, err := exec.Command("python3", args...).Output()
	if err != nil {
		t.Fatalf("scripts/saved_tensors.py: %v", err)
	}
	var torch map[string]float64
	if err := json.Unmarshal(out, &torch); err != nil {
		t.Fatalf("scripts/saved_tensors.py printed %q: %v", out, err)
	}
	exported, err := onnx.ReadModel(export)
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]*onnx.Model{"built": Transformer(cfg), "exported": exported} {
		g, err := FromONNX(m, name, batch)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			mode string
			g    *Graph
		}{{"unfused", g}, {"fused", g.FuseAttention()}} {
			got, want := c.g.SavedBytes(), torch[c.mode]
			t.Logf("%s, %s: planner %.2f MB, PyTorch %.2f MB per layer and sequence", name, c.mode, got/1e6, want/1e6)
			if want <= 0 || math.Abs(got-want) > 0.10*want {
				t.Errorf("%s, %s: planner saves %.0f bytes, PyTorch %.0f: more than 10%% apart", name, c.mode, got, want)
			}
		}
	}
}
