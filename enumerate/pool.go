// Package enumerate lists small graphs over an operator set, fingerprints
// them and pairs equivalent ones into candidate rules (TASO Algorithm 1,
// with Quartz's RepGen restriction to representatives).
package enumerate

import (
	"fmt"
	"strings"

	"rulebook/rules"
)

// InputClass is a family of interchangeable graph inputs of one shape.
// Graphs use the copies of a class as a prefix (copy 1 before copy 2), which
// removes graphs that differ only by a renaming of inputs.
type InputClass struct {
	Name   string
	Shape  rules.Shape
	Copies int
	Role   Role
}

// Role says what kind of tensor an input is. Roles flow through a graph: a
// value computed from any activation is data; one computed only from
// weights and constants is a weight; scalars are neutral. Data operands
// (a convolution's input) never take a weight and weight operands (its
// kernel) never take data, and scalar operands (smul's) take scalars and
// nothing else, which keeps out identities that hold only for the pool's
// particular shapes.
type Role uint8

// Roles of inputs and values.
const (
	Neutral Role = iota
	Weight
	Data
)

func (r Role) join(s Role) Role { return max(r, s) }

func (r Role) String() string { return [...]string{"neutral", "weight", "data"}[r] }

// Pool is the set of graph inputs and the shapes offered to constants.
type Pool struct {
	Classes   []InputClass
	Constants map[string][]rules.Shape
}

// DefaultPool is TASO's input pool: 2-D activations and weights, 4-D
// activations, conv kernels and one scalar.
func DefaultPool() Pool {
	return Pool{
		Classes: []InputClass{
			{"x", rules.NewShape(2, 4), 3, Data},
			{"w", rules.NewShape(4, 4), 3, Weight},
			{"i", rules.NewShape(2, 4, 5, 5), 3, Data},
			{"k", rules.NewShape(4, 4, 3, 3), 3, Weight},
			{"kh", rules.NewShape(4, 4, 1, 3), 3, Weight},
			{"kv", rules.NewShape(4, 4, 3, 1), 3, Weight},
			{"kd", rules.NewShape(4, 1, 3, 3), 1, Weight},
			{"s", rules.NewShape(), 1, Neutral},
		},
		Constants: map[string][]rules.Shape{
			"C_pool":   {rules.NewShape(4, 1, 3, 3)},
			"I_conv":   {rules.NewShape(4, 4, 3, 3)},
			"I_matmul": {rules.NewShape(4, 4)},
			"I_ewmul":  {rules.NewShape(2, 4, 5, 5)},
		},
	}
}

// NumInputs is the total number of input tensors.
func (p Pool) NumInputs() int {
	n := 0
	for _, c := range p.Classes {
		n += c.Copies
	}
	return n
}

// String summarises the pool for run provenance.
func (p Pool) String() string {
	var parts []string
	for _, c := range p.Classes {
		parts = append(parts, fmt.Sprintf("%s:%s×%d", c.Name, c.Shape, c.Copies))
	}
	return strings.Join(parts, " ")
}

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
	for i, p := range t.params {
		s += " " + t.op.Params[i].Format(p)
	}
	if t.op.IsConstant() {
		s += " :" + t.constShape.String()
	}
	return s
}

// templates expands every operator over its generated parameter values and,
// for constants, over the shapes the pool offers it.
func templates(reg *rules.Registry, pool Pool) []template {
	var out []template
	for _, op := range reg.Ops() {
		for _, params := range paramProduct(op.Params) {
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

func paramProduct(specs []rules.ParamSpec) [][]int {
	combos := [][]int{{}}
	for _, s := range specs {
		var next [][]int
		for _, c := range combos {
			for _, v := range s.Generate {
				next = append(next, append(append([]int(nil), c...), v))
			}
		}
		combos = next
	}
	return combos
}
