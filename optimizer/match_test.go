package optimizer

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"rulebook/rewrite"
	"rulebook/rules"
)

// The matcher yields the embeddings that matching each pattern's nodes
// first to last finds, in that order (the reference below, which is how
// rewrite.Find matched before it planned its order): the search's
// neighbours, and so its result, depend on that order. Checked on each
// shared model and on graphs a random walk of rewrites reaches from it,
// whose nodes are renumbered and partly new.
func TestMatchesInPatternOrder(t *testing.T) {
	_, rws := releasedVariants(t)
	matcher := rewrite.NewMatcher(rws)
	index := rewriteIndex(rws)
	rng := rand.New(rand.NewPCG(16, 4))
	for _, model := range sharedModels {
		g := loadGraph(t, model)
		host := &g.G
		for step := range 4 {
			var want, got []string
			for i := range rws {
				referenceFind(&rws[i], host, func(m *rewrite.Match) {
					want = append(want, describeBound(i, m))
				})
			}
			var next []*rules.Graph
			matcher.Matches(host, func(rw *rewrite.Rewrite, m *rewrite.Match) bool {
				got = append(got, describeBound(index[rw], m))
				if h, err := rewrite.Apply(host, rw.From, rw.To, m); err == nil {
					next = append(next, h)
				}
				return true
			})
			if !slices.Equal(got, want) {
				t.Fatalf("%s, step %d: the matcher's %d matches differ from the %d found in pattern order", model, step, len(got), len(want))
			}
			if len(next) == 0 {
				break
			}
			host = next[rng.IntN(len(next))]
		}
	}
}

// describeBound describes a match by its nodes and bound inputs: an
// unbound input's value means nothing.
func describeBound(rw int, m *rewrite.Match) string {
	in := slices.Clone(m.Inputs)
	for i, b := range m.Bound {
		if !b {
			in[i] = rules.Value{}
		}
	}
	return fmt.Sprint(rw, m.Nodes, in, m.Bound)
}

// referenceFind is rewrite.FindCommutative as it was: the pattern's
// nodes matched first to last, each among the readers of the host node
// its first operand matched, or else among every host node, in ascending
// order, a commutative one's operands in order before swapped.
func referenceFind(rw *rewrite.Rewrite, host *rules.Graph, yield func(*rewrite.Match)) {
	pattern := rw.From
	if len(pattern.Nodes) == 0 || slices.ContainsFunc(pattern.Outputs, rules.Value.IsInput) {
		return
	}
	users := make([][]int, len(host.Nodes))
	for i, n := range host.Nodes {
		for _, a := range n.Args {
			if !a.IsInput() && !slices.Contains(users[a.Node], i) {
				users[a.Node] = append(users[a.Node], i)
			}
		}
	}
	all := make([]int, len(host.Nodes))
	for i := range all {
		all[i] = i
	}
	m := &rewrite.Match{Nodes: make([]int, len(pattern.Nodes)), Inputs: make([]rules.Value, pattern.NumInputs), Bound: make([]bool, pattern.NumInputs)}
	var search func(i int)
	try := func(i, h int, args []rules.Value) {
		saved := slices.Clone(m.Bound)
		savedIn := slices.Clone(m.Inputs)
		ok := true
		for j, a := range pattern.Nodes[i].Args {
			switch hv := args[j]; {
			case !a.IsInput():
				ok = ok && hv == rules.Value{Node: m.Nodes[a.Node], Out: a.Out}
			case m.Bound[a.Input()]:
				ok = ok && m.Inputs[a.Input()] == hv
			default:
				m.Inputs[a.Input()], m.Bound[a.Input()] = hv, true
			}
		}
		if ok {
			m.Nodes[i] = h
			search(i + 1)
		}
		copy(m.Bound, saved)
		copy(m.Inputs, savedIn)
	}
	search = func(i int) {
		if i == len(pattern.Nodes) {
			yield(m)
			return
		}
		pn := &pattern.Nodes[i]
		candidates := all
		if k := slices.IndexFunc(pn.Args, func(a rules.Value) bool { return !a.IsInput() }); k >= 0 {
			candidates = users[m.Nodes[pn.Args[k].Node]]
		}
		for _, h := range candidates {
			hn := &host.Nodes[h]
			if hn.Op.Name != pn.Op.Name || !slices.Equal(hn.Params, pn.Params) {
				continue
			}
			try(i, h, hn.Args)
			if rw.Commutative && hn.Op.Commutative && hn.Args[0] != hn.Args[1] {
				try(i, h, []rules.Value{hn.Args[1], hn.Args[0]})
			}
		}
	}
	search(0)
}
