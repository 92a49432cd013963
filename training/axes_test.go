package training

import (
	"fmt"
	"slices"
	"testing"

	"rulebook/onnx"
)

// TestReadAxes: a Transpose keeps its permutation (reversed axes when it
// has none) and a Softmax the axis it normalizes along, made non-negative,
// so that a planner can follow a cut axis through attention.
func TestReadAxes(t *testing.T) {
	m := Transformer(TransformerConfig{Layers: 1, Hidden: 64, Heads: 4, FFN: 256, Seq: 8})
	g, err := FromONNX(m, "block", 2)
	if err != nil {
		t.Fatal(err)
	}
	perms := map[string]bool{}
	for _, op := range g.Ops {
		switch op.Type {
		case "Transpose":
			perms[fmt.Sprint(op.Perm)] = true
		case "Softmax":
			if !slices.Equal(op.Reduces, []int{3}) {
				t.Errorf("%s reduces %v, want [3]", op.Name, op.Reduces)
			}
		}
	}
	// q and v to heads, k to heads transposed
	for _, p := range []string{"[0 2 1 3]", "[0 2 3 1]"} {
		if !perms[p] {
			t.Errorf("no Transpose with perm %s among %v", p, perms)
		}
	}
	for _, c := range []struct {
		node *onnx.Node
		rank int
		perm []int
		axes []int
	}{
		{&onnx.Node{OpType: "Transpose"}, 3, []int{2, 1, 0}, nil},
		{&onnx.Node{OpType: "Softmax", Attributes: []*onnx.Attribute{{Name: "axis", Type: onnx.AttrInt, I: 1}}}, 3, nil, []int{1}},
		{&onnx.Node{OpType: "LogSoftmax"}, 2, nil, []int{1}},
		{&onnx.Node{OpType: "Relu"}, 2, nil, nil},
		// a Gather's axis counts in its data's rank (4 here), not its output's
		{&onnx.Node{OpType: "Gather", Attributes: []*onnx.Attribute{{Name: "axis", Type: onnx.AttrInt, I: -4}}}, 3, nil, []int{0}},
		{&onnx.Node{OpType: "Gather"}, 3, nil, []int{0}},
	} {
		var op Op
		readAxes(c.node, &op, c.rank, c.rank+1)
		if !slices.Equal(op.Perm, c.perm) || !slices.Equal(op.Reduces, c.axes) {
			t.Errorf("%s rank %d: perm %v reduces %v, want %v and %v", c.node.OpType, c.rank, op.Perm, op.Reduces, c.perm, c.axes)
		}
	}
}
