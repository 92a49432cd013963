package exchange

import "rulebook/rules"

// FlexFlow's files give no shapes, and its parallel rules are about
// layouts too: reduce(x) needs x to hold partial sums or copies. The
// importer looks for input shapes and layouts under which both sides of a
// parallel rule type-check among ParallelInputShapes.

// layoutSearchSteps bounds the layout search of one rule: a rule that
// type-checks under no layouts would otherwise try every combination.
const layoutSearchSteps = 4000

// ParallelInputShapes are the shapes a parallel rule's inputs are tried
// at, for a rule written at the given degree: FlexFlow's activations
// (rank 3) and linear weights (rank 2), every dimension of size u, in
// every layout of LayoutVariants at that degree. u is the degree squared
// (at least 4), so that a dimension can be cut twice.
func ParallelInputShapes(degree int) []rules.Shape {
	u := max(4, degree*degree)
	return rules.LayoutVariants([]rules.Shape{rules.NewShape(u, u, u), rules.NewShape(u, u)}, degree)
}

// ruleDegree is the degree a rule's parallel operators are written at (the
// largest, should they differ), or 0 for a rule without any.
func ruleDegree(r *rules.Rule) int {
	d := 0
	for _, g := range []*rules.Graph{&r.Src, &r.Dst} {
		for _, n := range g.Nodes {
			for spec, v := range n.ParamValues() {
				if spec.Degree {
					d = max(d, v)
				}
			}
		}
	}
	return d
}

// findParallelShapes records the first inputs' layouts under which both
// sides of a parallel rule type-check, and reports whether it found any.
func findParallelShapes(r *rules.Rule) bool {
	d := max(ruleDegree(r), 2)
	return r.FindLayouts(ParallelInputShapes(d), layoutSearchSteps)
}
