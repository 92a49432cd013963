package rules

import (
	"fmt"
	"slices"
)

// Value names a tensor of a graph: graph input Index when Node < 0,
// otherwise output Out of node Node.
type Value struct {
	Node int
	Out  int
}

// InputValue refers to graph input i.
func InputValue(i int) Value { return Value{Node: -1 - i} }

// IsInput reports whether the value is a graph input.
func (v Value) IsInput() bool { return v.Node < 0 }

// Input returns the input index of an input value.
func (v Value) Input() int { return -1 - v.Node }

// Node is one operator application.
type Node struct {
	Op     *Op
	Params []int
	Args   []Value
	// ConstShape is the concrete shape of a constant, when known.
	ConstShape *Shape
}

// Graph is a DAG of nodes in topological order with explicit outputs.
// Inputs are shared with the other side of a rule, so a graph only counts
// them.
type Graph struct {
	NumInputs int
	Nodes     []Node
	Outputs   []Value
}

// Validate checks references and arities.
func (g *Graph) Validate() error {
	check := func(v Value, before int) error {
		if v.IsInput() {
			if v.Input() >= g.NumInputs {
				return fmt.Errorf("reference to input %d of %d", v.Input(), g.NumInputs)
			}
			return nil
		}
		if v.Node >= before || v.Out >= g.Nodes[v.Node].Op.Outputs {
			return fmt.Errorf("reference to output %d of node %d is not earlier in the graph", v.Out, v.Node)
		}
		return nil
	}
	for i, n := range g.Nodes {
		if len(n.Args) != n.Op.Arity || len(n.Params) != len(n.Op.Params) {
			return fmt.Errorf("node %d (%s): wrong number of operands or parameters", i, n.Op.Name)
		}
		for _, a := range n.Args {
			if err := check(a, i); err != nil {
				return fmt.Errorf("node %d (%s): %w", i, n.Op.Name, err)
			}
		}
	}
	if len(g.Outputs) == 0 {
		return fmt.Errorf("graph has no outputs")
	}
	for _, o := range g.Outputs {
		if err := check(o, len(g.Nodes)); err != nil {
			return fmt.Errorf("output: %w", err)
		}
	}
	return nil
}

// UsedInputs reports which inputs the graph reads.
func (g *Graph) UsedInputs() []bool {
	used := make([]bool, g.NumInputs)
	mark := func(v Value) {
		if v.IsInput() {
			used[v.Input()] = true
		}
	}
	for _, n := range g.Nodes {
		for _, a := range n.Args {
			mark(a)
		}
	}
	for _, o := range g.Outputs {
		mark(o)
	}
	return used
}

// OpNames lists the distinct operator names used, sorted.
func (g *Graph) OpNames() []string {
	var names []string
	for _, n := range g.Nodes {
		if !slices.Contains(names, n.Op.Name) {
			names = append(names, n.Op.Name)
		}
	}
	slices.Sort(names)
	return names
}

// Evaluate runs the graph on concrete inputs in one arithmetic and returns
// its outputs. Constants without a known shape cannot be evaluated.
func Evaluate[T any](g *Graph, kernel func(*Op) func([]int, []*Tensor[T], []*Tensor[T]), inputs []*Tensor[T]) ([]*Tensor[T], error) {
	return EvaluateWith(g, kernel, inputs, nil)
}

// EvaluateWith is Evaluate with every value from scratch (nil: allocated):
// the outputs are scratch's until its next Recycle.
func EvaluateWith[T any](g *Graph, kernel func(*Op) func([]int, []*Tensor[T], []*Tensor[T]), inputs []*Tensor[T], scratch *Scratch[T]) ([]*Tensor[T], error) {
	if len(inputs) != g.NumInputs {
		return nil, fmt.Errorf("graph has %d inputs, got %d tensors", g.NumInputs, len(inputs))
	}
	results := make([][]*Tensor[T], len(g.Nodes))
	get := func(v Value) *Tensor[T] {
		if v.IsInput() {
			return inputs[v.Input()]
		}
		return results[v.Node][v.Out]
	}
	for i, n := range g.Nodes {
		args := make([]*Tensor[T], len(n.Args))
		for j, a := range n.Args {
			args[j] = get(a)
		}
		var cs Shape
		if n.Op.IsConstant() {
			if n.ConstShape == nil {
				return nil, fmt.Errorf("node %d (%s): constant shape unknown", i, n.Op.Name)
			}
			cs = *n.ConstShape
		}
		out, err := evalWith(n.Op, kernel(n.Op), n.Params, args, cs, scratch)
		if err != nil {
			return nil, fmt.Errorf("node %d: %w", i, err)
		}
		results[i] = out
	}
	outs := make([]*Tensor[T], len(g.Outputs))
	for i, o := range g.Outputs {
		outs[i] = get(o)
	}
	return outs, nil
}

// IntKernelOf and FloatKernelOf select a kernel for Evaluate.
func IntKernelOf(op *Op) func([]int, []*IntTensor, []*IntTensor)       { return op.IntKernel }
func FloatKernelOf(op *Op) func([]int, []*FloatTensor, []*FloatTensor) { return op.FloatKernel }

// Piecewise reports whether any node is piecewise (see Op.Piecewise).
func (g *Graph) Piecewise() bool {
	for _, n := range g.Nodes {
		if n.Op.IsPiecewise(n.Params) {
			return true
		}
	}
	return false
}
