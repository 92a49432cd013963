package optimizer

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"rulebook/rewrite"
	"rulebook/rules"
)

// The type check and cost that neighbours derives from what a rewrite
// changed are those of the neighbour built by Apply and priced whole, bit
// for bit, on every neighbour of each shared model's graph under the
// released rulebook, and of two of its neighbours' neighbours (whose
// nodes are all live, unlike a mapped model's).
func TestNeighboursMatchBuiltGraphs(t *testing.T) {
	vs, rws := releasedVariants(t)
	for _, model := range sharedModels {
		t.Run(model, func(t *testing.T) {
			g := loadGraph(t, model)
			children := checkNeighbours(t, g, vs, rws, 2, nil)
			for _, c := range children {
				checkNeighbours(t, c, vs, rws, 0, nil)
			}
		})
	}
}

// A mapped model may hold nodes nothing reads, which a built neighbour
// drops: their reads must not count (a convolution read by a dead node
// too may fuse its bias in the neighbour). resnet50 with a dead Relu on
// every fourth node's output.
func TestNeighboursOfGraphWithDeadNodes(t *testing.T) {
	vs, rws := releasedVariants(t)
	m, rt := load(t, "resnet50.onnx")
	g, err := FromONNX(m, rt)
	if err != nil {
		t.Fatal(err)
	}
	relu, ok := g.reg.Lookup("relu")
	if !ok {
		t.Fatal("no relu in the registry")
	}
	for i := 0; i < len(g.G.Nodes); i += 4 {
		node := rules.Node{Op: relu, Args: []rules.Value{{Node: i}}}
		if out, err := g.inferNode(&node); err == nil {
			g.G.Nodes, g.Shapes = append(g.G.Nodes, node), append(g.Shapes, out)
		}
	}
	if live := g.liveNodes(); live[len(live)-1] {
		t.Fatal("the added Relus are live")
	}
	checkNeighbours(t, g, vs, rws, 0, nil)
}

// Costs are exact sums, so the cost neighbours derives is the built
// graph's whatever the node order: on random walks of a few rewrites
// from each shared model, every neighbour of every graph on the way
// prices and type-checks as built.
func TestNeighboursOnRandomWalks(t *testing.T) {
	vs, rws := releasedVariants(t)
	r := rand.New(rand.NewPCG(16, 4))
	for _, model := range sharedModels {
		t.Run(model, func(t *testing.T) {
			g := loadGraph(t, model)
			for range 4 {
				g = checkNeighbours(t, g, vs, rws, 1, r)[0]
			}
		})
	}
}

// checkNeighbours compares every neighbour of g as neighbours evaluates it
// with the built one, and returns up to keep neighbours that type-check:
// the first ones, or with r a sample drawn at random.
func checkNeighbours(t *testing.T, g *Graph, vs []variant, rws []rewrite.Rewrite, keep int, r *rand.Rand) []*Graph {
	t.Helper()
	cost := DefaultCPU()
	nb := newNeighbours(g, cost, map[rewrite.Hash]bool{})
	var kept []*Graph
	checked, priced, repeats := 0, 0, 0
	// The built neighbours' keys, for repeated changes.
	keys := map[string]bool{}
	rewrite.Matches(&g.G, rws, func(rw *rewrite.Rewrite, m *rewrite.Match) bool {
		defer nb.undo()
		if !g.fitsRanks(&vs[rw.Rule], m) {
			return true
		}
		out := nb.apply(rw, m)
		next, err := rewrite.Apply(&g.G, rw.From, rw.To, m)
		if out == repeated {
			// The same change as an earlier rewrite's: the same graph.
			if err == nil && !keys[rewrite.CommutativeKey(next)] {
				t.Fatalf("rule %d: a repeated change, but a new graph", rw.Rule)
			}
			repeats++
			return true
		}
		if (out == applied) != (err == nil) {
			t.Fatalf("rule %d: outcome %d in place, Apply's error %v", rw.Rule, out, err)
		}
		if err != nil {
			return true
		}
		checked++
		built := g.with(next)
		inferErr := built.Infer()
		got, ok := nb.price()
		keys[rewrite.CommutativeKey(next)] = true
		if ok != (inferErr == nil) {
			t.Fatalf("rule %d: type-checks in place %v, built graph's error %v", rw.Rule, ok, inferErr)
		}
		if !ok {
			return true
		}
		priced++
		if want := cost.Cost(built); got != want {
			t.Fatalf("rule %d: cost %v, built graph's %v", rw.Rule, got, want)
		}
		switch {
		case len(kept) < keep:
			kept = append(kept, built)
		case r != nil && r.IntN(priced) < keep: // each of the priced kept with chance keep/priced
			kept[r.IntN(keep)] = built
		}
		return true
	})
	if checked == 0 || priced == 0 {
		t.Errorf("%d neighbours, %d of them type-check: nothing compared", checked, priced)
	}
	t.Logf("%d nodes: %d neighbours, %d type-check, %d repeat others' changes", len(g.G.Nodes), checked, priced, repeats)
	return kept
}

// rewrite.Matcher replays the matches of a pattern shared by several
// rules: the sequence it yields is the one searching for each rewrite's
// pattern in turn finds, on each shared model under the released
// rulebook, whose rules share hundreds of patterns, with one matcher
// going from model to model.
func TestMatchesReplaySharedPatterns(t *testing.T) {
	_, rws := releasedVariants(t)
	matcher := rewrite.NewMatcher(rws) // one for all models, as a search keeps one
	for _, model := range sharedModels {
		g := loadGraph(t, model)
		var want []string
		for i := range rws {
			rewrite.FindCommutative(rws[i].From, &g.G, func(m *rewrite.Match) bool {
				want = append(want, describeMatch(i, m))
				return true
			})
		}
		index := map[*rewrite.Rewrite]int{}
		for i := range rws {
			index[&rws[i]] = i
		}
		k := 0
		matcher.Matches(&g.G, func(rw *rewrite.Rewrite, m *rewrite.Match) bool {
			if got := describeMatch(index[rw], m); k >= len(want) || got != want[k] {
				t.Fatalf("%s: match %d is %s, want the %d found one by one", model, k, got, len(want))
			}
			k++
			return true
		})
		if k != len(want) {
			t.Errorf("%s: %d matches, %d found one by one", model, k, len(want))
		}
	}
}

func describeMatch(rw int, m *rewrite.Match) string {
	return fmt.Sprint(rw, m.Nodes, m.Inputs, m.Bound)
}

// Given the expanded graph's ancestry (neighbours), the matcher leaves
// out only matches that make a cycle: on each shared model and on graphs
// a few rewrites away, every match MatchesAcyclic skips makes Apply
// refuse the rewrite (rewrite.ErrCycle) and neighbours find it failed,
// and the others come in Matches' order.
func TestMatcherSkipsOnlyCycles(t *testing.T) {
	_, rws := releasedVariants(t)
	matcher := rewrite.NewMatcher(rws)
	index := map[*rewrite.Rewrite]int{}
	for i := range rws {
		index[&rws[i]] = i
	}
	r := rand.New(rand.NewPCG(7, 11))
	skipped := 0
	for _, model := range sharedModels {
		g := loadGraph(t, model)
		for step := range 3 {
			nb := newNeighbours(g, DefaultCPU(), map[rewrite.Hash]bool{})
			var kept []string
			matcher.MatchesAcyclic(&g.G, nb, func(rw *rewrite.Rewrite, m *rewrite.Match) bool {
				kept = append(kept, describeMatch(index[rw], m))
				return true
			})
			k := 0
			var next []*rules.Graph
			matcher.Matches(&g.G, func(rw *rewrite.Rewrite, m *rewrite.Match) bool {
				built, err := rewrite.Apply(&g.G, rw.From, rw.To, m)
				if k < len(kept) && describeMatch(index[rw], m) == kept[k] {
					k++
					if err == nil && r.IntN(50) == 0 {
						next = append(next, built)
					}
					return true
				}
				skipped++
				clear(nb.done) // a repeated change is found before a cycle
				out := nb.apply(rw, m)
				nb.undo()
				if !errors.Is(err, rewrite.ErrCycle) || out != failed {
					t.Fatalf("%s step %d: rule %d skipped at %v, but Apply's error is %v and the outcome in place %d", model, step, rw.Rule, m.Nodes, err, out)
				}
				return true
			})
			if k != len(kept) {
				t.Fatalf("%s step %d: %d matches kept, %d of them in Matches' order", model, step, len(kept), k)
			}
			g = typeChecked(t, g, next)
		}
	}
	if skipped == 0 {
		t.Error("no match skipped: nothing checked")
	}
	t.Logf("%d cyclic matches skipped", skipped)
}

// typeChecked returns the first of the graphs g rewrites to that
// type-checks.
func typeChecked(t *testing.T, g *Graph, next []*rules.Graph) *Graph {
	t.Helper()
	for _, n := range next {
		h := g.with(n)
		if h.Infer() == nil {
			return h
		}
	}
	t.Fatal("no neighbour type-checks")
	return nil
}
