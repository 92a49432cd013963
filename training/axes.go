package training

import "rulebook/onnx"

// readAxes records the attributes a tensor-parallel planner needs to
// follow a cut axis through n: a Transpose's permutation, and the axis a
// Softmax normalizes along (a cut there needs every slice), and the axis a
// Gather picks along. Axes are made non-negative against the output's
// rank, a Gather's against its data's.
func readAxes(n *onnx.Node, op *Op, rank, dataRank int) {
	switch n.OpType {
	case "Transpose":
		if a := n.Attr("perm"); a != nil {
			op.Perm = make([]int, len(a.Ints))
			for i, p := range a.Ints {
				op.Perm[i] = int(p)
			}
			return
		}
		// no perm reverses the axes
		op.Perm = make([]int, rank)
		for i := range op.Perm {
			op.Perm[i] = rank - 1 - i
		}
	case "Softmax", "LogSoftmax":
		// opsets 13 on normalize along one axis, -1 unless told
		axis := int(attrInt(n, "axis", -1))
		if axis < 0 {
			axis += rank
		}
		op.Reduces = []int{axis}
	case "Gather":
		axis := int(attrInt(n, "axis", 0))
		if axis < 0 {
			axis += dataRank
		}
		op.Reduces = []int{axis}
	}
}
