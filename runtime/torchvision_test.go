package runtime

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// smallTorchvision are the torchvision classifiers CI runs (issue 16): one
// of each family that exports quickly, shufflenet's channel split and
// shuffle among them (Shape, Gather, Slice).
var smallTorchvision = []string{"squeezenet1_0", "shufflenet_v2_x0_5", "mobilenet_v3_small", "mnasnet0_5", "resnet18", "regnet_x_400mf", "efficientnet_b0"}

// TestTorchvisionExports: scripts/export_torchvision.py exports each model
// with random weights and PyTorch's output on a seeded image; the runtime
// loads it, runs it and matches PyTorch within 1e-4 relative (1e-5
// absolute) error.
func TestTorchvisionExports(t *testing.T) {
	if err := exec.Command("python3", "-c", "import torch, torchvision, onnx").Run(); err != nil {
		t.Skipf("python3 cannot import torch, torchvision and onnx (pip install -r scripts/requirements-bridge.txt): %v", err)
	}
	dir := t.TempDir()
	out, err := exec.Command("python3", append([]string{"../scripts/export_torchvision.py", dir}, smallTorchvision...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	for _, name := range smallTorchvision {
		folder := filepath.Join(dir, name)
		m, _, err := Load(filepath.Join(folder, "model.onnx"), LoadOptions{Weights: WeightsFile})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		data := filepath.Join(folder, "test_data_set_0")
		inputs, err := m.ReadInputs([]string{filepath.Join(data, "input_0.pb")})
		if err != nil {
			t.Fatal(err)
		}
		refs, err := m.ReadReferences([]string{filepath.Join(data, "output_0.pb")})
		if err != nil {
			t.Fatal(err)
		}
		e, err := m.Open(BackendCPU, 0)
		if err != nil {
			t.Fatal(err)
		}
		outs, err := e.Run(context.Background(), inputs)
		e.Close()
		if err == nil {
			err = m.CheckOutputs(outs, refs, Tolerance{RTol: 1e-4, ATol: 1e-5})
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	t.Log(strings.TrimSpace(string(out)))
}
