package training

// GELU is the GELU around Erf operator e, as torch.onnx writes it (x/√2,
// Erf, +1, ·x, ·½): its operators, which PyTorch runs as one kernel, and
// its input x; ok is false where e is no such Erf.
func (g *Graph) GELU(e int) (ops []int, x string, ok bool) {
	if e < 0 || e >= len(g.Ops) || g.Ops[e].Type != "Erf" || len(g.Ops[e].Inputs) != 1 {
		return nil, "", false
	}
	return g.gelu(e)
}
