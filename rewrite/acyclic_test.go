package rewrite

import (
	"errors"
	"fmt"
	"testing"

	"rulebook/rules"
)

// walkedAncestry answers Ancestry for a graph by walking it.
type walkedAncestry struct {
	above [][]bool // above[b][a]: b is computed from a
	live  []bool
}

func ancestryOf(g *rules.Graph) *walkedAncestry {
	n := len(g.Nodes)
	w := &walkedAncestry{above: make([][]bool, n), live: make([]bool, n)}
	for i, node := range g.Nodes { // operands first
		w.above[i] = make([]bool, n)
		for _, a := range node.Args {
			if a.IsInput() {
				continue
			}
			w.above[i][a.Node] = true
			for k, ok := range w.above[a.Node] {
				w.above[i][k] = w.above[i][k] || ok
			}
		}
	}
	for _, o := range g.Outputs {
		if !o.IsInput() {
			w.live[o.Node] = true
			for k, ok := range w.above[o.Node] {
				w.live[k] = w.live[k] || ok
			}
		}
	}
	return w
}

func (w *walkedAncestry) Above(a, b int) bool { return w.above[b][a] }
func (w *walkedAncestry) Live(a int) bool     { return w.live[a] }

// MatchesAcyclic leaves out only matches whose rewrite Apply refuses for
// a cycle, and yields the others in Matches' order. Merging two relus
// into one of their concatenation makes a cycle where one relu is
// computed from the other; the chain of three relus beside a fourth
// has such pairs, and pairs without (a relu with itself, or with its
// direct reader, left to Apply).
func TestMatchesAcyclicSkipsOnlyCycles(t *testing.T) {
	merge := parseRule(t, "(outputs (relu ?a) (relu ?b)) => (let ((%0 (relu (concat 0 ?a ?b)))) (outputs (split0 0 %0) (split1 0 %0)))")
	host, err := rules.ParseGraph(rules.Default(), "(outputs (relu (relu (relu ?x))) (relu ?y))")
	if err != nil {
		t.Fatal(err)
	}
	mt := NewMatcher(Both(merge, 0))
	var kept []string
	mt.MatchesAcyclic(host, ancestryOf(host), func(rw *Rewrite, m *Match) bool {
		kept = append(kept, fmt.Sprint(rw.Reversed, m.Nodes, m.Inputs))
		return true
	})
	k, skipped := 0, 0
	mt.Matches(host, func(rw *Rewrite, m *Match) bool {
		if k < len(kept) && fmt.Sprint(rw.Reversed, m.Nodes, m.Inputs) == kept[k] {
			k++
			return true
		}
		skipped++
		if _, err := Apply(host, rw.From, rw.To, m); !errors.Is(err, ErrCycle) {
			t.Errorf("match %v skipped, but Apply's error is %v", m.Nodes, err)
		}
		return true
	})
	if k != len(kept) {
		t.Errorf("%d matches kept, %d of them in Matches' order", len(kept), k)
	}
	// Pairs of the chain's relus, one computed from the other's output
	// through the relu between, both ways round: (first, third) twice.
	if skipped != 2 {
		t.Errorf("%d matches skipped, want 2", skipped)
	}
}
