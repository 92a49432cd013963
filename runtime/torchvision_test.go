package runtime

import (
	"context"
	"path/filepath"
	"testing"

	"rulebook/internal/testfiles"
)

// TestTorchvisionExports: scripts/export_torchvision.py exports each model
// with random weights and PyTorch's output on a seeded image; the runtime
// loads it, runs it and matches PyTorch within 1e-4 relative (1e-5
// absolute) error.
func TestTorchvisionExports(t *testing.T) {
	dir := testfiles.ExportTorchvision(t, testfiles.SmallTorchvision...)
	for _, name := range testfiles.SmallTorchvision {
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
}
