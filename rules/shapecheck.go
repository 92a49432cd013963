package rules

import "fmt"

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
		if _, err := side.g.InferShapes(r.InputShapes); err != nil {
			return fmt.Errorf("shapes: %s: %w", side.name, err)
		}
	}
	return nil
}

func (r *Rule) hasDegreeParams() bool {
	found := false
	r.EachDegree(func(int) { found = true })
	return found
}
