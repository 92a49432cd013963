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
	// Groups, above 1, takes the cut axis as that many equal blocks, each
	// cut into tp slices, device i holding slice i of every block: a
	// packed q, k, v projection cut by heads (packedBlocks), and heads
	// merged with the batch ([seq, batch·heads, head]). 0 or 1 is one
	// contiguous cut.
	Groups int
	// ForwardAllReduce: the output holds partial sums to all-reduce
	// (rowwise products).
	ForwardAllReduce bool
	// BackwardAllReduce: the input gradient holds partial sums to
	// all-reduce (colwise products).
	BackwardAllReduce bool
	// GatherInputs: sliced inputs are all-gathered before the operator.
	GatherInputs bool
	// Fused: the operator runs inside its producer's kernel, a product's
	// relu epilogue (the joint search's fusion), and takes no time of its
	// own.
	Fused bool
}

// sliced reports whether the operator's outputs are cut (on Axis).
func (l OpLayout) sliced() bool { return l.Style == Colwise || l.Style == Sharded }

// at is where the layout cuts its outputs.
func (l OpLayout) at() cutAt { return cutAt{axis: l.Axis, groups: max(1, l.Groups)} }

// cutAt is a value's tensor-parallel cut: axis, taken as groups equal
// blocks each cut into tp slices (groups 1: one contiguous cut). Viewed
// flat, every cut is the same thing: outer blocks (the elements before the
// axis times groups), and within each block device i holds the i-th
// contiguous tp-th of the rest. A reshape keeps the flat order, so it
// keeps outer, and the cut lands wherever the output's axes put it.
type cutAt struct{ axis, groups int }

func (c cutAt) layout(st Style) OpLayout {
	l := OpLayout{Style: st, Axis: c.axis}
	if c.groups > 1 {
		l.Groups = c.groups
	}
	return l
}

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
	// cut holds each activation's cut, or axis -1 when every device holds
	// all of it
	cut := map[string]cutAt{}
	for i, op := range g.Ops {
		in := inputCuts(g, op, cut)
		var l OpLayout
		switch {
		case op.Product != nil && op.ParamBytes > 0:
			l = productLayout(g, i, in, tp)
		case len(in.cuts) == 0 || op.Class.Cut == training.CutMetadata:
			// reading a shape needs no slice gathered
		default:
			if at, ok := followCut(g, op, in, tp); ok {
				l = at.layout(Sharded)
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
			cut[v] = cutAt{axis: -1}
			if l.sliced() {
				cut[v] = l.at()
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
// replicated: for the classic layouts because no weight product's
// features divide by it, for the joint search's also where the version
// proves no cut it could make or replicating is the cheapest.
func cutsSomething(layouts []OpLayout, tp int, joint bool) error {
	if tp <= 1 {
		return nil
	}
	for _, l := range layouts {
		if l.Style != Replicated {
			return nil
		}
	}
	if joint {
		return fmt.Errorf("the joint search cuts no operator by %d (no product's features divide by it, the version proves no cut of them, or replicating every operator is the cheapest): %w", tp, ErrCutsNothing)
	}
	return fmt.Errorf("no weight product's features divide by %d, so every operator would be replicated: %w", tp, ErrCutsNothing)
}

// inputSlices are what an operator's inputs hold: cuts maps the index of
// each input cut by tensor parallelism to its cut.
type inputSlices struct {
	activation bool // some input is data from the graph's inputs
	replicated bool // some such input is whole on every device
	cuts       map[int]cutAt
}

func inputCuts(g *training.Graph, op training.Op, cut map[string]cutAt) inputSlices {
	s := inputSlices{cuts: map[int]cutAt{}}
	for i, v := range op.Inputs {
		at, ok := cut[v]
		switch {
		case g.IsInput(v):
			s.activation, s.replicated = true, true
		case !ok:
			// a weight, a constant, or computed from them alone
		case at.axis < 0:
			s.activation, s.replicated = true, true
		default:
			s.activation = true
			s.cuts[i] = at
		}
	}
	return s
}

// productLayout cuts weight product i: by rows where its input comes cut
// on its features in one contiguous cut, by columns where its input is
// whole; a packed projection (packedBlocks) by columns in each block.
func productLayout(g *training.Graph, i int, in inputSlices, tp int) OpLayout {
	op := g.Ops[i]
	p := op.Product
	if len(in.cuts) > 0 {
		at, ok := in.cuts[0]
		if ok && !in.replicated && len(in.cuts) == 1 && at.groups == 1 && at.axis == featureAxisOf(op, len(g.ValueShape(op.Inputs[0]))) && p.K%int64(tp) == 0 {
			return OpLayout{Style: Rowwise, ForwardAllReduce: true}
		}
		return OpLayout{Style: Replicated, GatherInputs: true}
	}
	axis := featureAxisOf(op, len(g.ValueShape(op.Outputs[0])))
	if k := packedBlocks(g, i); k > 1 && (p.N/int64(k))%int64(tp) == 0 {
		return OpLayout{Style: Colwise, Axis: axis, Groups: k, BackwardAllReduce: true}
	}
	if p.N%int64(tp) == 0 {
		return OpLayout{Style: Colwise, Axis: axis, BackwardAllReduce: true}
	}
	return OpLayout{Style: Replicated}
}

// packedBlocks is k where weight product i packs k projections into its
// output features, as nn.MultiheadAttention's in_proj packs q, k and v
// (torch.onnx: a MatMul by [d, 3d], a bias Add, a reshape of the features
// into [3, d], and one Gather per block along that axis, through
// Unsqueeze, Transpose and Squeeze). 0 when it is not packed: a
// contiguous column cut of a packed product would give a device all of q
// and part of k, where cutting each block gives it whole heads of all
// three.
func packedBlocks(g *training.Graph, i int) int {
	op := g.Ops[i]
	v := op.Outputs[0]
	if c := dataConsumers(g, v); len(c) == 1 && g.Ops[c[0]].Class.BiasAdd {
		v = g.Ops[c[0]].Outputs[0]
	}
	c := dataConsumers(g, v)
	if len(c) != 1 || g.Ops[c[0]].Class.Cut != training.CutReshape {
		return 0
	}
	in, out := g.ValueShape(v), g.ValueShape(g.Ops[c[0]].Outputs[0])
	n := len(in)
	if n == 0 || len(out) != n+1 || !slices.Equal(in[:n-1], out[:n-1]) || out[n-1] < 2 || out[n-1]*out[n] != in[n-1] {
		return 0
	}
	if !selectedBlocks(g, g.Ops[c[0]].Outputs[0], n-1, int(out[n-1])) {
		return 0
	}
	return int(out[n-1])
}

// selectedBlocks reports whether value v's axis of k blocks is taken
// apart by Gathers along it, each picking one block, after any reshapes
// that keep the axis and transposes that move it.
func selectedBlocks(g *training.Graph, v string, axis, k int) bool {
	consumers := dataConsumers(g, v)
	if len(consumers) == 0 {
		return false
	}
	for _, c := range consumers {
		op := g.Ops[c]
		switch op.Class.Cut {
		case training.CutSelect:
			if op.Inputs[0] != v || !slices.Equal(op.Reduces, []int{axis}) || len(g.ValueShape(op.Inputs[1])) != 0 {
				return false
			}
		case training.CutTranspose:
			j := slices.Index(op.Perm, axis)
			if len(consumers) != 1 || j < 0 || !selectedBlocks(g, op.Outputs[0], j, k) {
				return false
			}
		case training.CutReshape:
			j, ok := keptAxis(g.ValueShape(v), g.ValueShape(op.Outputs[0]), axis)
			if len(consumers) != 1 || !ok || !selectedBlocks(g, op.Outputs[0], j, k) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// dataConsumers are the operators that read v's data, not only its shape.
func dataConsumers(g *training.Graph, v string) []int {
	var out []int
	for _, c := range g.Consumers(v) {
		if g.Ops[c].Class.Cut != training.CutMetadata {
			out = append(out, c)
		}
	}
	return out
}

// keptAxis is the output axis of a reshape that is input axis a itself:
// the same size after the same elements.
func keptAxis(in, out []int64, a int) (int, bool) {
	outer := prod(in[:a])
	acc := int64(1)
	for j, d := range out {
		if acc == outer && d == in[a] {
			return j, true
		}
		acc *= d
	}
	return 0, false
}

func prod(xs []int64) int64 {
	p := int64(1)
	for _, x := range xs {
		p *= x
	}
	return p
}

// featureAxisOf is the feature axis of a product's input or output of
// the given rank: the channels of a convolution, else the last axis.
func featureAxisOf(op training.Op, rank int) int {
	if op.Class.ChannelsFirst {
		return 1
	}
	return rank - 1
}

// followCut is where op's output is cut by its cut inputs' slices, or ok
// false when the operator needs whole inputs.
func followCut(g *training.Graph, op training.Op, in inputSlices, tp int) (cutAt, bool) {
	rank := len(g.ValueShape(op.Outputs[0]))
	if in.replicated || op.NeedsAllFeatures || rank == 0 {
		return cutAt{}, false
	}
	a, first := in.cuts[0]
	switch op.Class.Cut {
	case training.CutElementwise:
		return alignedCut(g, op, in, rank)
	case training.CutPerChannel:
		return a, first && a.axis == 1 && len(in.cuts) == 1
	case training.CutReshape:
		if !first || len(in.cuts) != 1 {
			return cutAt{}, false
		}
		return reshapedCut(g.ValueShape(op.Inputs[0]), g.ValueShape(op.Outputs[0]), a, tp)
	case training.CutTranspose:
		j := slices.Index(op.Perm, a.axis)
		return cutAt{axis: j, groups: a.groups}, first && j >= 0
	case training.CutNormalize:
		return a, first && !slices.Contains(op.Reduces, a.axis)
	case training.CutSelect:
		return selectedCut(g, op, in)
	case training.CutBatchedProduct:
		if len(in.cuts) != 2 {
			return cutAt{}, false
		}
		// both operands cut on one batch axis: attention's heads
		b := in.cuts[1]
		b.axis += rank - len(g.ValueShape(op.Inputs[1]))
		a.axis += rank - len(g.ValueShape(op.Inputs[0]))
		return a, a == b && a.axis < rank-2
	}
	return cutAt{}, false
}

// selectedCut is where a Gather's output is cut when its data is cut on
// another axis than the one it picks along (the packed in_proj's q, k and
// v taken apart): the indices' axes replace the picked one.
func selectedCut(g *training.Graph, op training.Op, in inputSlices) (cutAt, bool) {
	a, ok := in.cuts[0]
	if !ok || len(in.cuts) != 1 || len(op.Reduces) != 1 {
		return cutAt{}, false
	}
	k := op.Reduces[0]
	switch {
	case a.axis < k:
		return a, true
	case a.axis > k:
		a.axis += len(g.ValueShape(op.Inputs[1])) - 1
		return a, true
	}
	return cutAt{}, false
}

// alignedCut is the output cut of an elementwise operator whose cut
// inputs, aligned from the right, are all cut alike on one axis.
func alignedCut(g *training.Graph, op training.Op, in inputSlices, rank int) (cutAt, bool) {
	out := cutAt{axis: -1}
	for i, a := range in.cuts {
		a.axis += rank - len(g.ValueShape(op.Inputs[i]))
		if out.axis >= 0 && a != out {
			return cutAt{}, false
		}
		out = a
	}
	return out, out.axis >= 0
}

// reshapedCut is where a reshape's output carries input cut a's tp slices
// whole. A reshape keeps the flat order, so the cut's outer blocks (the
// elements before its axis, times its groups) stay: the output axis j
// whose leading elements divide them takes the rest as groups, and the
// slices land on j when what is left of it divides by tp. Features
// [b, s, 768] cut in two go to the heads of [b, s, 12, 64] (cut in eight
// they would split a head); [s, b, 64] cut in two go to the heads within
// each batch of [s, b·4, 16] (groups b).
func reshapedCut(in, out []int64, a cutAt, tp int) (cutAt, bool) {
	if a.axis >= len(in) {
		return cutAt{}, false
	}
	outer := prod(in[:a.axis]) * int64(a.groups)
	acc := int64(1)
	for j, d := range out {
		if acc <= outer && outer < acc*d {
			groups := outer / acc
			if outer%acc != 0 || d%groups != 0 || (d/groups)%int64(tp) != 0 {
				return cutAt{}, false
			}
			return cutAt{axis: j, groups: int(groups)}, true
		}
		acc *= d
	}
	return cutAt{}, false
}

// cut is the share of an operator's work and weights one device of the
// tensor-parallel group does.
func (l OpLayout) cut(tp int) float64 {
	if l.Style == Replicated {
		return 1
	}
	return 1 / float64(tp)
}
