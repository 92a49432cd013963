// Package seriesparallel decomposes a computation graph into sequence and
// parallel splits, the structure Unity's machine-mapping search recurses
// over (../shared/seeds/000_…, §5.2, Figure 13).
//
// A sequence split cuts a set of operators at the operators every path
// through the set passes: everything before such an operator finishes
// before it starts, and everything after waits for it. A parallel split
// separates parts that share no edge. A dynamic program over the tree
// that results prices each part once per layout of the tensors at its
// boundary.
//
// Not every graph is series-parallel: a stretch where a tensor skips past
// the operator that would cut it, and another strand feeds that operator,
// has neither split. Such a part is split at the point of its topological
// order that the fewest tensors cross (a Cut); the search then carries
// the layouts of all the crossing tensors across it.
package seriesparallel

import (
	"fmt"
	"math/bits"
	"slices"
)

// Kind is what a tree node is.
type Kind int

// The kinds of tree node.
const (
	// Leaf is one operator.
	Leaf Kind = iota
	// Series runs its parts in order; every part after the first depends
	// on the one before it, and on nothing earlier except through it.
	Series
	// Parallel parts share no edge.
	Parallel
	// Cut is a sequence of two parts of a graph with no series or
	// parallel split: tensors cross from the first to the second at
	// Crossing values.
	Cut
)

func (k Kind) String() string {
	return [...]string{"leaf", "series", "parallel", "cut"}[k]
}

// Tree is a decomposition of a set of a graph's operators.
type Tree struct {
	Kind Kind
	// Node is a Leaf's operator.
	Node int
	// Parts are a Series' or Cut's parts in order, a Parallel's parts
	// by their least operator.
	Parts []*Tree
	// Pivot marks a Series' part that is one operator every path through
	// the series passes (Unity's post-dominator): what comes before it
	// reaches what comes after only through its outputs.
	Pivot bool
	// Crossing is, for a Cut, the number of operators whose outputs are
	// read on both sides of it.
	Crossing int
}

// Nodes lists the tree's operators in order.
func (t *Tree) Nodes() []int {
	if t.Kind == Leaf {
		return []int{t.Node}
	}
	var out []int
	for _, p := range t.Parts {
		out = append(out, p.Nodes()...)
	}
	return out
}

// Count is how many tree nodes have kind k.
func (t *Tree) Count(k Kind) int {
	n := 0
	if t.Kind == k {
		n++
	}
	for _, p := range t.Parts {
		n += p.Count(k)
	}
	return n
}

// String writes the tree as nested text: S(…) for series, P(…) for
// parallel, C(…) for cuts, and leaves as their operator numbers.
func (t *Tree) String() string {
	if t.Kind == Leaf {
		return fmt.Sprint(t.Node)
	}
	s := map[Kind]string{Series: "S(", Parallel: "P(", Cut: "C("}[t.Kind]
	for i, p := range t.Parts {
		if i > 0 {
			s += " "
		}
		s += p.String()
	}
	return s + ")"
}

// Decompose splits the operators 0…n−1 of an acyclic graph whose edges
// run from an operator to one that reads its output. Operators must be
// numbered in a topological order (every edge from a lower number to a
// higher one), as ONNX's graphs and training.Graph keep them.
func Decompose(n int, edges [][2]int) (*Tree, error) {
	if n <= 0 {
		return nil, fmt.Errorf("no operators to decompose")
	}
	g := &graph{succ: make([][]int, n), pred: make([][]int, n)}
	for _, e := range edges {
		from, to := e[0], e[1]
		if from < 0 || to < 0 || from >= n || to >= n {
			return nil, fmt.Errorf("edge %d→%d: operators are numbered 0 to %d", from, to, n-1)
		}
		if from >= to {
			return nil, fmt.Errorf("edge %d→%d: operators must be numbered in topological order", from, to)
		}
		g.succ[from] = append(g.succ[from], to)
		g.pred[to] = append(g.pred[to], from)
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	return g.decompose(all), nil
}

type graph struct{ succ, pred [][]int }

// decompose splits a set of operators, sorted.
func (g *graph) decompose(set []int) *Tree {
	if len(set) == 1 {
		return &Tree{Kind: Leaf, Node: set[0]}
	}
	if parts := g.components(set); len(parts) > 1 {
		return g.join(Parallel, parts)
	}
	if parts := g.sequence(set); len(parts) > 1 {
		return &Tree{Kind: Series, Parts: parts}
	}
	first, second, crossing := g.cut(set)
	t := g.join(Cut, [][]int{first, second})
	t.Crossing = crossing
	return t
}

func (g *graph) join(k Kind, parts [][]int) *Tree {
	t := &Tree{Kind: k}
	for _, p := range parts {
		t.Parts = append(t.Parts, g.decompose(p))
	}
	return t
}

// components are the set's weakly connected parts, each sorted, in order
// of their least operator.
func (g *graph) components(set []int) [][]int {
	in := membership(set)
	seen := map[int]bool{}
	var out [][]int
	for _, s := range set {
		if seen[s] {
			continue
		}
		comp := []int{}
		stack := []int{s}
		seen[s] = true
		for len(stack) > 0 {
			v := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			comp = append(comp, v)
			for _, w := range slices.Concat(g.succ[v], g.pred[v]) {
				if in[w] && !seen[w] {
					seen[w] = true
					stack = append(stack, w)
				}
			}
		}
		slices.Sort(comp)
		out = append(out, comp)
	}
	return out
}

// sequence splits a connected set at its pivots: operators that every
// path through the set passes. An operator is one when every other
// operator of the set comes before or after it (by a path within the
// set), no edge jumps from before it to after it, nothing before it is
// read outside the set, and nothing after it reads from outside. The
// parts are the stretches between pivots and the pivots, in order; empty
// stretches are left out. One part means no pivot.
func (g *graph) sequence(set []int) []*Tree {
	before := g.reach(set, false) // before[i]: set members with a path to set[i]
	after := g.reach(set, true)
	in := membership(set)
	pos := make(map[int]int, len(set))
	for i, v := range set {
		pos[v] = i
	}
	// reach[i]: the furthest position an edge from set[:i+1] lands on,
	// len(set) when one of them is read outside the set
	reach := make([]int, len(set))
	// fromOutside[i]: some member of set[i:] reads from outside the set
	fromOutside := make([]bool, len(set)+1)
	for i := len(set) - 1; i >= 0; i-- {
		fromOutside[i] = fromOutside[i+1]
		for _, u := range g.pred[set[i]] {
			fromOutside[i] = fromOutside[i] || !in[u]
		}
	}
	far := 0
	for i, v := range set {
		for _, w := range g.succ[v] {
			if in[w] {
				far = max(far, pos[w])
			} else {
				far = len(set)
			}
		}
		reach[i] = far
	}
	var pivots []int
	for i := range set {
		whole := before[i].count() == i && after[i].count() == len(set)-1-i
		jumped := i > 0 && reach[i-1] > i
		if whole && !jumped && !fromOutside[i+1] && (i == 0 || reach[i-1] < len(set)) {
			pivots = append(pivots, i)
		}
	}
	if len(pivots) == 0 {
		return nil
	}
	var out []*Tree
	start := 0
	for _, c := range pivots {
		if c > start {
			out = append(out, g.decompose(set[start:c]))
		}
		out = append(out, &Tree{Kind: Leaf, Node: set[c], Pivot: true})
		start = c + 1
	}
	if start < len(set) {
		out = append(out, g.decompose(set[start:]))
	}
	return out
}

// reach gives, for each member of the set, the members reachable from it
// by paths within the set: its descendants when forward, else its
// ancestors. The set is in topological order, so one pass in the right
// direction suffices.
func (g *graph) reach(set []int, forward bool) []bitset {
	next := g.pred
	if forward {
		next = g.succ
	}
	index := make(map[int]int, len(set))
	for i, v := range set {
		index[v] = i
	}
	out := make([]bitset, len(set))
	order := make([]int, len(set))
	for i := range order {
		order[i] = i
	}
	if forward {
		slices.Reverse(order)
	}
	for _, i := range order {
		out[i] = newBitset(len(set))
		for _, w := range next[set[i]] {
			if j, ok := index[w]; ok {
				out[i].set(j)
				out[i].or(out[j])
			}
		}
	}
	return out
}

// cut splits a set with no series or parallel split in two at the point
// of its order that the fewest operators' outputs cross, the most even
// such point where several tie.
func (g *graph) cut(set []int) (first, second []int, crossing int) {
	in := membership(set)
	pos := make(map[int]int, len(set))
	for i, v := range set {
		pos[v] = i
	}
	// last[i]: the position of set[i]'s last reader within the set
	last := make([]int, len(set))
	for i, v := range set {
		last[i] = i
		for _, w := range g.succ[v] {
			if in[w] {
				last[i] = max(last[i], pos[w])
			}
		}
	}
	best, bestAt := -1, 0
	for at := 1; at < len(set); at++ {
		n := 0
		for i := 0; i < at; i++ {
			if last[i] >= at {
				n++
			}
		}
		even := func(a int) int { return abs(2*a - len(set)) }
		if best < 0 || n < best || (n == best && even(at) < even(bestAt)) {
			best, bestAt = n, at
		}
	}
	return set[:bestAt], set[bestAt:], best
}

func membership(set []int) map[int]bool {
	in := make(map[int]bool, len(set))
	for _, v := range set {
		in[v] = true
	}
	return in
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// bitset is a set of small integers.
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }
func (b bitset) set(i int)   { b[i/64] |= 1 << (i % 64) }
func (b bitset) or(c bitset) {
	for i := range b {
		b[i] |= c[i]
	}
}
func (b bitset) count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}
