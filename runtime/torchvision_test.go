package runtime

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// TestCUDAPlansTorchvision opens every export of the folder
// RULEBOOK_TORCHVISION_DIR names (all 80 classifiers when
// scripts/export_torchvision.py made it without names) on the kernel
// emulator and checks that no node would leave the GPU and that no
// convolution would leave cuDNN. It plans only: running the large models
// under the emulator takes minutes each. Without the folder it skips.
func TestCUDAPlansTorchvision(t *testing.T) {
	dir := os.Getenv("RULEBOOK_TORCHVISION_DIR")
	if dir == "" {
		t.Skip("set RULEBOOK_TORCHVISION_DIR to a scripts/export_torchvision.py folder to plan its models on the emulator")
	}
	folders, err := filepath.Glob(filepath.Join(dir, "*", "model.onnx"))
	if err != nil || len(folders) == 0 {
		t.Fatalf("no NAME/model.onnx in %s (%v)", dir, err)
	}
	emu := openEmulator(t)
	for _, path := range folders {
		name := filepath.Base(filepath.Dir(path))
		t.Run(name, func(t *testing.T) {
			m, _, err := Load(path, LoadOptions{Weights: WeightsFile})
			if err != nil {
				t.Fatal(err)
			}
			s, err := m.newCUDASession(emu, false, cudaOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if fb := s.Fallbacks(); len(fb) > 0 {
				t.Errorf("%d nodes run on the CPU:\n%s", len(fb), strings.Join(fb, "\n"))
			}
			for _, note := range s.Notes() {
				if strings.Contains(note, "im2col") {
					t.Errorf("a convolution leaves cuDNN: %s", note)
				}
			}
		})
	}
}
