package enumerate

import (
	"cmp"

	"rulebook/rules"
)

// MaxOps bounds the graph size the compact encoding can hold.
const MaxOps = 7

const noArg = 255

// node is one operator application in the compact encoding. Arguments are
// value ids: ids below the input count are inputs; node j's output o is
// nIn + 2j + o.
type node struct {
	t    uint16
	args [2]uint8
}

// graph is the compact, comparable encoding of an enumerated graph. Nodes
// are in canonical order, so equal graphs have equal encodings.
type graph struct {
	n     uint8
	nodes [MaxOps]node
}

// layout knows how value ids map to inputs and classes.
type layout struct {
	nIn    int
	class  []int // class of each input
	copyOf []int // copy index of each input within its class
	start  []int // first input of each class
	copies []int // copies per class
	tmpls  []template
	nOut   []int // outputs per template
	arity  []int
}

func (l *layout) valueOf(j, out int) uint8 { return uint8(l.nIn + 2*j + out) }
func (l *layout) nodeOf(v uint8) (int, int) {
	return (int(v) - l.nIn) / 2, (int(v) - l.nIn) % 2
}
func (l *layout) isInput(v uint8) bool { return int(v) < l.nIn }

// cmpValue orders values structurally, independent of node numbering.
func (l *layout) cmpValue(g *graph, a, b uint8) int {
	if a == b {
		return 0
	}
	ai, bi := l.isInput(a), l.isInput(b)
	switch {
	case ai && bi:
		return cmp.Compare(a, b)
	case ai:
		return -1
	case bi:
		return 1
	}
	ja, oa := l.nodeOf(a)
	jb, ob := l.nodeOf(b)
	if c := l.cmpNode(g, ja, jb); c != 0 {
		return c
	}
	return cmp.Compare(oa, ob)
}

func (l *layout) cmpNode(g *graph, i, j int) int {
	if i == j {
		return 0
	}
	a, b := g.nodes[i], g.nodes[j]
	if c := cmp.Compare(a.t, b.t); c != 0 {
		return c
	}
	for k := 0; k < l.arity[a.t]; k++ {
		if c := l.cmpValue(g, a.args[k], b.args[k]); c != 0 {
			return c
		}
	}
	return 0
}

// canonical renumbers inputs so each class is used as a prefix (keeping
// their order) and sorts nodes so that the last node is always the largest
// sink: the order in which the generator builds the graph.
func (l *layout) canonical(g graph) graph {
	g = l.compact(g)
	var order [MaxOps]int
	var placed [MaxOps]bool
	for pos := int(g.n) - 1; pos >= 0; pos-- {
		best := -1
		for j := 0; j < int(g.n); j++ {
			if placed[j] || l.consumedByUnplaced(&g, j, &placed) {
				continue
			}
			if best < 0 || l.cmpNode(&g, j, best) > 0 {
				best = j
			}
		}
		order[pos] = best
		placed[best] = true
	}
	return l.reorder(g, order[:g.n])
}

func (l *layout) consumedByUnplaced(g *graph, j int, placed *[MaxOps]bool) bool {
	for k := 0; k < int(g.n); k++ {
		if k == j || placed[k] {
			continue
		}
		nd := g.nodes[k]
		for a := 0; a < l.arity[nd.t]; a++ {
			if !l.isInput(nd.args[a]) {
				if src, _ := l.nodeOf(nd.args[a]); src == j {
					return true
				}
			}
		}
	}
	return false
}

// reorder places old node order[i] at position i.
func (l *layout) reorder(g graph, order []int) graph {
	var pos [MaxOps]int
	for i, old := range order {
		pos[old] = i
	}
	out := graph{n: uint8(len(order))}
	for i, old := range order {
		nd := g.nodes[old]
		for a := 0; a < l.arity[nd.t]; a++ {
			if v := nd.args[a]; !l.isInput(v) {
				j, o := l.nodeOf(v)
				nd.args[a] = l.valueOf(pos[j], o)
			}
		}
		out.nodes[i] = nd
	}
	return out
}

// compact renames inputs so every class uses copies 0..k−1, preserving order.
func (l *layout) compact(g graph) graph {
	var used [256]bool
	for j := 0; j < int(g.n); j++ {
		nd := g.nodes[j]
		for a := 0; a < l.arity[nd.t]; a++ {
			if l.isInput(nd.args[a]) {
				used[nd.args[a]] = true
			}
		}
	}
	var rename [256]uint8
	for c, s := range l.start {
		next := s
		for i := s; i < s+l.copies[c]; i++ {
			if used[i] {
				rename[i] = uint8(next)
				next++
			}
		}
	}
	for j := 0; j < int(g.n); j++ {
		nd := &g.nodes[j]
		for a := 0; a < l.arity[nd.t]; a++ {
			if l.isInput(nd.args[a]) {
				nd.args[a] = rename[nd.args[a]]
			}
		}
	}
	return g
}

// without removes node s, a sink.
func (l *layout) without(g graph, s int) graph {
	order := make([]int, 0, g.n-1)
	for j := 0; j < int(g.n); j++ {
		if j != s {
			order = append(order, j)
		}
	}
	return l.reorder(g, order)
}

// isPrefix reports whether every class's used copies form a prefix.
func (l *layout) isPrefix(used []uint64) bool {
	for _, m := range used {
		if m&(m+1) != 0 {
			return false
		}
	}
	return true
}

func cmpGraph(a, b *graph) int {
	if c := cmp.Compare(a.n, b.n); c != 0 {
		return c
	}
	for j := 0; j < int(a.n); j++ {
		x, y := a.nodes[j], b.nodes[j]
		if c := cmp.Compare(x.t, y.t); c != 0 {
			return c
		}
		if c := cmp.Compare(x.args[0], y.args[0]); c != 0 {
			return c
		}
		if c := cmp.Compare(x.args[1], y.args[1]); c != 0 {
			return c
		}
	}
	return 0
}

// outputs lists the values no node consumes, in value-id order; a graph
// without nodes has the given trivial outputs.
func (l *layout) outputs(g *graph) []uint8 {
	var consumed [256]bool
	for j := 0; j < int(g.n); j++ {
		nd := g.nodes[j]
		for a := 0; a < l.arity[nd.t]; a++ {
			consumed[nd.args[a]] = true
		}
	}
	var outs []uint8
	for j := 0; j < int(g.n); j++ {
		for o := 0; o < l.nOut[g.nodes[j].t]; o++ {
			if v := l.valueOf(j, o); !consumed[v] {
				outs = append(outs, v)
			}
		}
	}
	return outs
}

// decode turns a compact graph into the rules IR over all pool inputs.
func (l *layout) decode(g *graph, trivial []uint8) rules.Graph {
	toValue := func(v uint8) rules.Value {
		if l.isInput(v) {
			return rules.InputValue(int(v))
		}
		j, o := l.nodeOf(v)
		return rules.Value{Node: j, Out: o}
	}
	out := rules.Graph{NumInputs: l.nIn}
	for j := 0; j < int(g.n); j++ {
		nd := g.nodes[j]
		t := l.tmpls[nd.t]
		rn := rules.Node{Op: t.op, Params: t.params}
		if t.op.IsConstant() {
			s := t.constShape
			rn.ConstShape = &s
		}
		for a := 0; a < l.arity[nd.t]; a++ {
			rn.Args = append(rn.Args, toValue(nd.args[a]))
		}
		out.Nodes = append(out.Nodes, rn)
	}
	outs := l.outputs(g)
	if g.n == 0 {
		outs = trivial
	}
	for _, v := range outs {
		out.Outputs = append(out.Outputs, toValue(v))
	}
	return out
}
