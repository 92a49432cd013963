package runtime

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"rulebook/onnx"
)

// sharedModels holds the real torchvision / PyTorch exports: ../shared
// beside the repository (this package is one level down), or
// $RULEBOOK_SHARED.
func sharedModels() string {
	if d := os.Getenv("RULEBOOK_SHARED"); d != "" {
		return filepath.Join(d, "models")
	}
	return filepath.Join("..", "..", "shared", "models")
}

// missing skips outside CI; in CI, where shared/ is always beside the
// clone, a missing file is a failure.
func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf(format+" (CI expects ../shared beside the repository)", args...)
	}
	t.Skipf(format+" (set RULEBOOK_SHARED to the shared folder)", args...)
}

// sharedModel returns the path of a shared model, skipping (or failing in
// CI) when it is absent.
func sharedModel(t testing.TB, file string) string {
	t.Helper()
	path := filepath.Join(sharedModels(), file)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		missing(t, "%s not present", path)
	} else if err != nil {
		t.Fatal(err)
	}
	return path
}

// readTensorFile reads a serialized TensorProto (a test data file) as a
// float32 tensor.
func readTensorFile(t testing.TB, path string) *Tensor {
	t.Helper()
	pt, err := onnx.ReadTensor(path)
	if err != nil {
		t.Fatal(err)
	}
	data, err := tensorFloats(pt)
	if err != nil {
		t.Fatal(err)
	}
	return &Tensor{Shape: pt.Shape(), Data: data}
}

// allFinite reports the index of the first NaN or infinity, or -1.
func firstNonFinite(data []float32) int {
	for i, x := range data {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return i
		}
	}
	return -1
}
