package testfiles

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// SmallTorchvision are the torchvision classifiers CI exports and runs
// (issue 16): one of each family that exports quickly, shufflenet's
// channel split and shuffle among them (Shape, Gather, Slice).
var SmallTorchvision = []string{"squeezenet1_0", "shufflenet_v2_x0_5", "mobilenet_v3_small", "mnasnet0_5", "resnet18", "regnet_x_400mf", "efficientnet_b0"}

// ExportTorchvision exports torchvision classifiers with PyTorch
// (scripts/export_torchvision.py: random weights, PyTorch's output on a
// seeded image) into a temporary folder, NAME/model.onnx and
// NAME/test_data_set_0 each, and returns it. It skips the test when
// python3 cannot import torch, torchvision and onnx, or fails it in CI,
// which installs them.
func ExportTorchvision(t testing.TB, names ...string) string {
	t.Helper()
	if err := exec.Command("python3", "-c", "import torch, torchvision, onnx").Run(); err != nil {
		const why = "python3 cannot import torch, torchvision and onnx (pip install -r scripts/requirements-bridge.txt): %v"
		if os.Getenv("CI") != "" {
			t.Fatalf(why, err)
		}
		t.Skipf(why, err)
	}
	root, _ := repoRoot()
	script := filepath.Join(root, "scripts", "export_torchvision.py")
	dir := t.TempDir()
	if out, err := exec.Command("python3", append([]string{script, dir}, names...)...).CombinedOutput(); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	return dir
}
