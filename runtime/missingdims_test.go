package runtime

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestMissingDims: a symbolic input dimension without a value is refused
// with a MissingDimsError naming it, which callers find with errors.As.
func TestMissingDims(t *testing.T) {
	relu := [][]byte{pbNode("Relu", []string{"x"}, []string{"y"})}
	model := pbModel(13, pbGraph(relu, nil, [][]byte{pbValueInfo("x", "N", 4)}, [][]byte{pbValueInfo("y")}))
	path := filepath.Join(t.TempDir(), "symbolic.onnx")
	if err := os.WriteFile(path, model, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := Load(path, LoadOptions{Weights: WeightsRandom})
	var missing *MissingDimsError
	if !errors.As(err, &missing) || !slices.Equal(missing.Dims, []string{`"N" (input "x" dimension 0)`}) {
		t.Fatalf("got %v, want a MissingDimsError naming N", err)
	}
	if _, _, err := Load(path, LoadOptions{Weights: WeightsRandom, Dims: map[string]int{"N": 2}}); err != nil {
		t.Fatalf("with N given: %v", err)
	}
}
