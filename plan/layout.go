package plan

import (
	"rulebook/rules"
	"rulebook/training"
)

// Style is how tensor parallelism cuts one operator, in Megatron's terms.
type Style int

// Styles. An operator outside any product's cut region is Replicated: each
// device of the tensor-parallel group computes all of it.
const (
	Replicated Style = iota
	// Colwise cuts a product's weight along its output features: each
	// device holds a slice of the output.
	Colwise
	// Rowwise cuts a product's weight along its input features: each
	// device holds partial sums, all-reduced into a replicated output.
	Rowwise
	// Sharded is any other operator working on feature slices (bias,
	// activation, attention between a colwise and a rowwise product).
	Sharded
)

// styleNames are the names plan files and torch plans use. A replicated
// operator's style is named as the registry's operator that makes copies.
var styleNames = [...]string{rules.NameReplicate, "colwise", "rowwise", "sharded"}

func (s Style) String() string { return styleNames[s] }

// MarshalText writes the style's name, as plan files and torch plans use.
func (s Style) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// OpLayout is the tensor-parallel treatment of one operator.
type OpLayout struct {
	Style Style
	// ForwardAllReduce: the output holds partial sums to all-reduce
	// (rowwise products).
	ForwardAllReduce bool
	// BackwardAllReduce: the input gradient holds partial sums to
	// all-reduce (colwise products).
	BackwardAllReduce bool
	// GatherInputs: sliced inputs are all-gathered before the operator.
	GatherInputs bool
}

// assignTensorParallel walks the graph in order and gives each operator a
// Megatron-style layout for a tensor-parallel degree tp: a weight product
// on replicated input is cut column-wise, one on sliced input row-wise (its
// output all-reduced); operators on slices keep them, unless they need
// every feature (Op.NeedsAllFeatures) or mix slices with replicated values.
func assignTensorParallel(g *training.Graph, tp int) []OpLayout {
	out := make([]OpLayout, len(g.Ops))
	if tp <= 1 {
		return out
	}
	sliced := map[string]bool{}
	for i, op := range g.Ops {
		in := slicedInputs(op, sliced)
		var l OpLayout
		switch {
		case op.Product != nil && op.ParamBytes > 0:
			l = productLayout(op, in, tp)
		case in.any && (op.NeedsAllFeatures || in.mixed):
			l = OpLayout{Style: Replicated, GatherInputs: true}
		case in.any:
			l = OpLayout{Style: Sharded}
		}
		out[i] = l
		for _, v := range op.Outputs {
			sliced[v] = l.Style == Colwise || l.Style == Sharded
		}
	}
	return out
}

type inputSlices struct{ any, mixed bool }

// slicedInputs says whether any activation input of op is sliced, and
// whether sliced and replicated activations meet (a residual add).
func slicedInputs(op training.Op, sliced map[string]bool) inputSlices {
	var s, r bool
	for _, v := range op.Inputs {
		cut, produced := sliced[v]
		switch {
		case !produced:
			// a weight, constant or graph input
		case cut:
			s = true
		default:
			r = true
		}
	}
	return inputSlices{any: s, mixed: s && r}
}

func productLayout(op training.Op, in inputSlices, tp int) OpLayout {
	p := op.Product
	switch {
	case in.mixed:
		return OpLayout{Style: Replicated, GatherInputs: true}
	case in.any && p.K%int64(tp) == 0:
		return OpLayout{Style: Rowwise, ForwardAllReduce: true}
	case in.any:
		return OpLayout{Style: Replicated, GatherInputs: true}
	case p.N%int64(tp) == 0:
		return OpLayout{Style: Colwise, BackwardAllReduce: true}
	}
	return OpLayout{Style: Replicated}
}

// cut is the share of an operator's work and weights one device of the
// tensor-parallel group does.
func (l OpLayout) cut(tp int) float64 {
	if l.Style == Replicated {
		return 1
	}
	return 1 / float64(tp)
}
