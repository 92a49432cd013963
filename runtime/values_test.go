package runtime

import (
	"slices"
	"testing"
)

func TestValueShapesAndConstants(t *testing.T) {
	m, _, err := Load(sharedModel(t, "squeezenet1_1-full.onnx"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		shape []int
		konst bool
	}{
		{"input", []int{1, 3, 224, 224}, false},
		{"features.0.weight", []int{64, 3, 3, 3}, true},
		{"output", []int{1, 1000}, false},
	}
	for _, c := range cases {
		shape, ok := m.Shape(c.name)
		if !ok || !slices.Equal(shape, c.shape) {
			t.Errorf("Shape(%q) = %v, %v; want %v", c.name, shape, ok, c.shape)
		}
		k, ok := m.Constant(c.name)
		if ok != c.konst || (ok && !slices.Equal(k.Shape, c.shape)) {
			t.Errorf("Constant(%q) = %v, %v", c.name, k != nil, ok)
		}
	}
	if _, ok := m.Shape("no such value"); ok {
		t.Error("an unknown value has a shape")
	}
}
