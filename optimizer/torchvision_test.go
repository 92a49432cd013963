package optimizer

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"rulebook/onnx"
	"rulebook/runtime"
)

// smallTorchvision are the torchvision classifiers CI optimizes (issue
// 16), the runtime's CI set: one of each family that exports quickly.
var smallTorchvision = []string{"squeezenet1_0", "shufflenet_v2_x0_5", "mobilenet_v3_small", "mnasnet0_5", "resnet18", "regnet_x_400mf", "efficientnet_b0"}

// TestOptimizeTorchvision optimizes PyTorch's exports of torchvision
// classifiers (scripts/export_torchvision.py, random weights) with the
// released rulebook: every rewritten model computes the original's
// outputs within 1e-4, and every opaque node has its reason counted.
func TestOptimizeTorchvision(t *testing.T) {
	if testing.Short() {
		t.Skip("exports seven models with PyTorch")
	}
	if err := exec.Command("python3", "-c", "import torch, torchvision, onnx").Run(); err != nil {
		t.Skipf("python3 cannot import torch, torchvision and onnx (pip install -r scripts/requirements-bridge.txt): %v", err)
	}
	dir := t.TempDir()
	if out, err := exec.Command("python3", append([]string{"../scripts/export_torchvision.py", dir}, smallTorchvision...)...).CombinedOutput(); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	rs, err := LoadBundle(bundle3Ops)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range smallTorchvision {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name, "model.onnx")
			m, err := onnx.ReadModel(path)
			if err != nil {
				t.Fatal(err)
			}
			rt, _, err := runtime.Load(path, runtime.LoadOptions{Weights: runtime.WeightsFile})
			if err != nil {
				t.Fatal(err)
			}
			g, err := FromONNX(m, rt)
			if err != nil {
				t.Fatal(err)
			}
			opt := DefaultOptions()
			opt.Budget, opt.Timeout = 30, time.Minute
			res, err := Optimize(context.Background(), g, rs, opt)
			if err != nil {
				t.Fatal(err)
			}
			if res.After > res.Before {
				t.Errorf("cost %.3f -> %.3f", res.Before, res.After)
			}
			_, rt2 := written(t, res.Graph)
			assertSameOutputs(t, rt, rt2)
			share := g.OpaqueShare()
			t.Logf("%d of %d nodes opaque (%d refused, uncovered %v); cost %.3f -> %.3f, %d expanded in %s",
				share.Opaque, share.Nodes, share.Refused, share.UncoveredOperators, res.Before, res.After, res.Explored, res.Elapsed.Round(time.Millisecond))
		})
	}
}
