package rules

import (
	"fmt"
	"strings"
)

// InputClass is a family of interchangeable graph inputs of one shape.
// The generator uses the copies of a class as a prefix (copy 1 before copy
// 2), which removes graphs that differ only by a renaming of inputs.
type InputClass struct {
	Name   string
	Shape  Shape
	Copies int
	Role   Role
}

// Role says what kind of tensor an input is. Roles flow through a graph: a
// value computed from any activation is data; one computed only from
// weights and constants is a weight; scalars are neutral. Data operands
// (a convolution's input) never take a weight and weight operands (its
// kernel) never take data, scalar operands (smul's) take scalars and
// nothing else, and scalars feed no operator but smul (Op.Takes), which
// keeps out identities that hold only for the pool's particular shapes.
type Role uint8

// Roles of inputs and values.
const (
	RoleNeutral Role = iota
	RoleWeight
	RoleData
)

// Join is the role of a value computed from values of roles r and s.
func (r Role) Join(s Role) Role { return max(r, s) }

func (r Role) String() string { return [...]string{"neutral", "weight", "data"}[r] }

// Pool is the set of graph inputs and the shapes offered to constants,
// by operator name.
type Pool struct {
	Classes   []InputClass
	Constants map[string][]Shape
	// Params, keyed "operator.parameter", replaces the values the
	// generator enumerates for a parameter (ParamSpec.Generate) where the
	// pool's ranks call for others: the parallel pool's rank-3 tensors
	// concatenate on axis 2 too.
	Params map[string][]int
}

// Generated lists the values the generator enumerates for parameter spec
// of op: the pool's where it names some, else spec.Generate.
func (p Pool) Generated(op *Op, spec ParamSpec) []int {
	if v, ok := p.Params[op.Name+"."+spec.Name]; ok {
		return v
	}
	return spec.Generate
}

// DefaultPool is TASO's input pool (2-D activations and weights, 4-D
// activations and conv kernels, a scalar), grown where TASO's operator
// properties need more copies of one shape than it has:
//   - four 2-D activations, not three: concat commutes with ewadd and ewmul
//     on the column axis only over four inputs of one shape;
//   - two depth-wise kernels, not one: depth-wise convolution is linear in
//     its kernel, and a concat of depth-wise convolutions is one;
//   - two scalars, not one: smul is associative only where two scalars meet
//     in smul(y, w).
//
// The generator enumerates over it, and rules imported from TASO, which
// were found with its shapes, take their shapes from it.
func DefaultPool() Pool {
	return Pool{
		Classes: []InputClass{
			{"x", NewShape(2, 4), 4, RoleData},
			{"w", NewShape(4, 4), 3, RoleWeight},
			{"i", NewShape(2, 4, 5, 5), 3, RoleData},
			{"k", NewShape(4, 4, 3, 3), 3, RoleWeight},
			{"kh", NewShape(4, 4, 1, 3), 3, RoleWeight},
			{"kv", NewShape(4, 4, 3, 1), 3, RoleWeight},
			{"kd", NewShape(4, 1, 3, 3), 2, RoleWeight},
			{"s", NewShape(), 2, RoleNeutral},
		},
		Constants: map[string][]Shape{
			"C_pool":   {NewShape(4, 1, 3, 3)},
			"I_conv":   {NewShape(4, 4, 3, 3)},
			"I_matmul": {NewShape(4, 4)},
			"I_ewmul":  {NewShape(2, 4, 5, 5)},
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

// Shapes lists the shape of each class, in order.
func (p Pool) Shapes() []Shape {
	out := make([]Shape, len(p.Classes))
	for i, c := range p.Classes {
		out[i] = c.Shape
	}
	return out
}

// String summarises the pool for run provenance.
func (p Pool) String() string {
	var parts []string
	for _, c := range p.Classes {
		parts = append(parts, fmt.Sprintf("%s:%s×%d", c.Name, c.Shape, c.Copies))
	}
	return strings.Join(parts, " ")
}
