// Package enumerate lists small graphs over an operator set, fingerprints
// them and pairs equivalent ones into candidate rules. It follows TASO's
// Algorithm 1, and extends only the smallest graph of each fingerprint class
// (Quartz's RepGen). docs/design.md ("Data flow", step 2) tells the long
// story, and docs/parallel.md ("Generating parallel rules") the parallel one.
package enumerate

import (
	"fmt"

	"rulebook/rules"
)

// template is an operator with concrete parameters (and, for a constant,
// a concrete shape): one choice the generator makes when adding a node.
type template struct {
	op         *rules.Op
	params     []int
	constShape rules.Shape
	constKey   string // identifies a constant regardless of its shape
}

func (t template) String() string {
	s := t.op.Name
	for spec, p := range t.op.ParamValues(t.params) {
		s += " " + spec.Format(p)
	}
	if t.op.IsConstant() {
		s += " :" + t.constShape.String()
	}
	return s
}

// templates expands every operator over its generated parameter values and,
// for constants, over the shapes the pool offers it. Degree parameters all
// take the one degree being enumerated.
func templates(reg *rules.Registry, pool rules.Pool, degree int) []template {
	var out []template
	for _, op := range reg.Ops() {
		for _, params := range paramProduct(op, pool, degree) {
			if !op.IsConstant() {
				out = append(out, template{op: op, params: params})
				continue
			}
			for _, s := range pool.Constants[op.Name] {
				if _, err := op.InferShapes(params, []rules.Shape{s}); err == nil {
					out = append(out, template{op: op, params: params, constShape: s, constKey: fmt.Sprint(op.Name, params)})
				}
			}
		}
	}
	return out
}

// paramProduct lists every combination of the values the generator
// enumerates for op's parameters: the pool's values where it names some,
// the degree for a degree parameter, else ParamSpec.Generate.
func paramProduct(op *rules.Op, pool rules.Pool, degree int) [][]int {
	combos := [][]int{{}}
	for _, s := range op.Params {
		values := pool.Generated(op, s)
		if s.Degree {
			values = []int{degree}
		}
		var next [][]int
		for _, c := range combos {
			for _, v := range values {
				next = append(next, append(append([]int(nil), c...), v))
			}
		}
		combos = next
	}
	return combos
}
