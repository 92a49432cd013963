package runtime

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"rulebook/internal/testfiles"
)

// TestTorchvisionExports: scripts/export_torchvision.py exports each model
// with random weights and PyTorch's output on a seeded image; the runtime
// loads it, runs it and matches PyTorch within 1e-4 relative (1e-5
// absolute) error. A ViT is among them: torchvision zero-initialises its
// head, which the export fills, since a constant reference (refused here)
// would match anything that outputs the bias.
func TestTorchvisionExports(t *testing.T) {
	names := append(slices.Clone(testfiles.SmallTorchvision), "vit_b_32")
	dir := testfiles.ExportTorchvision(t, names...)
	for _, name := range names {
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
		for _, ref := range refs {
			if len(ref.Data) > 1 && !slices.ContainsFunc(ref.Data, func(v float32) bool { return v != ref.Data[0] }) {
				t.Fatalf("%s: PyTorch's output is constant (%g): no reference", name, ref.Data[0])
			}
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
