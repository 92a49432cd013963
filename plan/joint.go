package plan

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"rulebook/cluster"
	"rulebook/rules"
	"rulebook/training"
)

// Joint is the family whose tensor-parallel layouts are searched, not
// assigned: for each data × tensor factorization of the devices, a dynamic
// program over the graph in order chooses every operator's layout among
// all it may take given how its inputs are cut (jointOptions), pricing
// each choice's compute and collectives (jointCost). The greedy Megatron
// assignment (assignTensorParallel) is one path through the same choices,
// so the search never prices a plan above it.
//
// This is the first part of Unity's joint search (issue 28): the
// layouts of one parallel-tensor model chosen per operator. The rule
// substitutions and machine mappings of Unity's upper levels build on it.
const Joint Kind = "joint"

// jointBeam bounds the states kept per operator: each is a choice of cut
// for every activation still to be read. A transformer keeps a handful
// alive at once and Inception's four strands a few dozen, so the bound is
// met only by graphs with many long-lived tensors, where the cheapest
// states are kept.
const jointBeam = 256

// jointState is one set of choices so far: the cut axis of every live
// activation (−1: whole on every device), their priced cost, and the
// layouts chosen, newest first.
type jointState struct {
	cut map[string]cutAt
	// fused are the values whose one relu reader runs in their
	// producer's kernel, chosen when the producer was laid out
	fused  map[string]bool
	cost   float64
	chosen *chosenLayout
}

type chosenLayout struct {
	l    OpLayout
	prev *chosenLayout
}

// jointLayouts is the cheapest layout of every operator for strategy s by
// jointCost. Where the version proves a product's fusion with the relu
// that follows it, the search also chooses whether to fuse: a fused
// relu costs nothing, but its product can no longer be cut by rows, since
// relu does not pass partial sums. Options.Sequential fuses first, as an
// algebraic optimizer blind to parallelism would, and searches the
// layouts after.
func jointLayouts(g *training.Graph, s Strategy, o Options, c *costs) []OpLayout {
	if s.TP <= 1 {
		out := make([]OpLayout, len(g.Ops))
		for i := range g.Ops {
			if j, ok := o.fusable(g, i); ok {
				out[j].Fused = true
			}
		}
		return out
	}
	price := newJointPricer(g, s, o, c)
	last := lastReads(g)
	states := []*jointState{{cut: map[string]cutAt{}, fused: map[string]bool{}}}
	for i, op := range g.Ops {
		next := map[string]*jointState{}
		for _, st := range states {
			in := inputCuts(g, op, st.cut)
			for _, ch := range o.jointChoices(g, i, in, s.TP, st.fused) {
				if o.Substitutions != nil && !o.Substitutions.allows(op, ch.l) {
					continue
				}
				cut := advance(g, i, op, in, ch.l, st.cut, last)
				fused := nextFused(st.fused, op, ch.fuse)
				n := &jointState{cut: cut, fused: fused, cost: st.cost + price.of(i, ch.l), chosen: &chosenLayout{ch.l, st.chosen}}
				k := stateKey(cut, fused)
				if old, ok := next[k]; !ok || n.cost < old.cost {
					next[k] = n
				}
			}
		}
		states = cheapest(next, jointBeam)
	}
	best := slices.MinFunc(states, func(a, b *jointState) int { return cmp.Compare(a.cost, b.cost) })
	out := make([]OpLayout, len(g.Ops))
	for i, c := len(g.Ops)-1, best.chosen; i >= 0; i, c = i-1, c.prev {
		out[i] = c.l
	}
	return out
}

// choice is one layout of an operator and whether its relu reader runs
// fused into it.
type choice struct {
	l    OpLayout
	fuse bool
}

// jointChoices are op i's layouts (jointOptions), each with and without
// fusing its relu where the version proves the fusion and the layout
// allows it (not a row cut), only fused under Options.Sequential. A relu
// whose product chose to fuse it follows its input's cut, fused.
func (o Options) jointChoices(g *training.Graph, i int, in inputSlices, tp int, fused map[string]bool) []choice {
	op := g.Ops[i]
	if slices.ContainsFunc(op.Inputs, func(v string) bool { return fused[v] }) {
		l := OpLayout{}
		if at, ok := in.cuts[0]; ok {
			l = at.layout(Sharded)
		}
		l.Fused = true
		return []choice{{l: l}}
	}
	_, canFuse := o.fusable(g, i)
	var out []choice
	for _, l := range jointOptions(g, i, in, tp) {
		if canFuse && !l.ForwardAllReduce {
			out = append(out, choice{l, true})
		}
		if !canFuse || !o.Sequential {
			out = append(out, choice{l, false})
		}
	}
	return out
}

// fusable is the relu that product i could run in its kernel, by the
// version's fusion rule: the one reader of the product's one output.
func (o Options) fusable(g *training.Graph, i int) (int, bool) {
	op := g.Ops[i]
	if o.Substitutions == nil || o.Substitutions.Fuse == nil || op.Product == nil || !op.Product.Linear || len(op.Outputs) != 1 {
		return 0, false
	}
	readers := g.Consumers(op.Outputs[0])
	if len(readers) != 1 {
		return 0, false
	}
	j := readers[0]
	return j, registryName(g.Ops[j].Type) == rules.NameRelu && len(g.Ops[j].Inputs) == 1
}

// nextFused is the fused values after op runs: the one it read dropped,
// its output added when it chose to fuse its relu.
func nextFused(fused map[string]bool, op training.Op, fuse bool) map[string]bool {
	out := make(map[string]bool, len(fused)+1)
	for v := range fused {
		if !slices.Contains(op.Inputs, v) {
			out[v] = true
		}
	}
	if fuse {
		out[op.Outputs[0]] = true
	}
	return out
}

// jointOptions are the layouts op may take given its inputs' cuts: the
// greedy's choice (assignTensorParallel), and besides it gathering its
// inputs whole, leaving a product uncut, or cutting a product's output
// columns after gathering.
func jointOptions(g *training.Graph, i int, in inputSlices, tp int) []OpLayout {
	op := g.Ops[i]
	var out []OpLayout
	add := func(l OpLayout) {
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	switch {
	case op.Product != nil && op.ParamBytes > 0:
		add(productLayout(g, i, in, tp))
		if len(in.cuts) > 0 {
			whole := productLayout(g, i, inputSlices{activation: true, replicated: true}, tp)
			whole.GatherInputs = true
			add(whole)
			add(OpLayout{Style: Replicated, GatherInputs: true})
		} else {
			add(OpLayout{Style: Replicated})
		}
	case len(in.cuts) == 0 || op.Class.Cut == training.CutMetadata:
		add(OpLayout{})
	default:
		if at, ok := followCut(g, op, in, tp); ok {
			add(at.layout(Sharded))
		}
		add(OpLayout{Style: Replicated, GatherInputs: true})
	}
	return out
}

// advance is the live activations' cuts after op i runs under l: its
// outputs added as assignTensorParallel records them, and what no later
// operator reads dropped.
func advance(g *training.Graph, i int, op training.Op, in inputSlices, l OpLayout, cut map[string]cutAt, last map[string]int) map[string]cutAt {
	out := make(map[string]cutAt, len(cut)+len(op.Outputs))
	for v, a := range cut {
		if last[v] > i {
			out[v] = a
		}
	}
	if !in.activation || op.Class.Cut == training.CutMetadata {
		return out
	}
	for _, v := range op.Outputs {
		if last[v] <= i {
			continue
		}
		out[v] = cutAt{axis: -1}
		if l.sliced() {
			out[v] = l.at()
		}
	}
	return out
}

// lastReads is the last operator reading each value.
func lastReads(g *training.Graph) map[string]int {
	last := map[string]int{}
	for i, op := range g.Ops {
		for _, v := range op.Inputs {
			last[v] = i
		}
	}
	return last
}

func stateKey(cut map[string]cutAt, fused map[string]bool) string {
	keys := make([]string, 0, len(cut)+len(fused))
	for v, a := range cut {
		keys = append(keys, v+"\x00"+strconv.Itoa(a.axis)+"/"+strconv.Itoa(a.groups))
	}
	for v := range fused {
		keys = append(keys, v+"\x00fused")
	}
	slices.Sort(keys)
	return strings.Join(keys, "\x01")
}

// cheapest keeps the n cheapest states, in a fixed order.
func cheapest(m map[string]*jointState, n int) []*jointState {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(m[a].cost, m[b].cost), cmp.Compare(a, b)) })
	out := make([]*jointState, 0, min(n, len(keys)))
	for _, k := range keys[:min(n, len(keys))] {
		out = append(out, m[k])
	}
	return out
}

// jointPricer prices one operator's layout as the simulator would, summed
// rather than scheduled: its forward and backward on the device for every
// micro-batch, the tensor-parallel collectives its layout needs (as the
// task graph issues them, on the slowest of the stage's groups), and the
// data-parallel all-reduce of its weight's gradient, once a step. The
// simulator overlaps some of these; the sum ranks layouts, and the plan
// chosen is then simulated like any other.
type jointPricer struct {
	g     *training.Graph
	s     Strategy
	o     Options
	c     *costs
	micro float64
	tp    groups
	dp    groups
	act   float64
}

func newJointPricer(g *training.Graph, s Strategy, o Options, c *costs) *jointPricer {
	b := &builder{o: o, s: s}
	micro := 1 / float64(s.DP*s.Microbatches)
	return &jointPricer{g: g, s: s, o: o, c: c, micro: micro, tp: b.tpGroups(0), dp: b.dpGroups(0), act: micro * c.elem / 4}
}

func (p *jointPricer) of(i int, l OpLayout) float64 {
	if l.Fused {
		return 0
	}
	op := p.g.Ops[i]
	t := p.c.op(p.g, op, piece{share: p.micro, cut: l.cut(p.s.TP), style: l.Style})
	per := t.Forward + t.Backward
	in := inputBytes(p.g, op) * p.act
	if l.GatherInputs {
		per += p.tp.slowest(func(pl cluster.Placement) float64 { return p.o.Machine.AllGatherAt(pl, in) })
	}
	if l.ForwardAllReduce {
		per += p.tp.slowest(func(pl cluster.Placement) float64 { return p.o.Machine.AllReduceAt(pl, op.OutputBytes*p.act) })
	}
	if l.BackwardAllReduce {
		per += p.tp.slowest(func(pl cluster.Placement) float64 { return p.o.Machine.AllReduceAt(pl, in) })
	}
	total := per * float64(p.s.Microbatches)
	if op.ParamBytes > 0 && p.s.DP > 1 {
		w := op.ParamBytes * l.cut(p.s.TP)
		total += p.dp.slowest(func(pl cluster.Placement) float64 { return p.o.Machine.AllReduceAt(pl, w) })
	}
	return total
}

// inputBytes are the fp32 bytes of the activations op reads.
func inputBytes(g *training.Graph, op training.Op) float64 {
	var s float64
	for _, v := range op.Inputs {
		if _, ok := g.Producer(v); ok {
			s += g.ValueBytes(v)
		}
	}
	return s
}
