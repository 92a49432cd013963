package rules

import "fmt"

// OutputShapes infers a graph's output shapes from its inputs' shapes (and
// its constants' recorded ConstShape), or says which operator fails.
func (g *Graph) OutputShapes(in []Shape) ([]Shape, error) {
	shapes := make([][]Shape, len(g.Nodes))
	of := func(v Value) Shape {
		if v.IsInput() {
			return in[v.Input()]
		}
		return shapes[v.Node][v.Out]
	}
	for j, n := range g.Nodes {
		args := make([]Shape, len(n.Args))
		for k, a := range n.Args {
			args[k] = of(a)
		}
		if n.Op.IsConstant() {
			if n.ConstShape == nil {
				return nil, fmt.Errorf("node %d: %s has no recorded shape", j, n.Op.Name)
			}
			args = []Shape{*n.ConstShape}
		}
		out, err := n.Op.InferShapes(n.Params, args)
		if err != nil {
			return nil, fmt.Errorf("node %d: %w", j, err)
		}
		shapes[j] = out
	}
	out := make([]Shape, len(g.Outputs))
	for k, o := range g.Outputs {
		out[k] = of(o)
	}
	return out, nil
}

// CheckParallelShapes refuses recorded input shapes under which a parallel
// rule does not type-check: a degree that does not divide a size, a
// layout an operator does not take. A rule with the degree variable is
// checked at BaseDegree, the degree its shapes are written at. Rules
// without degree parameters are not checked here, as before. Readers of
// rule files call it (exchange.Read).
func (r *Rule) CheckParallelShapes() error {
	if !r.hasDegreeParams() || len(r.InputShapes) != r.NumInputs {
		return nil
	}
	at := r
	if r.HasDegreeVar() {
		at = r.WithDegree(BaseDegree)
	}
	for _, side := range []struct {
		name string
		g    *Graph
	}{{"source", &at.Src}, {"target", &at.Dst}} {
		if _, err := side.g.OutputShapes(r.InputShapes); err != nil {
			return fmt.Errorf("shapes: %s: %w", side.name, err)
		}
	}
	return nil
}

func (r *Rule) hasDegreeParams() bool {
	for _, g := range []*Graph{&r.Src, &r.Dst} {
		for _, n := range g.Nodes {
			for _, spec := range n.Op.Params {
				if spec.Degree {
					return true
				}
			}
		}
	}
	return false
}
