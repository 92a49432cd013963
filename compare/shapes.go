package compare

import "rulebook/rules"

// shapesFit admits the graphs on the way from a rule's source to its
// target that type-check at the rule's input shapes and keep its outputs'
// shapes, as every graph the optimizer passes through must. Our rules are
// proved without shapes and hold where both sides type-check; rewriting
// through a graph that does not (smul(y, w) => smul(w, y), true of two
// scalars, turned on a tensor and a scalar) could "imply" a false rule.
// A rule without recorded shapes admits every graph.
func shapesFit(r *rules.Rule) func(*rules.Graph) bool {
	if len(r.InputShapes) != r.NumInputs {
		return nil
	}
	want, ok := outputShapes(&r.Src, r.InputShapes)
	if !ok {
		return nil
	}
	return func(g *rules.Graph) bool {
		got, ok := outputShapes(g, r.InputShapes)
		if !ok || len(got) != len(want) {
			return false
		}
		for i, s := range got {
			if s != nil && want[i] != nil && !s.SameDims(*want[i]) {
				return false
			}
		}
		return true
	}
}

// outputShapes infers the shapes of g's outputs from its inputs' shapes;
// ok is false when a node does not type-check. Constants take the shape
// their context asks for, which a rewritten graph does not record, so a
// constant's shape, and what is computed from it, stays unknown (nil) and
// fits anything.
func outputShapes(g *rules.Graph, inputs []rules.Shape) (out []*rules.Shape, ok bool) {
	shapes := make([][]rules.Shape, len(g.Nodes)) // nil: unknown
	shapeOf := func(v rules.Value) *rules.Shape {
		if v.IsInput() {
			return &inputs[v.Input()]
		}
		if s := shapes[v.Node]; s != nil {
			return &s[v.Out]
		}
		return nil
	}
	for j, n := range g.Nodes {
		in := make([]rules.Shape, 0, len(n.Args))
		for _, a := range n.Args {
			if s := shapeOf(a); s != nil {
				in = append(in, *s)
			}
		}
		if n.Op.IsConstant() || len(in) < len(n.Args) {
			continue
		}
		res, err := n.Op.InferShapes(n.Params, in)
		if err != nil {
			return nil, false
		}
		shapes[j] = res
	}
	for _, o := range g.Outputs {
		out = append(out, shapeOf(o))
	}
	return out, true
}
