package plan

import (
	"errors"
	"fmt"
	"slices"

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
	// Axis is the axis of the outputs that is cut, for Colwise and
	// Sharded operators: a product's output features, a head axis after
	// attention's reshape and transpose.
	Axis int
	// ForwardAllReduce: the output holds partial sums to all-reduce
	// (rowwise products).
	ForwardAllReduce bool
	// BackwardAllReduce: the input gradient holds partial sums to
	// all-reduce (colwise products).
	BackwardAllReduce bool
	// GatherInputs: sliced inputs are all-gathered before the operator.
	GatherInputs bool
}

// sliced reports whether the operator's outputs are cut (on Axis).
func (l OpLayout) sliced() bool { return l.Style == Colwise || l.Style == Sharded }

// assignTensorParallel walks the graph in order and gives each operator a
// Megatron-style layout for a tensor-parallel degree tp: a weight product
// on replicated input is cut column-wise, one whose input is cut on its
// contraction axis row-wise (its output all-reduced). Other operators keep
// a cut where they can follow its axis (followCut): elementwise ones, a
// reshape that splits features into whole heads, a transpose, a product of
// two activations cut on the same batch axis (attention's heads), a
// softmax along another axis. Anything else gathers the slices first.
// Weights, constants and values computed from them alone are neither cut
// nor replicated activations, so a scalar constant does not stop a cut.
func assignTensorParallel(g *training.Graph, tp int) []OpLayout {
	out := make([]OpLayout, len(g.Ops))
	if tp <= 1 {
		return out
	}
	// cut holds each activation's cut axis, or -1 when every device holds
	// all of it
	cut := map[string]int{}
	for i, op := range g.Ops {
		in := inputCuts(g, op, cut)
		var l OpLayout
		switch {
		case op.Product != nil && op.ParamBytes > 0:
			l = productLayout(g, op, in, tp)
		case len(in.cuts) == 0 || op.Class.Cut == training.CutMetadata:
			// reading a shape needs no slice gathered
		default:
			if axis, ok := followCut(g, op, in, tp); ok {
				l = OpLayout{Style: Sharded, Axis: axis}
			} else {
				l = OpLayout{Style: Replicated, GatherInputs: true}
			}
		}
		out[i] = l
		if !in.activation || op.Class.Cut == training.CutMetadata {
			// a shape is metadata: a reshape to it (a dynamic export's
			// heads) still carries its input's cut
			continue
		}
		for _, v := range op.Outputs {
			cut[v] = -1
			if l.sliced() {
				cut[v] = l.Axis
			}
		}
	}
	return out
}

// ErrCutsNothing marks a tensor-parallel degree that divides no weight
// product's features: every operator would be replicated, and the plan's
// label (tp3) would not say what runs.
var ErrCutsNothing = errors.New("the tensor-parallel degree cuts no operator")

// cutsSomething refuses a degree above 1 under which every operator is
// replicated.
func cutsSomething(layouts []OpLayout, tp int) error {
	if tp <= 1 {
		return nil
	}
	for _, l := range layouts {
		if l.Style != Replicated {
			return nil
		}
	}
	return fmt.Errorf("no weight product's features divide by %d, so every operator would be replicated: %w", tp, ErrCutsNothing)
}

// inputSlices are what an operator's inputs hold: cuts maps the index of
// each input cut by tensor parallelism to its axis.
type inputSlices struct {
	activation bool // some input is data from the graph's inputs
	replicated bool // some such input is whole on every device
	cuts       map[int]int
}

func inputCuts(g *training.Graph, op training.Op, cut map[string]int) inputSlices {
	s := inputSlices{cuts: map[int]int{}}
	for i, v := range op.Inputs {
		axis, ok := cut[v]
		switch {
		case g.IsInput(v):
			s.activation, s.replicated = true, true
		case !ok:
			// a weight, a constant, or computed from them alone
		case axis < 0:
			s.activation, s.replicated = true, true
		default:
			s.activation = true
			s.cuts[i] = axis
		}
	}
	return s
}

func productLayout(g *training.Graph, op training.Op, in inputSlices, tp int) OpLayout {
	p := op.Product
	if len(in.cuts) > 0 {
		axis, ok := in.cuts[0]
		if ok && !in.replicated && len(in.cuts) == 1 && axis == featureAxisOf(op, len(g.ValueShape(op.Inputs[0]))) && p.K%int64(tp) == 0 {
			return OpLayout{Style: Rowwise, ForwardAllReduce: true}
		}
		return OpLayout{Style: Replicated, GatherInputs: true}
	}
	if p.N%int64(tp) == 0 {
		return OpLayout{Style: Colwise, Axis: featureAxisOf(op, len(g.ValueShape(op.Outputs[0]))), BackwardAllReduce: true}
	}
	return OpLayout{Style: Replicated}
}

// featureAxisOf is the feature axis of a product's input or output of
// the given rank: the channels of a convolution, else the last axis.
func featureAxisOf(op training.Op, rank int) int {
	if op.Class.ChannelsFirst {
		return 1
	}
	return rank - 1
}

// followCut is the axis of op's output that its cut inputs' slices land
// on, or ok false when the operator needs whole inputs.
func followCut(g *training.Graph, op training.Op, in inputSlices, tp int) (axis int, ok bool) {
	rank := len(g.ValueShape(op.Outputs[0]))
	if in.replicated || op.NeedsAllFeatures || rank == 0 {
		return 0, false
	}
	a, first := in.cuts[0]
	switch op.Class.Cut {
	case training.CutElementwise:
		return alignedCut(g, op, in, rank)
	case training.CutPerChannel:
		return a, first && a == 1 && len(in.cuts) == 1
	case training.CutReshape:
		if !first || len(in.cuts) != 1 {
			return 0, false
		}
		return reshapedCut(g.ValueShape(op.Inputs[0]), g.ValueShape(op.Outputs[0]), a, tp)
	case training.CutTranspose:
		j := slices.Index(op.Perm, a)
		return j, first && j >= 0
	case training.CutNormalize:
		return a, first && !slices.Contains(op.Reduces, a)
	case training.CutBatchedProduct:
		if len(in.cuts) != 2 {
			return 0, false
		}
		// both operands cut on one batch axis: attention's heads
		b := in.cuts[1] + rank - len(g.ValueShape(op.Inputs[1]))
		a += rank - len(g.ValueShape(op.Inputs[0]))
		return a, a == b && a < rank-2
	}
	return 0, false
}

// alignedCut is the output axis of an elementwise operator whose cut
// inputs, aligned from the right, are all cut on that one axis.
func alignedCut(g *training.Graph, op training.Op, in inputSlices, rank int) (int, bool) {
	axis := -1
	for i, a := range in.cuts {
		o := a + rank - len(g.ValueShape(op.Inputs[i]))
		if axis >= 0 && o != axis {
			return 0, false
		}
		axis = o
	}
	return axis, axis >= 0
}

// reshapedCut is the axis of a reshape's output that carries input axis
// a's tp slices whole: the first output axis after the same leading
// elements, if it divides by tp. Features [b, s, 768] cut in two go to
// the heads of [b, s, 12, 64]; cut in eight they would split a head.
func reshapedCut(in, out []int64, a, tp int) (int, bool) {
	if a >= len(in) {
		return 0, false
	}
	outer := int64(1)
	for _, d := range in[:a] {
		outer *= d
	}
	acc := int64(1)
	for j, d := range out {
		if acc == outer && d > 1 {
			return j, d%int64(tp) == 0
		}
		acc *= d
		if acc > outer {
			break
		}
	}
	return 0, false
}

// cut is the share of an operator's work and weights one device of the
// tensor-parallel group does.
func (l OpLayout) cut(tp int) float64 {
	if l.Style == Replicated {
		return 1
	}
	return 1 / float64(tp)
}
