package runtime

import (
	"errors"
	"math"
	"testing"

	"rulebook/internal/testfiles"
	"rulebook/onnx"
	"rulebook/runtime/cuda"
)

// sharedModel returns the path of a shared model (see testfiles.Shared).
func sharedModel(t testing.TB, file string) string {
	t.Helper()
	return testfiles.Shared(t, "models", file)
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

// openEmulator opens the kernel emulator for a test and closes it after;
// without a C++ compiler the test skips.
func openEmulator(t *testing.T) *cuda.Emulator {
	t.Helper()
	emu, err := cuda.OpenEmulator(t.TempDir())
	if errors.Is(err, cuda.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emu.Close() })
	return emu
}
