package runtime

import (
	"context"
	"slices"
	"testing"

	"rulebook/onnx"
)

// TestEmbedRandomWeights embeds squeezenet1_1's generated weights inline
// and checks that the embedded model, loaded with no weights file, has no
// external data left and computes exactly what the original computes with
// generated weights.
func TestEmbedRandomWeights(t *testing.T) {
	path := sharedModel(t, "squeezenet1_1.onnx")
	om, err := onnx.ReadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := EmbedRandomWeights(om, 1); err != nil {
		t.Fatal(err)
	}
	for _, init := range om.Graph.Initializers {
		if init.DataLocation == onnx.LocationExternal {
			t.Fatalf("initializer %q is still external", init.Name)
		}
	}
	embedded, report, err := FromONNX(om, t.TempDir(), LoadOptions{Weights: WeightsFile})
	if err != nil {
		t.Fatal(err)
	}
	if len(report.RandomWeights) != 0 {
		t.Fatalf("the embedded model still generated %d weights", len(report.RandomWeights))
	}
	original, _, err := Load(path, LoadOptions{Seed: 1, Weights: WeightsRandom})
	if err != nil {
		t.Fatal(err)
	}
	var outs [2]map[string]*Tensor
	for i, m := range []*Model{original, embedded} {
		s, err := m.NewSession(SessionOptions{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		if outs[i], err = s.Run(context.Background(), original.RandomInputs(2)); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range outs[0] {
		if !slices.Equal(outs[1][name].Data, want.Data) {
			t.Fatalf("output %s differs between generated and embedded weights", name)
		}
	}
}
