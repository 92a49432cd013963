package optimizer

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"rulebook/onnx"
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

// The GPU model's prices depend on more of a node's operands than the
// CPU model's (a bias or relu epilogue of a product, a view): neighbours
// still price each neighbour as the built graph is priced.
func TestNeighboursOnRandomWalksGPU(t *testing.T) {
	vs, rws := releasedVariants(t)
	r := rand.New(rand.NewPCG(29, 4))
	for _, model := range sharedModels {
		t.Run(model, func(t *testing.T) {
			g := loadGraph(t, model)
			for range 4 {
				g = checkNeighboursPriced(t, H200(), g, vs, rws, 1, r)[0]
			}
		})
	}
}

// checkNeighbours compares every neighbour of g as neighbours evaluates it
// with the built one, and returns up to keep neighbours that type-check:
// the first ones, or with r a sample drawn at random.
func checkNeighbours(t *testing.T, g *Graph, vs []variant, rws []rewrite.Rewrite, keep int, r *rand.Rand) []*Graph {
	t.Helper()
	return checkNeighboursPriced(t, DefaultCPU(), g, vs, rws, keep, r)
}

// checkNeighboursPriced is checkNeighbours with the given cost model.
func checkNeighboursPriced(t *testing.T, cost CostModel, g *Graph, vs []variant, rws []rewrite.Rewrite, keep int, r *rand.Rand) []*Graph {
	t.Helper()
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
		index := rewriteIndex(rws)
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
	index := rewriteIndex(rws)
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

// Where a rewrite changes how a weight is computed, neighbours infers and
// prices again only the weight-only nodes below it and their readers
// (markWeightReaders): on walks that take, at each step, a neighbour with
// more weight-only nodes (a convolution's folded scale, biases added
// together), every neighbour of every graph on the way prices and
// type-checks as built. The walks start from resnet50, inception_v3 and
// a convolution with three biases, whose sum becomes a weight-only
// channel bias that the convolution fuses (and rewrites of that sum
// reprice the ewadd adding it).
func TestNeighboursAfterWeightRewrites(t *testing.T) {
	vs, rws := releasedVariants(t)
	r := rand.New(rand.NewPCG(5, 21))
	biases := biasedConv(t, 3)
	fused := false
	for _, c := range []struct {
		name string
		g    *Graph
	}{{"resnet50", loadGraph(t, "resnet50.onnx")}, {"inception_v3", loadGraph(t, "inception_v3.onnx")}, {"biases", biases}} {
		t.Run(c.name, func(t *testing.T) {
			g := c.g
			for range 4 {
				checkNeighbours(t, g, vs, rws, 0, nil)
				g = moreWeightNodes(t, g, rws, r)
				fused = fused || computedBias(g)
			}
			checkNeighbours(t, g, vs, rws, 0, nil)
		})
	}
	if !fused {
		t.Error("no convolution fused a bias computed from weights: the walks missed what they are for")
	}
}

// A rewrite of a weight-only node two steps above an ewadd that adds a
// channel bias to a convolution changes the ewadd's price: the bias
// computed through a max pool (of window 1) is not a channel bias, and
// without the pool it is again, so that the convolution fuses the ewadd.
// Neighbours prices the ewadd again although the rewrite changed a node
// below it only (see markWeightReaders).
func TestNeighboursRepriceChannelBias(t *testing.T) {
	_, rws := releasedVariants(t)
	g := biasedConv(t, 2)
	r := rand.New(rand.NewPCG(1, 2))
	for !computedBias(g) { // (ewadd (conv2d …) (ewadd b1 b2))
		g = moreWeightNodes(t, g, rws, r)
	}
	var pooled *Graph
	for _, h := range rewrites(t, g, "(ewadd ?a ?b) => (ewadd (pool_max 1 1 same ?a) ?b)") {
		weight := h.weightNodes()
		for i, n := range h.G.Nodes {
			if n.Op.Name == "pool_max" && weight[i] && len(h.convBiases(h.liveNodes(), weight, h.uses())) == 0 {
				pooled = h
			}
		}
	}
	if pooled == nil {
		t.Fatal("no graph pools the bias")
	}
	vs, unpool, _ := variants(shapedRuleSet(t, "(pool_max 1 1 same ?a)", "?a", "?a:1x4x8x8"))
	checkNeighbours(t, pooled, vs, unpool, 0, nil)
}

// biasedConv maps relu(conv(x, w) + b1 + b2 + …) with n biases, the
// first the Conv's own, of 4 channels on 8×8 images.
func biasedConv(t *testing.T, n int) *Graph {
	t.Helper()
	weights := map[string][]int{"w": {4, 4, 1, 1}, "b1": {4}}
	nodes := []*onnx.Node{{Name: "conv", OpType: "Conv", Inputs: []string{"x", "w", "b1"}, Outputs: []string{"c1"}}}
	for i := 2; i <= n; i++ {
		b, in, out := fmt.Sprint("b", i), fmt.Sprint("c", i-1), fmt.Sprint("c", i)
		weights[b] = []int{4, 1, 1}
		nodes = append(nodes, &onnx.Node{Name: out, OpType: "Add", Inputs: []string{in, b}, Outputs: []string{out}})
	}
	nodes = append(nodes, &onnx.Node{Name: "relu", OpType: "Relu", Inputs: []string{fmt.Sprint("c", n)}, Outputs: []string{"y"}})
	m, rt := tinyModel(t, []int{1, 4, 8, 8}, weights, []string{"y"}, nodes...)
	g, err := FromONNX(m, rt)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// computedBias reports whether a convolution of g fuses, as its bias, a
// node computed from weights alone.
func computedBias(g *Graph) bool {
	weight := g.weightNodes()
	for _, add := range g.convBiases(g.liveNodes(), weight, g.uses()) {
		for _, a := range g.G.Nodes[add].Args {
			if !a.IsInput() && weight[a.Node] {
				return true
			}
		}
	}
	return false
}

// moreWeightNodes returns a neighbour of g, drawn at random, that
// type-checks and has more weight-only nodes than g.
func moreWeightNodes(t *testing.T, g *Graph, rws []rewrite.Rewrite, r *rand.Rand) *Graph {
	t.Helper()
	weights := func(g *Graph) int {
		return len(slices.DeleteFunc(g.weightNodes(), func(w bool) bool { return !w }))
	}
	have := weights(g)
	var pick *Graph
	seen := 0
	rewrite.Neighbours(&g.G, rws, func(rw *rewrite.Rewrite, m *rewrite.Match, next *rules.Graph) bool {
		h := g.with(next)
		if h.Infer() != nil || weights(h) <= have {
			return true
		}
		if seen++; r.IntN(seen) == 0 {
			pick = h
		}
		return true
	})
	if pick == nil {
		t.Fatal("no neighbour has more weight-only nodes")
	}
	return pick
}
