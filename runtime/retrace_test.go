package runtime

import (
	"errors"
	"slices"
	"testing"

	"rulebook/onnx"
)

// TestRetraceBatch: constant Reshape targets traced at one batch are
// re-derived at another by following the batch through the traced
// shapes, as nn.MultiheadAttention's torch.onnx export needs (its
// [seq, batch, embed] reshaped to [seq, batch·heads, head], the batch
// inside a product, then back through [batch, heads, seq, head] and
// [seq·batch, embed]); where the batch could land in two dimensions, the
// target is kept if its -1 or 0 fits the new input, and refused with a
// RetraceError naming the node otherwise.
func TestRetraceBatch(t *testing.T) {
	reshape := func(in, target, out string) *onnx.Node {
		return &onnx.Node{OpType: "Reshape", Name: out, Inputs: []string{in, target}, Outputs: []string{out}}
	}
	transpose := func(in, out string, perm ...int64) *onnx.Node {
		return &onnx.Node{OpType: "Transpose", Name: out, Inputs: []string{in}, Outputs: []string{out},
			Attributes: []*onnx.Attribute{{Name: "perm", Type: onnx.AttrInts, Ints: perm}}}
	}
	// x is [seq 8, batch, embed 64], heads 4 of 16: q to heads, heads
	// first, to [batch, heads, seq, head], back to [seq, batch, heads,
	// head], to [seq·batch, embed] and to [seq, batch, embed].
	attention := func(batch int64) []*onnx.Tensor {
		return []*onnx.Tensor{
			int64s("heads", 8, batch*4, 16), int64s("split", batch, 4, 8, 16),
			int64s("merge", 8*batch, 64), int64s("back", 8, batch, 64)}
	}
	mha := []*onnx.Node{
		transpose("x", "xt", 1, 0, 2), // batch_first: [batch, seq, embed] to [seq, batch, embed]
		reshape("xt", "heads", "q"), transpose("q", "qt", 1, 0, 2), reshape("qt", "split", "q4"),
		transpose("q4", "o", 2, 0, 1, 3), reshape("o", "merge", "o2"), reshape("o2", "back", "y"),
	}
	withInput := func(traced int64) []*onnx.ValueInfo {
		vi := floatInput("x", 3)
		vi.Shape = []onnx.Dim{{Value: traced, HasValue: true}, {Value: 8, HasValue: true}, {Value: 64, HasValue: true}}
		return []*onnx.ValueInfo{vi}
	}
	cases := []struct {
		name   string
		model  *onnx.Model
		traced int
		want   map[string][]int
		refuse string // the node a RetraceError names
	}{
		{"attention traced at batch 2", shapeModel(mha, withInput(2), attention(2)...), 2,
			map[string][]int{"q": {8, 24, 16}, "q4": {6, 4, 8, 16}, "o2": {48, 64}, "y": {8, 6, 64}}, ""},
		{"attention traced at batch 3", shapeModel(mha, withInput(3), attention(3)...), 3,
			map[string][]int{"q": {8, 24, 16}, "q4": {6, 4, 8, 16}, "o2": {48, 64}, "y": {8, 6, 64}}, ""},
		{"a batch of 1 kept as its own dimension", shapeModel([]*onnx.Node{reshape("x", "t", "y")}, withInput(1), int64s("t", 1, 8, 4, 16)), 1,
			map[string][]int{"y": {6, 8, 4, 16}}, ""},
		{"a batch of 1 merged with the heads", shapeModel(mha, withInput(1), attention(1)...), 1, nil, "q"},
		{"a batch of 1 merged with the heads by -1", shapeModel([]*onnx.Node{transpose("x", "xt", 1, 0, 2), reshape("xt", "t", "y")}, withInput(1), int64s("t", 8, -1, 16)), 1,
			map[string][]int{"y": {8, 24, 16}}, ""},
		{"a batch of 1 flattened with -1", shapeModel([]*onnx.Node{reshape("x", "t", "y")}, withInput(1), int64s("t", -1)), 1,
			map[string][]int{"y": {6 * 8 * 64}}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opt := ShapeOptions{Inputs: map[string][]int{"x": {6, 8, 64}}, Batched: map[string]bool{"x": true},
				RetraceBatch: true, Traced: map[string][]int{"x": {c.traced, 8, 64}}}
			s, err := InferShapes(c.model, opt)
			if c.refuse != "" {
				var re *RetraceError
				if !errors.As(err, &re) || re.Node != c.refuse {
					t.Fatalf("got %v; want a RetraceError at %q", err, c.refuse)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range c.want {
				if got, ok := s.Shape(name); !ok || !slices.Equal(got, want) {
					t.Errorf("%s: %v, want %v", name, got, want)
				}
			}
		})
	}
}

// TestLandingOnEmptyValues: a value with no elements has no strides to
// place the batch by, so the batch is dropped there, where it divided by
// zero (found by FuzzTrainingFromONNX).
func TestLandingOnEmptyValues(t *testing.T) {
	for _, c := range []struct{ x, o []int }{
		{[]int{2, 0, 4}, []int{0, 8}},
		{[]int{2, 3}, []int{6, 0}},
		{[]int{0}, []int{0, 0}},
	} {
		if d, ok := landing(c.x, c.o, digit{dim: 0, inner: 1, extent: 2}); ok {
			t.Errorf("landing(%v, %v) = %+v; want none", c.x, c.o, d)
		}
	}
}
